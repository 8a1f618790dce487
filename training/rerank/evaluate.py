"""Dev evaluation of a re-ranker against its first stage, and its calibration.

Accuracy is SapBERT's Acc@1 on BioSyn queries: each sub-mention of a composite query is
re-ranked on its own, a pick is right when its IDs meet the query's gold IDs, and a query counts
only when every sub-mention's pick is right. The first stage's pick is its top candidate; the
re-ranker picks among the first stage's top k (:meth:`~spacy_sapbert.linking.rerank.model.Reranker.choose`).
``oracle`` is the ceiling: every sub-mention has a right candidate among the k.

Calibration, on dev: the temperature minimises the NLL of ``softmax(scores / T)`` on the right
candidates (items with one among the k), a 1-D search over log T (a grid, then golden-section
refinement); then the margin is the smallest value in 0, 0.01, …, 0.99 with the best Acc@1 (0.99: the
re-ranker all but never overrides the first stage, so on dev adaptive re-ranking is never worse
than the first stage alone).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from spacy_sapbert.linking.rerank.stage import needs_rerank
from spacy_sapbert.linking.rerank.model import Reranker, choose, softmax

from .data import RerankData, eval_rows

logger = logging.getLogger(__name__)
ADAPTIVE_GAPS = (0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2)


@dataclass
class Scored:
    """A data file's items scored by a re-ranker: candidate scores, which candidates are right, query of each item."""

    name: str
    scores: List[np.ndarray]
    right: List[List[bool]]
    queries: List[int]
    first_stage: Optional[List[List[float]]] = None
    """Each candidate's first-stage cosine (for adaptive re-ranking: :func:`adaptive`)."""


def score_data(reranker: Reranker, data: RerankData, k: int, batch_size: int = 0) -> Scored:
    rows = eval_rows(data, k, reranker.settings.separator)
    scores = reranker.score(rows.contexts, rows.texts, batch_size or None, rows.first_stage)
    return Scored(str(data.path), scores, rows.right, rows.queries, rows.first_stage)


def query_accuracy(picks_right: Sequence[bool], queries: Sequence[int]) -> float:
    """Acc (%) over queries: a query is right when all its items are."""
    by_query: Dict[int, bool] = {}
    for ok, query in zip(picks_right, queries):
        by_query[query] = by_query.get(query, True) and bool(ok)
    return round(100.0 * sum(by_query.values()) / max(len(by_query), 1), 2)


def _picks(scored: Scored, temperature: float, margin: float, max_gap: Optional[float] = None) -> List[bool]:
    out = []
    cosines = scored.first_stage or [[] for _ in scored.scores]
    for scores, right, first in zip(scored.scores, scored.right, cosines):
        if len(scores) == 0:
            out.append(False)
            continue
        if max_gap is not None and not needs_rerank(first, max_gap):
            out.append(right[0])
            continue
        out.append(right[choose(softmax(scores, temperature), margin)])
    return out


def accuracy(scored: Scored, temperature: float, margin: float) -> Dict[str, Any]:
    first = [bool(r) and r[0] for r in scored.right]
    return {"queries": len(set(scored.queries)), "items": len(scored.queries),
            "first_stage_acc1": query_accuracy(first, scored.queries),
            "reranked_acc1": query_accuracy(_picks(scored, temperature, margin), scored.queries),
            "reranked_acc1_no_margin": query_accuracy(_picks(scored, temperature, 0.0), scored.queries),
            "oracle_acc_at_k": query_accuracy([any(r) for r in scored.right], scored.queries)}


def adaptive(scored: Scored, temperature: float, margin: float,
             gaps: Sequence[float] = ADAPTIVE_GAPS) -> List[Dict[str, float]]:
    """Acc@1 and the share of items re-ranked when only items whose best two first-stage cosines are
    closer than each gap go to the re-ranker (:func:`~spacy_sapbert.linking.rerank.stage.needs_rerank`)."""
    if scored.first_stage is None:
        return []
    rows = []
    for gap in gaps:
        sent = sum(needs_rerank(first, gap) for first in scored.first_stage)
        rows.append({"max_gap": gap, "acc1": query_accuracy(_picks(scored, temperature, margin, gap), scored.queries),
                     "reranked_share": round(100.0 * sent / max(len(scored.first_stage), 1), 2)})
    return rows


def nll(scored: Sequence[Scored], temperature: float) -> float:
    total, n = 0.0, 0
    for part in scored:
        for scores, right in zip(part.scores, part.right):
            if not any(right):
                continue
            z = np.asarray(scores, dtype=np.float64) / temperature
            lse = z.max() + math.log(np.exp(z - z.max()).sum())
            zr = z[np.asarray(right)]
            total += lse - (zr.max() + math.log(np.exp(zr - zr.max()).sum()))
            n += 1
    return total / max(n, 1)


def fit_temperature(scored: Sequence[Scored], low: float = 0.01, high: float = 100.0) -> float:
    """The temperature in [low, high] with the smallest NLL (grid over log T, then golden-section)."""
    grid = np.linspace(math.log(low), math.log(high), 41)
    values = [nll(scored, math.exp(x)) for x in grid]
    i = int(np.argmin(values))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    for _ in range(25):
        if nll(scored, math.exp(c)) < nll(scored, math.exp(d)):
            b, d = d, c
            c = b - ratio * (b - a)
        else:
            a, c = c, d
            d = a + ratio * (b - a)
    temperature = math.exp((a + b) / 2)
    if i in (0, len(grid) - 1):
        logger.warning("temperature %.3g is at the end of the search range [%g, %g]: the scores barely separate "
                       "right from wrong candidates (an untrained model?)", temperature, low, high)
    return round(temperature, 4)


def tune_margin(scored: Sequence[Scored], temperature: float) -> Tuple[float, float]:
    """(margin, pooled Acc@1): the smallest margin in 0..0.99 with the best Acc@1 over all ``scored`` queries."""
    queries = [(i, q) for i, part in enumerate(scored) for q in part.queries]
    best = (-1.0, 0.0)
    for margin in np.round(np.arange(0.0, 0.995, 0.01), 2):
        picks = [ok for part in scored for ok in _picks(part, temperature, float(margin))]
        acc = query_accuracy(picks, queries)  # type: ignore[arg-type]
        if acc > best[0]:
            best = (acc, float(margin))
    return best[1], best[0]


def evaluate(reranker: Reranker, datasets: Sequence[RerankData], k: int = 0, calibrate: bool = False,
             batch_size: int = 0) -> Dict[str, Any]:
    """Acc@1 of the first stage and of the re-ranker per data file (and the calibration when asked:
    it is then written into ``reranker.settings``)."""
    k = k or reranker.settings.k
    scored = [score_data(reranker, data, k, batch_size) for data in datasets]
    report: Dict[str, Any] = {"k": k}
    if calibrate:
        reranker.settings.temperature = fit_temperature(scored)
        reranker.settings.margin, pooled = tune_margin(scored, reranker.settings.temperature)
        report.update(nll_at_1=round(nll(scored, 1.0), 4),
                      nll_calibrated=round(nll(scored, reranker.settings.temperature), 4), pooled_acc1=pooled)
    settings = reranker.settings
    report.update(temperature=settings.temperature, margin=settings.margin,
                  first_stage_weight=settings.first_stage_weight,
                  datasets={part.name: dict(accuracy(part, settings.temperature, settings.margin),
                                            adaptive=adaptive(part, settings.temperature, settings.margin))
                            for part in scored})
    return report
