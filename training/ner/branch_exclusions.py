"""Exclusions by MeSH branch: the KB names of concepts that lie only in branches the annotators leave untagged.

:func:`~.dictionary.annotator_exclusions` lists the wordings annotators seldom tag although they occur often;
a wording that never occurs in training is not among them. A branch of the MeSH tree generalises them: BC5CDR's
annotators tag the names of enzymes (tree D08.811) at 1 of their 204 occurrences in its training set, so
"N-acetyl-beta-D-glucosaminidase", never seen there, is no CHEMICAL under their guideline either, while the
branches of hormones and peptides ("insulin") are tagged at about half their occurrences and stay.

Counted as the other exclusions are (:func:`~.dictionary.annotation_rates`: the pipeline's tokens, corpora that
annotate the label, an occurrence inside another gold mention counts neither way): every name of every KB concept
of the label's types with MeSH tree numbers, summed per branch (tree numbers cut to ``depth`` parts: ``D08.811``).
A branch seen ``min_seen`` or more times and tagged at under ``max_rate`` of them is left out by the annotators;
a name whose concepts all lie only in such branches becomes an exclusion, unless that name itself is tagged at
``max_rate`` or more of its own occurrences.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Set, Tuple

from spacy_sapbert.kb.normalize import normalize

from .dictionary import MIN_CHARACTERS, Annotated, annotation_rates

Branches = Set[str]


def branches_of(tree_numbers: Iterable[str], depth: int) -> Branches:
    """The branches (tree numbers cut to their first ``depth`` parts) a concept lies in."""
    return {".".join(tree.split(".")[:depth]) for tree in tree_numbers}


def concept_trees(kb: Any, trees: Mapping[str, Sequence[str]]) -> Dict[str, List[str]]:
    """KB concept ID → its MeSH tree numbers, for the concepts ``trees`` (descriptor UI → tree numbers) reaches
    (a merged concept through any of its IDs, ``D008232|OMIM:308240``)."""
    found: Dict[str, List[str]] = defaultdict(list)
    for ui, numbers in trees.items():
        concept = kb.resolve(ui)
        if concept is not None:
            found[concept.concept_id].extend(numbers)
    return dict(found)


def concept_names(kb: Any, label_types: Mapping[str, Sequence[str]], with_trees: Iterable[str],
                  tokenize: Any) -> Dict[Tuple[str, Tuple[str, ...]], Set[str]]:
    """(label, a name's lower-case tokens) → the IDs of the concepts of that label's KB types that have it, for
    the concepts ``with_trees`` (:func:`concept_trees`); the concepts without tree numbers that share the name (by
    the KB's normalised form) are among the IDs too, so a name a supplementary record also has lies in no branch."""
    by_name = kb.alias_to_concepts
    names: Dict[Tuple[str, Tuple[str, ...]], Set[str]] = defaultdict(set)
    for concept_id in with_trees:
        concept = kb.resolve(concept_id)
        for label, types in label_types.items():
            if set(types).isdisjoint(concept.types):
                continue
            for name in {concept.canonical_name, *concept.aliases}:
                tokens = tuple(t.lower_ for t in tokenize(name))
                if len("".join(tokens)) >= MIN_CHARACTERS and any(ch.isalpha() for ch in name):
                    names[label, tokens].add(concept.concept_id)
                    names[label, tokens].update(c for c in by_name.get(normalize(name), ())
                                                if not set(types).isdisjoint(kb.types_of(c) or ()))
    return names


def branch_exclusions(read: Annotated, kb: Any, trees: Mapping[str, Sequence[str]],
                      label_types: Mapping[str, Sequence[str]], tokenize: Any, depth: int = 2, min_seen: int = 10,
                      max_rate: float = 0.1) -> Tuple[List[Tuple[str, str]], Dict[str, object]]:
    """(label, wording) exclusions of the names that lie only in branches the annotators leave out (module
    docstring), and a report naming those branches with their counts. ``read``: :func:`~.dictionary.annotated` of
    the training corpora; ``trees``: descriptor UI → tree numbers (:func:`spacy_sapbert.kb.sources.mesh.read_mesh_trees`);
    ``label_types``: each label's KB types (:func:`~.dictionary.linker_label_types`); ``tokenize``: the pipeline's
    tokenizer (``nlp.make_doc``), which cuts the names as it cut the corpora."""
    docs, _ = read
    numbers = concept_trees(kb, trees)
    names = concept_names(kb, label_types, numbers, tokenize)
    # a name of a concept without tree numbers lies in no branch the rule can leave out: no branches at all
    where = {key: set().union(*(branches_of(numbers[c], depth) for c in ids))
             if all(c in numbers for c in ids) else set() for key, ids in names.items()}
    wording = {key: f"{key[0]}\t{' '.join(key[1])}" for key in names}
    rates = annotation_rates(docs, {wording[key]: key for key in names})
    tagged: Counter = Counter()
    seen: Counter = Counter()
    for key, branches in where.items():
        hits, occurrences = rates[wording[key]]
        for branch in branches:
            tagged[key[0], branch] += hits
            seen[key[0], branch] += occurrences
    left_out = {pair for pair, n in seen.items() if n >= min_seen and tagged[pair] < max_rate * n}
    excluded = []
    for (label, tokens), branches in where.items():
        hits, occurrences = rates[wording[label, tokens]]
        if branches and all((label, b) in left_out for b in branches) and hits < max_rate * max(occurrences, 1):
            excluded.append((label, " ".join(tokens)))
    report = {"depth": depth, "min_seen": min_seen, "max_rate": max_rate, "names": len(names),
              "branches_left_out": {f"{label} {branch}": [tagged[label, branch], seen[label, branch]]
                                    for label, branch in sorted(left_out)},
              "exclusions": len(excluded), "per_label": dict(Counter(label for label, _ in excluded))}
    return sorted(excluded), report


__all__ = ["branches_of", "concept_trees", "concept_names", "branch_exclusions"]
