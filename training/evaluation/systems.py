"""The interface every system of the evaluation implements (:func:`.baselines.make_system` picks one).

Every system gets the same dictionary (a :class:`KnowledgeBase`, possibly with training
mentions added) and the same normalised query strings, and returns concept IDs best
first, one entry per concept. That is what makes the rows of the table comparable.

A system is prepared once per distinct dictionary (keyed by its fingerprint), so one
process can evaluate several datasets that share a KB without rebuilding anything.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

from .queries import Query

Ranked = List[List[str]]
RankedParts = List[List[str]]
"""One query's ranking: per normalised part, its concept IDs best first."""


class LinkingSystem:
    """Base class: subclasses implement :meth:`_fit` and :meth:`_rank`."""

    name = "system"
    kind = "baseline"

    def __init__(self) -> None:
        self._fitted: Optional[str] = None

    def prepare(self, dictionary: KnowledgeBase) -> None:
        """Index ``dictionary`` unless it is the one already indexed."""
        key = dictionary.fingerprint()
        if key != self._fitted:
            self._fit(dictionary)
            self._fitted = key

    def rank(self, queries: Sequence[str], k: int) -> Ranked:
        """Top-``k`` concept IDs per (already normalised) query, best first, no repeats."""
        self._check(k)
        return self._rank(list(queries), k)

    def rank_queries(self, queries: Sequence[Query], k: int) -> List[RankedParts]:
        """Top-``k`` concept IDs of each part of each query. This ranks each distinct string once and
        never reads the abstract; systems whose models read the mention in context override it."""
        strings = list(dict.fromkeys(p for q in queries for p in q.parts))
        ranked = dict(zip(strings, self.rank(strings, k)))
        return [[ranked[p] for p in q.parts] for q in queries]

    def _check(self, k: int) -> None:
        if self._fitted is None:
            raise RuntimeError(f"{self.name}: call prepare(dictionary) before ranking")
        if k < 1:
            raise InputError(f"k must be positive, got {k}", field="k")

    def describe(self) -> Dict[str, Any]:
        return {"name": self.name, "kind": self.kind}

    def _fit(self, dictionary: KnowledgeBase) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _rank(self, queries: List[str], k: int) -> Ranked:  # pragma: no cover - abstract
        raise NotImplementedError
