"""What annotators linked a wording to: a training mention's exact wording decides its concept.

The dense linker ranks the KB's own names. Annotated corpora follow conventions a KB does not
hold: BC5CDR links "tardive dyskinesia" to Dyskinesia, Drug-Induced (MeSH 2024 has a newer
descriptor of that name), "renal failure" to Acute Kidney Injury, "venlafaxine" to the
supplementary record it had in 2015. A KB cannot take these as names without making the
vocabulary's own sense tie with them (``kb-add-mentions`` leaves them out for that reason).
This table can: it maps a normalised wording (:func:`~spacy_sapbert.kb.normalize.normalize`, the
KB's key) to how often each concept was annotated for it, and a query with that wording gets the
most annotated concept first, scored by the rule of succession, ``(votes + 1) / (mentions + 2)``
(2 of 2 mentions: 0.75; 1 of 1: 0.67; 1 of 2: 0.5). Measured on BC5CDR dev and NCBI test in
docs/ner.md.

A coordinated mention is one span with several IDs: BC5CDR links "hemorrhagic cystitis" to Hemorrhage
and Cystitis (6 of its 6 training mentions), and "cholestatic hepatitis" to Cholestasis and Hepatitis.
Its wording votes for that set of concepts; where the set wins, a span with the wording states each of
its concepts as a part (the pipe's ``split_composites``: ``span._.kb_ents_parts``), as a span whose text
the coordination rules split does (:mod:`spacy_sapbert.linking.composite`). Single and coordinated
votes of one wording are counted together.

The file keeps the annotated IDs as written (JSON, ``{"format_version": 1, "names": {wording:
{id: count}}, "composites": {wording: [{"ids": [id, …], "count": n}]}, "former_ids": {id: kb id},
"sources": [file name]}``; ``composites`` may be absent); they are resolved against the KB
the linker uses when the table is attached, so a KB swap re-resolves them, IDs one KB lacks are dropped (counted), and
IDs of one concept vote together. ``former_ids`` is the crosswalk :meth:`AnnotatedNames.crosswalk`
finds for a KB: an annotated ID that KB lacks, whose wordings are names of exactly one of its
concepts, is that concept under an older ID (BC5CDR's "venlafaxine", C047426 in MeSH 2015, is
the descriptor D000069470 in MeSH 2024); attaching the table lets the KB resolve it
(:meth:`~spacy_sapbert.kb.knowledge_base.KnowledgeBase.add_former_id`), so the annotation votes
for the concept and an evaluation against the old ID counts the new one right.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.linking.linker import Candidates
from spacy_sapbert.util.jsonfile import read_json_object


FORMAT_VERSION = 1
FILE_NAME = "annotated_names.json"
Composite = Tuple[str, ...]
"""The IDs of one coordinated mention (two or more, none twice), in the corpus's order."""
Decision = Tuple[str, float, frozenset]
"""(concept ID, score, its KB types)."""


class AnnotatedNames:
    """Normalised wording → annotation counts per ID; :meth:`for_kb` turns them into decisions."""

    def __init__(self, names: Mapping[str, Mapping[str, int]], former_ids: Optional[Mapping[str, str]] = None,
                 sources: Sequence[str] = (), composites: Optional[Mapping[str, Mapping[Composite, int]]] = None
                 ) -> None:
        self.names: Dict[str, Dict[str, int]] = {key: dict(ids) for key, ids in names.items() if key and ids}
        self.composites: Dict[str, Dict[Composite, int]] = {
            key: {tuple(ids): n for ids, n in found.items()} for key, found in (composites or {}).items() if key and found}
        """Wording → how often coordinated mentions with it were annotated with each set of IDs."""
        self.former_ids: Dict[str, str] = dict(former_ids or {})
        self.sources: List[str] = list(sources)
        """The annotated files the counts come from (file names), for the model card; may be empty."""
        self._decisions: Dict[str, Optional[Union[Decision, Tuple[Decision, ...]]]] = {}
        """Normalised wording → :meth:`_decide`'s answer against the attached KB, as asked."""
        self._kb: Optional[KnowledgeBase] = None

    @classmethod
    def from_pairs(cls, pairs: Iterable[Tuple[str, str]],
                   composite_pairs: Iterable[Tuple[Sequence[str], str]] = ()) -> "AnnotatedNames":
        """From (annotated ID, mention text) pairs and (annotated IDs, mention text) pairs of coordinated
        mentions (an ID given twice counts once; one ID left is a single pair); texts are normalised here."""
        names: Dict[str, Counter] = {}
        composites: Dict[str, Counter] = {}
        for concept_id, text in pairs:
            key = normalize(text)
            if key and concept_id:
                names.setdefault(key, Counter())[concept_id] += 1
        for ids, text in composite_pairs:
            key, distinct = normalize(text), tuple(dict.fromkeys(i for i in ids if i))
            if key and len(distinct) > 1:
                composites.setdefault(key, Counter())[distinct] += 1
            elif key and distinct:
                names.setdefault(key, Counter())[distinct[0]] += 1
        return cls(names, composites=composites)

    def __len__(self) -> int:
        """The wordings the table has votes for, single or coordinated."""
        return len(set(self.names) | set(self.composites))

    # -- decisions against one KB -----------------------------------------------------
    def crosswalk(self, kb: KnowledgeBase) -> Dict[str, str]:
        """Annotated IDs ``kb`` lacks → the one ``kb`` concept all their wordings name (see the module)."""
        owners: Dict[str, set] = {}
        for key, ids in self.names.items():
            named = set(kb.alias_to_concepts.get(key, ()))
            for any_id in ids:
                if kb.resolve_id(any_id) is None:
                    owners.setdefault(any_id, set()).update(named or {""})
        self.former_ids = {old: next(iter(c)) for old, c in sorted(owners.items()) if len(c) == 1 and "" not in c}
        return self.former_ids

    def for_kb(self, kb: KnowledgeBase) -> "AnnotatedNames":
        """Attach ``kb``: add the crosswalk's former IDs to it, and resolve the IDs against it from now on.

        A wording is decided (:meth:`_decide`) the first time a query asks for it, and kept: a table
        holds thousands of wordings and a run asks for few of them, so attaching costs nothing per
        wording (deciding all 4,510 of the default's took 50-60 ms of every load). :meth:`summary`
        decides them all."""
        for former, concept_id in self.former_ids.items():
            kb.add_former_id(former, concept_id)
        self._kb, self._decisions = kb, {}
        return self

    def _decide(self, key: str) -> Optional[Union[Decision, Tuple[Decision, ...]]]:
        """A normalised wording's decision against the attached KB, decided once: its most annotated
        concept (a :data:`Decision`) or set of concepts (a tuple of them), or None (no vote for a concept
        of the KB, or a tie). A set votes whatever the order of its IDs (BC5CDR and BioRED write one
        pair in either order), and its parts come in the order most of its mentions give."""
        if key not in self._decisions:
            self._decisions[key] = self._count(key)[0]
        return self._decisions[key]

    def _count(self, key: str) -> Tuple[Optional[Union[Decision, Tuple[Decision, ...]]], int, bool]:
        """(decision, annotations naming IDs the KB lacks, tied) of one wording (:meth:`_decide`)."""
        kb = self._kb
        if kb is None:
            raise RuntimeError("AnnotatedNames used before for_kb(kb)")
        votes: Counter = Counter()  # a concept ID, or a frozenset of them for a coordinated mention
        orders: Dict[frozenset, Counter] = {}  # a set → how often each order of it was annotated
        dropped = 0
        singles, sets = self.names.get(key, {}), self.composites.get(key, {})
        for any_id, count in singles.items():
            owner = kb.resolve_id(any_id)
            if owner is None:
                dropped += count
                continue
            votes[owner] += count
        for ids, count in sets.items():
            owners = [kb.resolve_id(any_id) for any_id in ids]
            if None in owners:
                dropped += count
                continue
            distinct = tuple(dict.fromkeys(owners))  # two IDs of one concept
            if len(distinct) == 1:
                votes[distinct[0]] += count
                continue
            votes[frozenset(distinct)] += count
            orders.setdefault(frozenset(distinct), Counter())[distinct] += count
        ranked = votes.most_common(2)
        if not ranked:
            return None, dropped, False
        if len(ranked) > 1 and ranked[1][1] == ranked[0][1]:
            return None, dropped, True
        winner, count = ranked[0]
        score = (count + 1) / (sum(singles.values()) + sum(sets.values()) + 2)
        if not isinstance(winner, frozenset):
            return _decision(kb, winner, score), dropped, False
        # the order most mentions give; on a tie the first in ID order, so a table read back from its
        # file (written sorted) decides as the one it was written from
        order = min(orders[winner].items(), key=lambda found: (-found[1], found[0]))[0]
        return tuple(_decision(kb, c, score) for c in order), dropped, False

    def summary(self) -> Dict[str, int]:
        """Every wording decided against the attached KB, counted: wordings that decide a concept, a
        coordinated set, none for a tie, and annotations that name IDs the KB lacks."""
        counts = {"concepts": 0, "coordinated_sets": 0, "tied": 0, "annotations_without_kb_id": 0}
        for key in sorted(set(self.names) | set(self.composites)):
            found, dropped, tied = self._count(key)
            self._decisions[key] = found
            counts["annotations_without_kb_id"] += dropped
            counts["tied"] += tied
            if found is not None:
                counts["coordinated_sets" if isinstance(found[0], tuple) else "concepts"] += 1
        return counts

    def lookup(self, text: str) -> Optional[Tuple[str, float]]:
        """(concept_id, score) the annotations decide for ``text``, or None; needs :meth:`for_kb` first."""
        found = self._decide(normalize(text))
        return (found[0], found[1]) if found and not isinstance(found[0], tuple) else None

    def parts(self, queries: Sequence[str], types: Optional[Sequence[Optional[frozenset]]],
              thresholds: Sequence[Optional[float]]) -> List[Optional[List[Tuple[str, float]]]]:
        """Per query, the concepts annotators linked its wording to as one coordinated mention, each with
        the table's score, or None: none decided, a concept outside the query's ``types``, or the score
        below its threshold (then what the dense linker and the coordination rules found stands, as
        for a single concept in :meth:`apply`). Needs :meth:`for_kb` first."""
        if self._kb is None:
            raise RuntimeError("AnnotatedNames.parts before for_kb(kb)")
        out: List[Optional[List[Tuple[str, float]]]] = []
        for i, (query, threshold) in enumerate(zip(queries, thresholds)):
            found = self._decide(normalize(query)) if self.composites else None
            if (found is None or not isinstance(found[0], tuple)  # none, or a single concept
                    or not _fits(found, types[i] if types is not None else None, threshold)):
                out.append(None)
            else:
                out.append([(concept_id, score) for concept_id, score, _ in found])
        return out

    def write_parts(self, results: Sequence[Any], queries: Sequence[str],
                    types: Optional[Sequence[Optional[frozenset]]], thresholds: Sequence[Optional[float]]) -> None:
        """Give each result (a span's ``SpanCandidates``) whose query :meth:`parts` decides those concepts
        as its ``parts``, each under its preferred name, in place of what the coordination rules split."""
        for result, found in zip(results, self.parts(queries, types, thresholds)):
            if found:
                result.parts = [(self._name(concept_id), [(concept_id, score)]) for concept_id, score in found]

    def _name(self, concept_id: str) -> str:
        concept = self._kb.get(concept_id) if self._kb is not None else None
        return concept.canonical_name if concept is not None else concept_id

    def apply(self, queries: Sequence[str], types: Optional[Sequence[Optional[frozenset]]],
              results: Sequence[Candidates], threshold: Optional[float], limit: int) -> List[Candidates]:
        """``results`` with the annotated concept first where a query's wording has one of the span's
        ``types`` and its score reaches ``threshold``; its score is the larger of the two."""
        if self._kb is None:
            raise RuntimeError("AnnotatedNames.apply before for_kb(kb)")
        out: List[Candidates] = []
        for i, (query, found) in enumerate(zip(queries, results)):
            decided = self._decide(normalize(query))
            if (decided is None or isinstance(decided[0], tuple)  # none, or a coordinated set (write_parts)
                    or not _fits((decided,), types[i] if types is not None else None, threshold)):
                out.append(list(found))
                continue
            concept_id, score = decided[0], decided[1]
            dense = dict(found).get(concept_id, score)
            rest = [c for c in found if c[0] != concept_id]
            out.append(([(concept_id, max(score, dense))] + rest)[:limit])
        return out

    # -- files ---------------------------------------------------------------------------
    def to_disk(self, path: Union[str, Path]) -> Path:
        from spacy_sapbert.util.atomic import atomic_write_text

        data = {"format_version": FORMAT_VERSION,
                "names": {key: dict(sorted(ids.items())) for key, ids in sorted(self.names.items())},
                **({"composites": {key: [{"ids": list(ids), "count": n} for ids, n in sorted(found.items())]
                                   for key, found in sorted(self.composites.items())}} if self.composites else {}),
                "former_ids": dict(sorted(self.former_ids.items())),
                **({"sources": self.sources} if self.sources else {})}
        return atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=0) + "\n")

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "AnnotatedNames":
        """Read a table; an error names the file and the first entry that is not ``{wording: {id: count}}``."""
        from spacy_sapbert.errors import InputError

        data = read_json_object(path, FORMAT_VERSION, "annotated names")
        names = data.get("names")
        if not isinstance(names, dict):
            raise InputError("'names' must be an object of wording → {id: count}", path, field="names")
        for key, ids in names.items():
            if not isinstance(ids, dict) or not all(isinstance(k, str) and isinstance(v, int) and v > 0
                                                    for k, v in ids.items()):
                raise InputError(f"names[{key!r}] must map IDs to positive counts, got {ids!r}", path,
                                 field=f"names.{key}")
        composites = _read_composites(data.get("composites", {}), path)
        former = data.get("former_ids", {})
        if not isinstance(former, dict) or not all(isinstance(v, str) for v in former.values()):
            raise InputError("'former_ids' must map IDs to KB concept IDs", path, field="former_ids")
        sources = data.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(v, str) for v in sources):
            raise InputError("'sources' must be a list of file names", path, field="sources")
        return cls(names, former, sources, composites)


def _decision(kb: KnowledgeBase, concept_id: str, score: float) -> Decision:
    return concept_id, score, frozenset(kb.types_of(concept_id) or ())


def _fits(decisions: Sequence[Decision], allowed: Optional[frozenset], threshold: Optional[float]) -> bool:
    """Every decided concept has one of the span's ``allowed`` types (None: any) and a score reaching ``threshold``."""
    return all((allowed is None or types_of & allowed) and (threshold is None or score >= threshold)
               for _, score, types_of in decisions)


def _read_composites(composites: Any, path: Union[str, Path]) -> Dict[str, Dict[Composite, int]]:
    """The file's ``composites``: wording → [{"ids": [two or more distinct IDs], "count": n > 0}, …]."""
    from spacy_sapbert.errors import InputError

    if not isinstance(composites, dict):
        raise InputError("'composites' must be an object of wording → [{\"ids\": [id, …], \"count\": n}]", path,
                         field="composites")
    out: Dict[str, Dict[Composite, int]] = {}
    for key, entries in composites.items():
        found: Dict[Composite, int] = {}
        for entry in entries if isinstance(entries, list) and entries else [None]:
            ids = entry.get("ids") if isinstance(entry, dict) else None
            count = entry.get("count") if isinstance(entry, dict) else None
            if (not isinstance(ids, list) or len(ids) < 2 or not all(isinstance(i, str) and i for i in ids)
                    or len(set(ids)) != len(ids) or tuple(ids) in found
                    or not isinstance(count, int) or isinstance(count, bool) or count <= 0):
                raise InputError(f"composites[{key!r}] must be a non-empty list of {{\"ids\": [two or more distinct "
                                 f"IDs], \"count\": n > 0}}, each list of IDs once; got {entries!r}", path,
                                 field=f"composites.{key}")
            found[tuple(ids)] = count
        out[key] = found
    return out


__all__ = ["AnnotatedNames", "FILE_NAME", "FORMAT_VERSION"]
