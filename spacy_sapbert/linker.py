"""Linker: mention strings → ranked KB concepts, without spaCy.

normalise → encode → top-k names → best score per concept → threshold and cut-off.
A concept's score is its best name's score (SapBERT's inference rule). The spaCy
component, the CLI and the evaluation all call :meth:`Linker.link`, so they agree.

Running text repeats mentions ("HCQ" ten times in an abstract, the same disease in
every document of a corpus): identical normalised mentions of one call are encoded once,
and an LRU cache keeps the candidates of recent ones across calls.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .encoder import Encoder
from .errors import InputError
from .index import NameIndex
from .kb import KnowledgeBase
from .normalize import normalize
from .settings import DEFAULT_CACHE_SIZE, DEFAULT_K, DEFAULT_MAX_ENTITIES, LinkerSettings

logger = logging.getLogger(__name__)

Candidates = List[Tuple[str, float]]
__all__ = ["Linker", "Candidates", "DEFAULT_K", "DEFAULT_MAX_ENTITIES", "DEFAULT_CACHE_SIZE"]


class Linker:
    """Links mention strings to concepts of ``kb`` through ``index`` (built when not given).

    What it returns is set by its :class:`~spacy_sapbert.settings.LinkerSettings` (``k``,
    ``threshold``, ``max_entities_per_mention``, ``cache_size``): ``settings``, with
    ``changes`` (keyword arguments named like its fields) applied. A ``sapbert_linker`` pipe
    hands its linker its own settings and reads them back from it, so the two cannot disagree.
    """

    def __init__(self, encoder: Encoder, kb: KnowledgeBase, index: Optional[NameIndex] = None, *,
                 settings: Optional[LinkerSettings] = None, show_progress: bool = True, **changes: Any) -> None:
        settings = settings or LinkerSettings()
        self._settings = settings.replace("Linker", **changes) if changes else settings
        if index is None:
            index = NameIndex.build(kb, encoder, show_progress=show_progress)
        else:
            index.check(encoder, kb)
        self.encoder = encoder
        self.kb = kb
        self.index = index
        self._cache: "OrderedDict[str, Tuple[Tuple[str, float], ...]]" = OrderedDict()
        self.hits = 0
        self.misses = 0

    # -- settings -----------------------------------------------------------------
    @property
    def settings(self) -> LinkerSettings:
        """What this linker follows. Assigning new settings is the one way they change: the
        properties below do it, and a pipe that owns the linker does it."""
        return self._settings

    @settings.setter
    def settings(self, settings: LinkerSettings) -> None:
        # a different k changes the candidates: drop them; a smaller cache drops its oldest entries
        if settings.k != self._settings.k:
            self.clear_cache()
        self._settings = settings
        while len(self._cache) > settings.cache_size:
            self._cache.popitem(last=False)

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

    # -- linking ------------------------------------------------------------------
    def link(self, mentions: Sequence[str]) -> List[Candidates]:
        """``[(concept_id, score), …]`` per mention, best first, at most
        ``max_entities_per_mention``, each score >= ``threshold`` when one is set.

        A mention with no letters or digits (empty, whitespace, punctuation, control
        characters) normalises to "" and gets ``[]`` without being encoded.
        """
        keys = self._keys(mentions)
        found = self._candidates(keys)
        return [self._select(found[key]) if key else [] for key in keys]

    def candidates(self, mentions: Sequence[str]) -> List[Candidates]:
        """Every concept among the top-``k`` names, best first, ignoring threshold and cut-off."""
        keys = self._keys(mentions)
        found = self._candidates(keys)
        return [list(found[key]) if key else [] for key in keys]

    def _keys(self, mentions: Sequence[str]) -> List[str]:
        if isinstance(mentions, str):
            raise InputError("link() takes a sequence of mentions, not one string; wrap it in a list")
        keys = []
        for i, mention in enumerate(mentions):
            if not isinstance(mention, str):
                raise InputError(f"mention {i} is {type(mention).__name__}, not a string")
            keys.append(normalize(mention))
        return keys

    def _select(self, candidates: Tuple[Tuple[str, float], ...]) -> Candidates:
        if self.threshold is None:
            return list(candidates[: self.max_entities_per_mention])
        kept = [c for c in candidates if c[1] >= self.threshold]
        return kept[: self.max_entities_per_mention]

    def _candidates(self, keys: Sequence[str]) -> Dict[str, Tuple[Tuple[str, float], ...]]:
        found: Dict[str, Tuple[Tuple[str, float], ...]] = {}
        missing: List[str] = []
        for key in dict.fromkeys(k for k in keys if k):
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                found[key] = cached
                self.hits += 1
            else:
                missing.append(key)
                self.misses += 1
        if missing:
            vectors = self.encoder.encode(missing)
            scores, rows = self.index.search(vectors, min(self.k, len(self.index)))
            for key, row_scores, row_ids in zip(missing, scores, rows):
                found[key] = self._by_concept(row_scores, row_ids)
                self._remember(key, found[key])
        return found

    def _by_concept(self, scores: Sequence[float], rows: Sequence[int]) -> Tuple[Tuple[str, float], ...]:
        best: Dict[str, float] = {}
        for score, row in zip(scores, rows):
            if row < 0:
                continue
            cid = self.index.concept_ids[row]
            if cid not in best:  # hits come best first: the first is the concept's best name
                best[cid] = float(score)
        return tuple(sorted(best.items(), key=lambda item: -item[1]))

    # -- cache --------------------------------------------------------------------
    def _remember(self, key: str, value: Tuple[Tuple[str, float], ...]) -> None:
        if self.cache_size == 0:
            return
        self._cache[key] = value
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def clear_cache(self) -> None:
        self._cache.clear()

    def cache_info(self) -> Dict[str, int]:
        """Hits and misses count distinct mentions per call, as an encoder sees them."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache), "max_size": self.cache_size}

    def __repr__(self) -> str:
        return (f"Linker(kb={self.kb.name!r}, index={self.index!r}, k={self.k}, threshold={self.threshold}, "
                f"max_entities_per_mention={self.max_entities_per_mention}, cache_size={self.cache_size})")
