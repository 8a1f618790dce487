"""Linker: mention strings → ranked KB concepts, without spaCy.

normalise → encode → top-k names → best score per concept → threshold and cut-off.
A concept's score is its best name's score (SapBERT's inference rule). The spaCy
component, the CLI and the evaluation all call :meth:`Linker.link`, so they agree.

A mention may be restricted to concepts of some KB types (``types``; the pipe derives them
from span labels through the ``label_to_types`` setting, :meth:`Linker.types_for`). The
restriction is part of the search (:mod:`spacy_sapbert.linking.type_filter`), so a DISEASE mention
whose nearest names are all chemicals still gets its best disease concepts. So is ``skip_newer_mesh``
(MeSH records of some types newer than the corpora's MeSH are never candidates of the search).

Running text repeats mentions ("HCQ" ten times in an abstract, the same disease in
every document of a corpus): identical normalised mentions of one call are encoded once,
and an LRU cache keeps the candidates of recent ones across calls, keyed by the normalised
mention and its type set. Mentions of several type sets are still encoded in one call.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple

import numpy as np

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.exact_rescore import NameVectors, rescore_near_best
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.linking.calibration import Calibration
from spacy_sapbert.linking.settings import DEFAULT_CACHE_SIZE, DEFAULT_K, DEFAULT_MAX_ENTITIES, LinkerSettings
from spacy_sapbert.linking.type_filter import TypeFilters, TypeSet, as_type_set, label_type_sets, types_of_labels

logger = logging.getLogger(__name__)

Candidates = List[Tuple[str, float]]
Found = Tuple[Tuple[str, float, int], ...]
"""(concept ID, score, index row of its best-matching name) per concept, best first."""
Key = Tuple[str, Optional[TypeSet]]
"""(normalised mention, the types it may link to or None for any): what is searched and cached."""
__all__ = ["Linker", "Candidates", "DEFAULT_K", "DEFAULT_MAX_ENTITIES", "DEFAULT_CACHE_SIZE"]


class Linker:
    """Links mention strings to concepts of ``kb`` through ``index`` (built when not given).

    What it returns is set by its :class:`~spacy_sapbert.linking.settings.LinkerSettings` (``k``,
    ``threshold``, ``max_entities_per_mention``, ``cache_size``, ``label_to_types``): ``settings``, with
    ``changes`` (keyword arguments named like its fields) applied. A ``sapbert_linker`` pipe
    hands its linker its own settings and reads them back from it, so the two cannot disagree.
    """

    def __init__(self, encoder: Encoder, kb: KnowledgeBase, index: Optional[NameIndex] = None, *,
                 settings: Optional[LinkerSettings] = None, show_progress: bool = True,
                 calibration: Optional[Calibration] = None, **changes: Any) -> None:
        settings = settings or LinkerSettings()
        self._settings = settings.replace("Linker", **changes) if changes else settings
        if index is None:
            index = NameIndex.build(kb, encoder, show_progress=show_progress)
        else:
            index.check(encoder, kb)
        self.encoder = encoder
        self.kb = kb
        self.index = index
        self._cache: "OrderedDict[Key, Found]" = OrderedDict()
        self.hits = 0
        self.misses = 0
        self._type_filters = TypeFilters(kb, index, self._settings.skip_newer_mesh or ())
        self.calibration = calibration
        """Maps the cosine scores of :meth:`link` to probabilities of being right (then
        ``threshold`` is a probability); None: scores are cosines. :meth:`candidates` stays raw."""
        self._label_types: Optional[Dict[str, TypeSet]] = None  # on first use: a pipe's is at load
        self._name_vectors = NameVectors(encoder)
        """Names encoded for ``rescore_gap`` (:mod:`spacy_sapbert.index.exact_rescore`)."""
        self.on_settings_change: Optional[Callable[[LinkerSettings], None]] = None
        """Told every new :attr:`settings`: the pipe that owns this linker records them in the
        pipeline's config, so that a change made here (``linker.threshold = …``) is saved too."""

    # -- settings -----------------------------------------------------------------
    @property
    def settings(self) -> LinkerSettings:
        """What this linker follows. Assigning new settings is the one way they change: the
        properties below do it, and a pipe that owns the linker does it."""
        return self._settings

    @settings.setter
    def settings(self, settings: LinkerSettings) -> None:
        # a different k or re-scoring changes the candidates: drop them; a smaller cache drops its oldest entries
        if settings.k != self._settings.k or settings.rescore_gap != self._settings.rescore_gap:
            self.clear_cache()
        if settings.skip_newer_mesh != self._settings.skip_newer_mesh:  # other rows searched: other candidates
            self._type_filters = TypeFilters(self.kb, self.index, settings.skip_newer_mesh or ())
            self._cache.clear()
        if settings.label_to_types != self._settings.label_to_types:
            self._label_types = None  # the cache is keyed by types, not labels: it stays
        self._settings = settings
        while len(self._cache) > settings.cache_size:
            self._cache.popitem(last=False)
        if self.on_settings_change is not None:
            self.on_settings_change(settings)

    @property
    def k(self) -> int:
        """Names retrieved per mention before they are grouped by concept."""
        return self._settings.k

    @k.setter
    def k(self, value: int) -> None:
        self.settings = self._settings.replace("Linker", k=value)

    @property
    def threshold(self) -> Optional[float]:
        """Lowest score a concept may have, or None."""
        return self._settings.threshold

    @threshold.setter
    def threshold(self, value: Optional[float]) -> None:
        self.settings = self._settings.replace("Linker", threshold=value)

    @property
    def max_entities_per_mention(self) -> int:
        return self._settings.max_entities_per_mention

    @max_entities_per_mention.setter
    def max_entities_per_mention(self, value: int) -> None:
        self.settings = self._settings.replace("Linker", max_entities_per_mention=value)

    @property
    def cache_size(self) -> int:
        """Distinct mentions whose candidates are kept across calls (0: none)."""
        return self._settings.cache_size

    @property
    def label_to_types(self) -> Optional[Dict[str, List[str]]]:
        return self._settings.label_to_types

    def types_for(self, labels: Sequence[str]) -> Optional[List[Optional[TypeSet]]]:
        """The ``types`` argument of :meth:`link` for spans with these labels (``label_to_types``):
        None when it is null; per label its types, or None (any) for a label it leaves out or
        maps only to types the KB lacks (warned when the linker was loaded)."""
        if self._settings.label_to_types is None:
            return None
        return types_of_labels(labels, self.label_types())

    def label_types(self) -> Dict[str, TypeSet]:
        """Span label → the types searched for it: ``label_to_types`` less the labels whose
        types no KB concept has (a warning names them). Worked out on first use, so that a
        linker that never sees labels (the CLI, the evaluation) warns of nothing; a pipe
        asks when it loads its linker and when the setting changes."""
        if self._label_types is None:
            mapping = self._settings.label_to_types
            self._label_types = {} if mapping is None else label_type_sets(mapping, self.kb.all_types(), self.kb.name)
        return self._label_types

    # -- linking ------------------------------------------------------------------
    def link(self, mentions: Sequence[str],
             types: Optional[Sequence[Optional[Collection[str]]]] = None) -> List[Candidates]:
        """``[(concept_id, score), …]`` per mention, best first, at most
        ``max_entities_per_mention``, each score >= ``threshold`` when one is set.

        ``types``, one entry per mention: the KB types its concepts must have one of (None:
        any); the best ``k`` names of those concepts are searched, so types that no concept
        has give ``[]``. A mention with no letters or digits (empty, whitespace,
        punctuation, control characters) normalises to "" and gets ``[]`` without being encoded.
        """
        return [self.select(found) for found in self.candidates(mentions, types)]

    def candidates(self, mentions: Sequence[str],
                   types: Optional[Sequence[Optional[Collection[str]]]] = None) -> List[Candidates]:
        """Every concept among the top-``k`` names (of ``types``), best first, ignoring threshold and cut-off."""
        return [[(cid, score) for cid, score, _ in found] for found in self.named_candidates(mentions, types)]

    def named_candidates(self, mentions: Sequence[str],
                         types: Optional[Sequence[Optional[Collection[str]]]] = None) -> List[List[Tuple[str, float, str]]]:
        """:meth:`candidates` with each concept's best-matching name, ``(concept_id, score, name)``:
        what the context re-ranker reads (:mod:`spacy_sapbert.linking.rerank.stage`)."""
        keys = self._keys(mentions, types)
        found = self._candidates(keys)
        names = self.index.names
        return [[(cid, score, names[row]) for cid, score, row in found[key]] if key[0] else [] for key in keys]

    def _keys(self, mentions: Sequence[str], types: Optional[Sequence[Optional[Collection[str]]]]) -> List[Key]:
        if isinstance(mentions, str):
            raise InputError("link() takes a sequence of mentions, not one string; wrap it in a list")
        texts = []
        for i, mention in enumerate(mentions):
            if not isinstance(mention, str):
                raise InputError(f"mention {i} is {type(mention).__name__}, not a string")
            texts.append(normalize(mention))
        if types is None:
            return [(text, None) for text in texts]
        if isinstance(types, (str, bytes)) or len(types) != len(texts):
            raise InputError(f"types must hold one entry per mention ({len(texts)}), got {types!r}", field="types")
        return [(text, as_type_set(allowed, i)) for i, (text, allowed) in enumerate(zip(texts, types))]

    def select(self, candidates: Candidates, calibrate: bool = True, threshold: Any = ...) -> Candidates:
        """``candidates`` (best first) as :meth:`link` returns them: scores through the calibration
        when there is one and ``calibrate``, then ``threshold`` (the linker's unless given; None: none)
        and ``max_entities_per_mention``. ``calibrate=False``: the scores are probabilities already
        (the context re-ranker's)."""
        if calibrate and self.calibration is not None and candidates:
            probabilities = self.calibration.probabilities([score for _, score in candidates])
            candidates = [(cid, float(p)) for (cid, _), p in zip(candidates, probabilities)]
        threshold = self.threshold if threshold is ... else threshold
        if threshold is None:
            return list(candidates[: self.max_entities_per_mention])
        kept = [c for c in candidates if c[1] >= threshold]
        return kept[: self.max_entities_per_mention]

    def _candidates(self, keys: Sequence[Key]) -> Dict[Key, Found]:
        found: Dict[Key, Found] = {}
        missing: List[Key] = []
        for key in dict.fromkeys(k for k in keys if k[0]):
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                found[key] = cached
                self.hits += 1
            else:
                missing.append(key)
                self.misses += 1
        if not missing:
            return found
        # One encoder call for every distinct text, then one search per type set.
        texts = list(dict.fromkeys(text for text, _ in missing))
        vectors = self._query_vectors(texts)
        position = {text: i for i, text in enumerate(texts)}
        groups: Dict[Optional[TypeSet], List[str]] = {}
        for text, types in missing:
            groups.setdefault(types, []).append(text)
        for types, group in groups.items():
            rows = self._type_filters.rows(types)
            queries = vectors[[position[text] for text in group]]
            scores, hits = self.index.search(queries, min(self.k, len(self.index)), rows, texts=group)
            if self._settings.rescore_gap is not None and not self.index.exact_scores:
                scores, hits = rescore_near_best(queries, scores, hits, self.index.names, self._name_vectors,
                                                 self._settings.rescore_gap, texts=group)
            for text, row_scores, row_ids in zip(group, scores, hits):
                found[(text, types)] = self._by_concept(row_scores, row_ids)
                self._remember((text, types), found[(text, types)])
        return found

    def _query_vectors(self, texts: List[str]) -> np.ndarray:
        """The texts' vectors: a text that is a KB name takes the vector its index stores for it
        (flat, HNSW: what encoding it gives), the others are encoded in one call. In running text
        many mentions are KB names (of NCBI test's gold disease mentions, 58% are MEDIC names;
        43% of the distinct ones)."""
        positions, stored = self.index.stored_name_vectors(texts)
        if not positions:
            return self.encoder.encode(texts)
        vectors = np.empty((len(texts), self.index.dim), dtype=np.float32)
        vectors[positions] = stored
        named = set(positions)
        rest = [i for i in range(len(texts)) if i not in named]
        if rest:
            vectors[rest] = self.encoder.encode([texts[i] for i in rest])
        return vectors

    def _by_concept(self, scores: Sequence[float], rows: Sequence[int]) -> Found:
        best: Dict[str, Tuple[float, int]] = {}
        for score, row in zip(scores, rows):
            if row < 0:
                continue
            cid = self.index.concept_ids[row]
            if cid not in best:  # hits come best first: the first is the concept's best name
                best[cid] = (float(score), int(row))
        return tuple((cid, score, row) for cid, (score, row) in sorted(best.items(), key=lambda item: -item[1][0]))

    # -- cache --------------------------------------------------------------------
    def _remember(self, key: Key, value: Found) -> None:
        if self.cache_size == 0:
            return
        self._cache[key] = value
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def clear_cache(self) -> None:
        """Forget cached candidates and re-scored name vectors (a vector encoded in another batch
        can differ in its last bits, so a run that must not depend on history clears both)."""
        self._cache.clear()
        self._name_vectors.clear()

    def cache_info(self) -> Dict[str, int]:
        """Hits and misses count distinct (mention, type set) pairs per call; ``names_encoded``, the
        KB names encoded for ``rescore_gap``."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache), "max_size": self.cache_size,
                "names_encoded": self._name_vectors.encoded}

    def __repr__(self) -> str:
        return (f"Linker(kb={self.kb.name!r}, index={self.index!r}, k={self.k}, threshold={self.threshold}, "
                f"max_entities_per_mention={self.max_entities_per_mention}, cache_size={self.cache_size}, "
                f"label_to_types={self.label_to_types})")
