"""Where the document-level concept misses of a pipeline come from, per label, on a BC5CDR- or NCBI-style corpus:
`python scripts/e2e_misses.py assets/corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt` (the embedded default), or
`… assets/corpora/ncbi-disease/NCBItestset_corpus.txt` (its four disease types read as DISEASE).

A document concept the pipeline misses (a gold ID of an abstract that no entity there states at the
pipeline's thresholds) is put down to the NER (no entity covers any of its mentions; or only one of another
label) or to the linker (an entity covers a mention but states another concept; or the right one, below
the threshold). A concept stated but not gold sits on a gold span (another concept) or on text the
annotators left out.

It also counts the misses whose gold ID the linker's KB lacks, and of those the ones the pipeline found
under a descriptor with a ten-character UI (``D0000…``: newer than the corpus, whose descriptor UIs all
have seven) whose preferred name is the text of one of the ID's mentions there ("ropivacaine": C037663
in BC5CDR, the descriptor D000077212 in MeSH 2024). Supplementary records promoted to descriptors are
gone from MeSH 2024, which the KB is built from, and NLM's record of the promotions is not among the assets, so the scores count these as misses; the
"if counted" F1 is this name rule's reading, not a score.

With ``--train`` (the training corpus, BC5CDR train for BC5CDR dev) it also counts the errors that are the
annotators' guidelines drifting between the two sets: a concept stated but not gold whose entities' wordings are
a gold mention at half or more of their occurrences in the training set (two or more) and at none in the evaluated
one ("antidepressant" in BC5CDR train and dev), and a concept missed whose mentions' wordings occur two or more
times in the training set and are never a gold mention there ("analgesia"). Occurrences are counted as ``sapbert
ner-dictionary`` counts its annotation rate (``spacy_sapbert.training.ner.dictionary.annotation_rates``). No model
trained on the one set learns the other's reading; the F1 without them is a reading of how much of the gap is
drift, not a score.
"""
from __future__ import annotations

import argparse
import collections
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Set, Tuple

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.kb.ids import is_newer_mesh
from spacy_sapbert.training.corpora import Document, read_pubtator
from spacy_sapbert.training.ner.data import BC5CDR_LABELS, NCBI_LABELS
from spacy_sapbert.training.ner.dictionary import annotated, annotation_rates
from spacy_sapbert.training.ner.e2e_table import Entity, collect_runs, gold_sets, own_thresholds, stated
from spacy_sapbert.training.ner.scores import PRF

Concept = Tuple[str, str, str]  # (pmid, label, concept key)


def overlaps(entity: Entity, mentions: Sequence[Tuple[int, int]]) -> bool:
    return any(entity.start < end and start < entity.end for start, end in mentions)


def miss_causes(missed: Set[Concept], entities: Sequence[Entity], mentions: Dict[Concept, List[Tuple[int, int]]]
                ) -> collections.Counter:
    """Each missed document concept's cause (module docstring)."""
    causes: collections.Counter = collections.Counter()
    for pmid, label, key in missed:
        where = mentions[(pmid, label, key)]
        covering = [e for e in entities if e.pmid == pmid and overlaps(e, where)]
        own = [e for e in covering if e.label == label]
        if not own:
            causes["NER: another label only" if covering else "NER: no entity on any mention"] += 1
        elif any(e.concept == key for e in own):
            causes["linker: the right concept below the threshold"] += 1
        else:
            causes["linker: another concept"] += 1
    return causes


def corpus_labels(documents: Sequence[Document]) -> Tuple[Dict[str, str], List[str]]:
    """(mention type → label, the labels present) for the corpus's own mention types: NCBI-disease's four
    when it has only those (read as BC5CDR's, every gold concept of NCBI test would be left out), else BC5CDR's."""
    types = {m.type for d in documents for m in d.mentions}
    label_map = NCBI_LABELS if types and types <= set(NCBI_LABELS) else BC5CDR_LABELS
    return label_map, sorted({label_map[t] for t in types if t in label_map})


Key = Tuple[str, str]
"""(label, wording in lower case)."""


def annotation_rates_in(nlp: Any, paths: Sequence[Path], keys: Set[Key]) -> Dict[Key, Tuple[int, int]]:
    """(label, wording) → (occurrences that are a gold mention, occurrences) in the PubTator files ``paths`` that
    annotate the label, on the pipeline's tokens: ``sapbert ner-dictionary``'s annotation rate
    (:func:`annotation_rates`)."""
    wordings = {f"{label}\t{wording}": (label, tuple(t.lower_ for t in nlp.make_doc(wording)))
                for label, wording in keys}
    rates = annotation_rates(annotated(nlp, paths)[0], wordings)
    return {key: rates[f"{key[0]}\t{key[1]}"] for key in keys}


def drifted(keys: Set[Key], train: Mapping[Key, Tuple[int, int]], here: Mapping[Key, Tuple[int, int]],
            stated: bool) -> bool:
    """Whether every one of an error's (label, wording) ``keys`` reads otherwise in training (module docstring): for
    a concept ``stated`` but not gold, a gold mention at half or more of two or more training occurrences and never
    here; for a missed one, never a gold mention in two or more training occurrences."""
    def drifts(key: Key) -> bool:
        tagged, seen = train.get(key, (0, 0))
        if seen < 2:
            return False
        return (2 * tagged >= seen and here.get(key, (0, 0))[0] == 0) if stated else tagged == 0
    return bool(keys) and all(drifts(key) for key in keys)


def newer_descriptor(uid: str) -> bool:
    """A descriptor UI of ten characters (``D000077212``): newer than BC5CDR, whose 8,774 training descriptor IDs all
    have seven (``D001463``)."""
    return uid.startswith("D") and is_newer_mesh(uid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="PubTator file with Chemical/Disease mentions (BC5CDR dev) or NCBI-disease types (NCBI test)")
    parser.add_argument("--pipeline", default=None, help="Saved pipeline (default: the embedded default)")
    parser.add_argument("--train", type=Path, action="append", default=[],
                        help="Training PubTator file(s): also count the errors that are annotation drift")
    args = parser.parse_args()
    import spacy

    import spacy_sapbert

    nlp = spacy.load(args.pipeline) if args.pipeline else spacy_sapbert.load()
    linker = nlp.get_pipe(LINKER_PIPE)
    kb = linker.kb
    documents = list(read_pubtator(args.corpus))
    label_map, labels = corpus_labels(documents)
    # stated at the pipe's thresholds (what it gives a user); a miss's cause read with the linker at 0, where an
    # entity keeps the concept that its threshold dropped
    entities, at_zero = collect_runs(nlp, documents, labels, kb, at_zero=(False, True))
    thresholds = own_thresholds(linker, labels)
    spans, pairs, concepts, _ = gold_sets(documents, label_map, kb)
    text = {d.pmid: d.text for d in documents}
    mentions: Dict[Concept, List[Tuple[int, int]]] = collections.defaultdict(list)
    for pmid, start, end, label, key in pairs:
        mentions[(pmid, label, key)].append((start, end))
    predicted = {(e.pmid, e.label, c) for e in entities for c in stated(e, thresholds)}
    for label in labels:
        gold = {c for c in concepts if c[1] == label}
        found = {c for c in predicted if c[1] == label}
        missed, extra = gold - found, found - gold
        tp = len(gold & found)
        print(f"{label}: document concepts TP {tp}, FP {len(extra)}, FN {len(missed)}")
        for cause, n in miss_causes(missed, at_zero, mentions).most_common():
            print(f"  missed, {cause}: {n}")
        label_spans = collections.defaultdict(list)
        for pmid, start, end, span_label in spans:
            if span_label == label:
                label_spans[pmid].append((start, end))
        on_gold = sum(any(overlaps(e, label_spans[pmid]) for e in entities if e.pmid == pmid and e.label == label
                          and key in stated(e, thresholds)) for pmid, _, key in extra)
        print(f"  stated but not gold: on a gold span {on_gold}, elsewhere {len(extra) - on_gold}")
        absent = [c for c in missed if kb.resolve(c[2]) is None]
        renamed, used = 0, set()
        for pmid, _, key in absent:
            texts = {text[pmid][s:e].lower() for s, e in mentions[(pmid, label, key)]}
            for candidate in sorted(extra - used):
                concept = kb.resolve(candidate[2]) if candidate[0] == pmid else None
                if concept is not None and newer_descriptor(candidate[2]) and concept.canonical_name.lower() in texts:
                    used.add(candidate)
                    renamed += 1
                    break
        counted = PRF(tp + renamed, len(extra) - renamed, len(missed) - renamed)
        print(f"  missed with a gold ID the KB lacks: {len(absent)}; found under a newer descriptor of the same "
              f"name: {renamed}; F1 {PRF(tp, len(extra), len(missed)).f1:.2f}, if those counted {counted.f1:.2f}")
        if args.train:
            said = {c: {(label, text[c[0]][e.start:e.end].lower()) for e in entities if e.pmid == c[0]
                        and e.label == label and c[2] in stated(e, thresholds)} for c in extra}
            gold_words = {c: {(label, text[c[0]][s:e].lower()) for s, e in mentions[c]} for c in missed}
            keys = set().union(*said.values(), *gold_words.values())
            rates, here = annotation_rates_in(nlp, args.train, keys), annotation_rates_in(nlp, [args.corpus], keys)
            fp = sum(drifted(k, rates, here, True) for k in said.values())
            fn = sum(drifted(k, rates, here, False) for k in gold_words.values())
            print(f"  annotation drift: stated, tagged in training and never here {fp}; missed, never tagged in "
                  f"training {fn}; F1 without them {PRF(tp, len(extra) - fp, len(missed) - fn).f1:.2f}")

if __name__ == "__main__":
    main()
