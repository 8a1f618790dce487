"""The end-to-end table: what a user gets from raw abstracts, per entity type, at any threshold.

The pipes before the linker run once per corpus; the linker runs once per threshold asked for (its own, for the
table; each of a sweep's; or 0, where each entity keeps its best concept whatever its score), and each entity's
label, offsets and best (concept, score) are kept (:func:`collect_runs`). The run's threshold then decides which
entities keep their concept (:func:`score`):

* **NER**: strict (start, end, label) against every gold mention of the type;
* **mentions**: (start, end, label, concept) against the gold mentions with IDs (a composite
  mention gives one pair per part; predictions on spans whose gold has no ID count neither way);
* **documents**: per abstract, the set of concepts of a type (BioCreative V CDR's DNER measure
  for diseases), micro-averaged over the abstracts.

An entity states its concept, or, for a coordinated span the linker split (``split_composites``),
the concepts of its parts (:func:`stated`), at the mention and document levels alike.

Concepts are compared through the KB (:func:`spacy_sapbert.kb.matching.concept_key`), as in :mod:`.e2e`.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc
from tqdm import tqdm

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.matching import concept_key
from spacy_sapbert.pipes.linker_spans import parts_extension
from ..corpora import Document
from .scores import PRF

LEVELS = ("ner", "mentions", "documents")
ALL = "ALL"


@dataclass(frozen=True)
class Entity:
    """One predicted entity: where, which label, and the linker's best concept and score (or none)."""

    pmid: str
    start: int
    end: int
    label: str
    concept: str
    score: float
    parts: Tuple[Tuple[str, float], ...] = ()
    """A coordinated span's parts (the linker's ``split_composites``): best (concept, score) of each."""


Threshold = Union[None, float, Mapping[str, Optional[float]]]
"""One threshold, or per label (the pipe's ``label_thresholds`` over its ``threshold``)."""


def stated(entity: Entity, threshold: Threshold) -> List[str]:
    """The concepts an entity states at ``threshold``: a coordinated span's parts that pass it, or,
    when it has none that do, its own concept."""
    if isinstance(threshold, Mapping):
        threshold = threshold.get(entity.label)

    def passes(concept: str, value: float) -> bool:
        return bool(concept) and (threshold is None or value >= threshold)
    parts = sorted({concept for concept, value in entity.parts if passes(concept, value)})
    return parts or ([entity.concept] if passes(entity.concept, entity.score) else [])


def own_thresholds(pipe: Any, labels: Sequence[str]) -> Dict[str, Optional[float]]:
    """Each label's threshold in the linker ``pipe``: its ``label_thresholds`` entry, else its ``threshold``
    (a linker without per-label thresholds, such as scispaCy's, has the one)."""
    own = getattr(pipe, "label_thresholds", None) or {}
    return {label: own.get(label, pipe.threshold) for label in labels}


@contextmanager
def thresholds_at(pipe: Any, threshold: Optional[float]) -> Iterator[None]:
    """The linker ``pipe`` at one ``threshold`` for every label meanwhile; its own thresholds after.
    scispaCy's ``EntityLinker`` (the peer of ``benchmarks/pipeline_vs_scispacy.py``) has one threshold
    attribute and no ``configure``: it is set and given back (None: no threshold, -inf for it)."""
    if not hasattr(pipe, "configure"):
        own = pipe.threshold
        pipe.threshold = float("-inf") if threshold is None else threshold
        try:
            yield
        finally:
            pipe.threshold = own
        return
    kept = pipe.threshold, pipe.label_thresholds
    pipe.configure(threshold=threshold, label_thresholds=None)
    try:
        yield
    finally:
        pipe.configure(threshold=kept[0], label_thresholds=kept[1])


def collect(nlp: Language, documents: Sequence[Document], labels: Sequence[str],
            kb: Optional[KnowledgeBase], linker: str = LINKER_PIPE, at_zero: bool = True) -> List[Entity]:
    """Run the pipeline on the raw texts, the linker's thresholds at 0 (restored after; every threshold can
    then be scored from this run) or, with ``at_zero`` False, at its own (exactly what a user gets)."""
    return collect_runs(nlp, documents, labels, kb, linker, (at_zero,))[0]


def collect_runs(nlp: Language, documents: Sequence[Document], labels: Sequence[str], kb: Optional[KnowledgeBase],
                 linker: str = LINKER_PIPE, at_zero: Sequence[bool] = (False, True),
                 at_thresholds: Sequence[float] = ()) -> List[List[Entity]]:
    """:func:`collect` once per ``at_zero`` setting, then once with every label at each of ``at_thresholds``
    (a sweep); the pipes before the linker run once for all of them.

    A run at 0 scores any threshold, but not always as the pipe at that threshold links: where the
    annotated names put a concept first that is below the threshold, the pipe states the dense
    linker's best instead (or a coordinated span's split parts), and a span without a concept may take its
    head's (``head_fallback``), which the run at 0 does not see. On BC5CDR dev at the default's thresholds the
    pipe stated 7 document concepts more than the run at 0 read (2026-11-29, before ``head_fallback``); the
    table and a sweep come from runs at their thresholds."""
    pipe = nlp.get_pipe(linker)
    # a coordinated span's parts: our pipe's; scispaCy's EntityLinker (the benchmarks' peer) has none
    parts_of = parts_extension(pipe.extension) if hasattr(pipe, "extension") else None
    texts = [d.text for d in documents]
    last = nlp.pipe_names[-1] == linker
    unlinked: List[Doc] = []
    if last:  # the linker is last: its input is the same whatever its thresholds
        with nlp.select_pipes(disable=[linker]):
            unlinked = list(tqdm(nlp.pipe(texts, batch_size=32), total=len(texts), desc="NER", unit="doc", leave=False))
    runs: List[List[Entity]] = []
    own = object()  # a run at the pipe's own thresholds
    for threshold in [0.0 if zero else own for zero in at_zero] + [float(t) for t in at_thresholds]:
        with nullcontext() if threshold is own else thresholds_at(pipe, threshold):
            if last:  # linked again in place: each run sets every entity's candidates and parts anew, and its
                # entities are read before the next (no Doc.copy: it deep-copies user_data, and scispaCy's
                # abbreviation detector keeps Span objects there, which cannot be copied)
                docs = pipe.pipe(unlinked, batch_size=32) if hasattr(pipe, "pipe") else map(pipe, unlinked)
            else:
                docs = nlp.pipe(texts, batch_size=32)
            linked = list(tqdm(docs, total=len(texts), desc="linking", unit="doc", leave=False))
        runs.append([entity for document, doc in zip(documents, linked)
                     for entity in _entities(document.pmid, doc, labels, kb, parts_of)])
    return runs


def _entities(pmid: str, doc: Doc, labels: Sequence[str], kb: Optional[KnowledgeBase],
              parts_of: Optional[str]) -> List[Entity]:
    found = []
    for ent in doc.ents:
        if ent.label_ not in labels:
            continue
        best = ent._.kb_ents[0] if ent._.kb_ents else ("", float("-inf"))
        parts = tuple((concept_key(hits[0][0], kb), float(hits[0][1]))
                      for _, hits in (ent._.get(parts_of) if parts_of else ()) if hits)
        found.append(Entity(pmid, ent.start_char, ent.end_char, ent.label_,
                            concept_key(best[0], kb) if best[0] else "", float(best[1]), parts))
    return found


def gold_sets(documents: Iterable[Document], label_map: Mapping[str, str], kb: Optional[KnowledgeBase]
              ) -> Tuple[Set[tuple], Set[tuple], Set[tuple], Set[tuple]]:
    """(spans, linked pairs, document concepts, spans without ID) of the gold mentions."""
    spans, pairs, concepts, no_id = set(), set(), set(), set()
    for doc in documents:
        for m in doc.mentions:
            label = label_map.get(m.type)
            if label is None:
                continue
            spans.add((doc.pmid, m.start, m.end, label))
            if not m.ids:
                no_id.add((doc.pmid, m.start, m.end, label))
            for concept_id in m.ids:
                key = concept_key(concept_id, kb)
                pairs.add((doc.pmid, m.start, m.end, label, key))
                concepts.add((doc.pmid, label, key))
    no_id -= {p[:4] for p in pairs}
    return spans, pairs, concepts, no_id


def _prf(gold: Set[tuple], predicted: Set[tuple]) -> PRF:
    tp = len(gold & predicted)
    return PRF(tp, len(predicted) - tp, len(gold) - tp)


def score(entities: Sequence[Entity], gold: Tuple[Set[tuple], Set[tuple], Set[tuple], Set[tuple]],
          labels: Sequence[str], threshold: Threshold) -> Dict[str, Dict[str, PRF]]:
    """label (and ``ALL``) → level → P/R/F1, an entity stating the concepts :func:`stated` gives at ``threshold``."""
    spans, pairs, concepts, no_id = gold
    linked = [(e, concept) for e in entities for concept in stated(e, threshold)]
    predicted = {
        "ner": {(e.pmid, e.start, e.end, e.label) for e in entities},
        "mentions": {(e.pmid, e.start, e.end, e.label, concept) for e, concept in linked
                     if (e.pmid, e.start, e.end, e.label) not in no_id},
        "documents": {(e.pmid, e.label, concept) for e, concept in linked},
    }
    wanted = {"ner": spans, "mentions": pairs, "documents": concepts}
    label_at = {"ner": 3, "mentions": 3, "documents": 1}  # where each level's tuples hold the label
    table: Dict[str, Dict[str, PRF]] = {}
    for label in list(labels) + [ALL]:
        table[label] = {}
        for level in LEVELS:
            gold_items, found = wanted[level], predicted[level]
            if label != ALL:
                gold_items = {g for g in gold_items if g[label_at[level]] == label}
                found = {f for f in found if f[label_at[level]] == label}
            table[label][level] = _prf(gold_items, found)
    return table


def sweep(runs: Sequence[Sequence[Entity]], gold: Tuple[Set[tuple], Set[tuple], Set[tuple], Set[tuple]],
          labels: Sequence[str], thresholds: Sequence[float], level: str = "documents") -> List[Tuple[float, PRF]]:
    """(threshold, pooled P/R/F1 at ``level``) for each threshold, each from the run at it (:func:`collect_runs`'s
    ``at_thresholds``): what the default threshold is chosen from."""
    if len(runs) != len(thresholds):
        raise ValueError(f"{len(runs)} runs for {len(thresholds)} thresholds")
    return [(t, score(run, gold, labels, t)[ALL][level]) for t, run in zip(thresholds, runs)]


def table_rows(table: Dict[str, Dict[str, PRF]]) -> List[str]:
    """Markdown rows: label | NER P/R/F1 | mentions P/R/F1 | documents P/R/F1."""
    def cell(prf: PRF) -> str:
        return f"{prf.precision:.2f} / {prf.recall:.2f} / {prf.f1:.2f}"
    return [f"| {label} | " + " | ".join(cell(levels[level]) for level in LEVELS) + " |"
            for label, levels in table.items()]
