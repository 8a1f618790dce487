"""The baselines the evaluation compares the dense linker with, and :func:`make_system`.

Each implements :class:`~spacy_sapbert.training.evaluation.systems.LinkingSystem`, so every
row of the table gets the same dictionary and the same queries:

- ``exact``: the query equals a normalised dictionary name (the floor any linker must beat);
- ``tfidf``: cosine over character 3-gram TF-IDF of names (BioSyn's sparse half, alone);
- ``scispacy``: scispaCy's own candidate generator (``create_tfidf_ann_index`` +
  ``CandidateGenerator``: char 3-gram TF-IDF in an nmslib HNSW index, 30 neighbours as in
  scispaCy's linker), built over our dictionary — the peer spaCy users have today;
- ``generative:MODEL``, ``DENSE+generative:MODEL``, ``DENSE+rerank:MODEL``: systems that read the
  mention in its abstract (:mod:`spacy_sapbert.training.evaluation.context_systems`);
- anything else is a model (folder or name) for the dense linker
  (:mod:`spacy_sapbert.training.evaluation.dense`, the code path users run).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

from .context_systems import DEFAULT_GENERATIVE_WEIGHT, make_context_system
from .dense import DenseLinker
from .systems import LinkingSystem, Ranked

logger = logging.getLogger(__name__)

BASELINES = ("exact", "tfidf", "scispacy")
SCISPACY_NEIGHBOURS = 30  # scispaCy's EntityLinker default k
SCISPACY_EF_SEARCH = 200  # what scispaCy sets when it loads one of its indexes (nmslib's own default is 20)
TFIDF_NAMES_PER_QUERY = 64
TFIDF_BATCH = 128


def _concepts_in_order(name_rows: Sequence[int], name_concepts: Sequence[List[str]], k: int) -> List[str]:
    """The first ``k`` distinct concepts of names ranked best first: systems rank concepts, not names."""
    out: List[str] = []
    seen = set()
    for row in name_rows:
        for cid in name_concepts[row]:
            if cid not in seen:
                seen.add(cid)
                out.append(cid)
                if len(out) == k:
                    return out
    return out


class ExactMatch(LinkingSystem):
    """The concepts that have the query, after normalisation, as a name (dictionary order)."""

    name = "exact match"

    def _fit(self, dictionary: KnowledgeBase) -> None:
        self._alias = dictionary.alias_to_concepts

    def _rank(self, queries: List[str], k: int) -> Ranked:
        return [list(dict.fromkeys(self._alias.get(q, [])))[:k] if q else [] for q in queries]


class CharTfidf(LinkingSystem):
    """Cosine similarity of character 3-gram TF-IDF vectors (``char_wb``, every n-gram kept)."""

    name = "char 3-gram TF-IDF"

    def _fit(self, dictionary: KnowledgeBase) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        # every distinct normalised name once, with its concepts in dictionary order (the KB's own table)
        table = [(name, cids) for name, cids in dictionary.alias_to_concepts.items() if name]
        self._names = [name for name, _ in table]
        self._name_concepts = [cids for _, cids in table]
        self._vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3), dtype=np.float32)
        self._matrix = self._vectorizer.fit_transform(self._names).T.tocsr()
        logger.info("TF-IDF: %d names, %d character 3-grams", len(self._names), self._matrix.shape[0])

    def _rank(self, queries: List[str], k: int) -> Ranked:
        out: Ranked = []
        vectors = self._vectorizer.transform(queries)
        top = min(TFIDF_NAMES_PER_QUERY, len(self._names))
        for start in range(0, len(queries), TFIDF_BATCH):
            sims = (vectors[start:start + TFIDF_BATCH] @ self._matrix).toarray()
            best = np.argpartition(-sims, top - 1, axis=1)[:, :top]
            for row, candidates in enumerate(best):
                scores = sims[row, candidates]
                keep = candidates[scores > 0]
                # best first; ties keep dictionary order
                order = keep[np.lexsort((keep, -sims[row, keep]))]
                out.append(_concepts_in_order(order, self._name_concepts, k))
        return out


@contextlib.contextmanager
def _scispacy_build_patches() -> Iterator[None]:
    """Let scispaCy 0.6's ``create_tfidf_ann_index`` run here, with its own parameters.

    It refuses scipy >= 1.11 because it *saves* its TF-IDF vectors as float16; called with
    ``out_path=None`` it saves nothing, so the check does not apply. It also hard-codes
    60 index threads; on a small machine that starves every other process, so the thread
    count is capped at the CPUs we may use (HNSW's M=100 and efConstruction=2000 stay).
    Its ``print`` progress goes to the log.
    """
    import scispacy.candidate_generation as cg

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    real_nmslib = cg.nmslib

    class _Index:
        def __init__(self, index: Any) -> None:
            self._index = index

        def createIndex(self, params: Dict[str, Any], print_progress: bool = False) -> Any:  # noqa: N802
            params = dict(params, indexThreadQty=min(int(params.get("indexThreadQty", threads)), threads))
            return self._index.createIndex(params, print_progress=False)

        def __getattr__(self, attr: str) -> Any:
            return getattr(self._index, attr)

    class _Nmslib:
        def __getattr__(self, attr: str) -> Any:
            return getattr(real_nmslib, attr)

        @staticmethod
        def init(*args: Any, **kwargs: Any) -> Any:
            return _Index(real_nmslib.init(*args, **kwargs))

    real_check = cg.scipy_supports_sparse_float16
    cg.scipy_supports_sparse_float16 = lambda: True
    cg.nmslib = _Nmslib()
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    finally:
        cg.scipy_supports_sparse_float16 = real_check
        cg.nmslib = real_nmslib
        for line in buffer.getvalue().splitlines():
            if line.strip():
                logger.info("scispaCy: %s", line.strip())


class ScispacyCandidates(LinkingSystem):
    """scispaCy's CandidateGenerator over our dictionary; concepts ranked by their best alias."""

    name = "scispaCy candidate generator"

    def __init__(self, neighbours: int = SCISPACY_NEIGHBOURS) -> None:
        super().__init__()
        self.neighbours = neighbours

    def _fit(self, dictionary: KnowledgeBase) -> None:
        from scispacy.candidate_generation import CandidateGenerator, create_tfidf_ann_index

        from .scispacy_peer import scispacy_kb

        kb, self._order = scispacy_kb(dictionary)
        logger.info("scispaCy: building its TF-IDF + HNSW index over %d aliases (this is its slow step)",
                    len(kb.alias_to_cuis))
        with _scispacy_build_patches():
            aliases, vectorizer, ann_index = create_tfidf_ann_index(None, kb)
        # create_tfidf_ann_index leaves nmslib's query-time default (efSearch=20, below k=30);
        # scispaCy's linkers run with the value its index loader sets.
        ann_index.setQueryTimeParams({"efSearch": SCISPACY_EF_SEARCH})
        self._generator = CandidateGenerator(ann_index, vectorizer, aliases, kb)

    def _rank(self, queries: List[str], k: int) -> Ranked:
        out: Ranked = []
        batch = 1024
        for start in range(0, len(queries), batch):
            chunk = queries[start:start + batch]
            with contextlib.redirect_stdout(io.StringIO()):
                found = self._generator(chunk, self.neighbours)
            for candidates in found:
                ranked = sorted(candidates, key=lambda c: (-max(c.similarities), self._order.get(c.concept_id, 0)))
                out.append([c.concept_id for c in ranked[:k]])
        return out

    def describe(self) -> Dict[str, Any]:
        return dict(super().describe(), neighbours=self.neighbours, ef_search=SCISPACY_EF_SEARCH,
                    hnsw={"M": 100, "efConstruction": 2000})


def make_system(spec: str, pooling: Optional[str] = None, device: str = "auto", batch_size: int = 256,
                label: Optional[str] = None, max_k: int = 5, precision: str = "float32",
                generative_weight: float = DEFAULT_GENERATIVE_WEIGHT) -> LinkingSystem:
    """``exact`` | ``tfidf`` | ``scispacy`` | a model folder or name (dense linker) | ``generative:MODEL`` |
    ``DENSE+generative:MODEL`` | ``DENSE+rerank:MODEL`` (:mod:`.context_systems`)."""
    key = spec.strip().lower()
    system: Optional[LinkingSystem] = make_context_system(spec, pooling=pooling, device=device, batch_size=batch_size,
                                                          label=label, precision=precision,
                                                          generative_weight=generative_weight)
    if system is not None:
        return system
    if key == "exact":
        system = ExactMatch()
    elif key == "tfidf":
        system = CharTfidf()
    elif key == "scispacy":
        system = ScispacyCandidates()
    else:
        return DenseLinker(spec, pooling=pooling, device=device, batch_size=batch_size, label=label, max_k=max_k,
                           precision=precision)
    if pooling is not None:
        raise InputError(f"--pooling applies to dense models, not to the {key!r} baseline", field="pooling")
    if label:
        system.name = label
    return system
