"""The FAISS index behind each kind of :class:`~spacy_sapbert.index.name_index.NameIndex`.

Vectors are unit length, so inner product is cosine similarity. ``flat`` is exact and
is the default (MEDIC's ~70k names search in microseconds); ``hnsw`` and ``ivfpq`` are
for KBs with millions of names, where a flat index is slow (HNSW) or too big (IVF-PQ;
its scores are approximate). ``pq`` (product quantisation, searched exhaustively) keeps
a KB of ~10^5 names in a few MB, which is how the embedded default ships its index;
its scores are approximate too. The two compressed kinds take ``rerank=N``: the top ``N``
rows of the compressed search are scored again exactly (:func:`rerank_exact`).

A search may be restricted to some rows (:class:`RowFilter`: the names of concepts of some
types). The restriction is applied inside the search, never by dropping the hits of a top-k
search, so a mention whose nearest names are all excluded still gets the best allowed ones:
``flat``, ``hnsw`` and ``ivfpq`` take a FAISS ID selector (a bitmap) at search time; FAISS's
``IndexPQ`` refuses selectors (``selector not supported``, faiss issue #3559), so ``pq``
over-fetches (:func:`overfetch_search`), which gives the same rows since a PQ search is
exhaustive. The approximate kinds can miss allowed rows a selector search does not reach; see
:func:`filtered_search`.

FAISS is imported when an index is made or read, not when this module is.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)

INDEX_KINDS = ("flat", "hnsw", "ivfpq", "pq")
SELECTOR_KINDS = ("flat", "hnsw", "ivfpq")
"""Kinds whose FAISS index takes an ID selector at search time (``IndexPQ`` does not)."""
OVERFETCH_GROWTH = 4
"""Each further over-fetch round asks for this many times more rows."""


def faiss_module() -> Any:
    import faiss

    return faiss


def check_kind(kind: str) -> None:
    if kind not in INDEX_KINDS:
        raise InputError(f"unknown index kind {kind!r}: use one of {INDEX_KINDS}", field="kind")


def make_faiss_index(kind: str, dim: int, vectors: np.ndarray, params: Dict[str, int]) -> Tuple[Any, Dict[str, int]]:
    """An empty FAISS index of ``kind`` (trained on ``vectors`` if it needs training) and the
    parameters used: those given in ``params``, the rest derived from the number of vectors."""
    check_kind(kind)
    if kind == "flat":
        if params:
            raise InputError(f"a flat index takes no parameters, got {sorted(params)}", field="params")
        return faiss_module().IndexFlatIP(dim), {}
    makers = {"pq": _make_pq, "hnsw": _make_hnsw, "ivfpq": _make_ivfpq}
    return makers[kind](dim, vectors, params)


def _make_pq(dim: int, vectors: np.ndarray, params: Dict[str, int]) -> Tuple[Any, Dict[str, int]]:
    faiss = faiss_module()
    # 8-bit codes of pq_m sub-vectors (dim/4 dimensions by default: 96 bytes per name at dim 384)
    used = {"pq_m": next(m for m in (dim // 4, dim // 2, dim, 1) if m >= 1 and dim % m == 0), "pq_bits": 8,
            "rerank": 0}
    _merge_params(used, params)
    _check_divides(used["pq_m"], dim)
    used["pq_bits"] = min(used["pq_bits"], max(1, int(math.log2(max(len(vectors), 2)))))  # small KBs: fewer centroids
    index = faiss.IndexPQ(dim, used["pq_m"], used["pq_bits"], faiss.METRIC_INNER_PRODUCT)
    index.pq.cp.min_points_per_centroid = 1
    index.train(vectors)
    return index, used


def _make_hnsw(dim: int, vectors: np.ndarray, params: Dict[str, int]) -> Tuple[Any, Dict[str, int]]:
    faiss = faiss_module()
    used = {"hnsw_m": 32, "ef_construction": 80, "ef_search": 128}
    _merge_params(used, params)
    index = faiss.IndexHNSWFlat(dim, used["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = used["ef_construction"]
    return index, used


def _make_ivfpq(dim: int, vectors: np.ndarray, params: Dict[str, int]) -> Tuple[Any, Dict[str, int]]:
    faiss = faiss_module()
    # nlist ~ 4·sqrt(n) lists with >= 39 training points each, sub-quantisers of 8 dimensions,
    # 8-bit codes once there are enough points to train 256 centroids.
    n = len(vectors)
    nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
    pq_m = next((m for m in (dim // 8, dim // 4, dim // 2, 1) if m >= 1 and dim % m == 0), 1)
    pq_bits = 8 if n >= 256 * 39 else max(1, min(8, int(math.log2(max(n, 2) / 39)) if n >= 78 else 1))
    used = {"nlist": nlist, "pq_m": pq_m, "pq_bits": pq_bits, "nprobe": min(nlist, 16), "rerank": 0}
    _merge_params(used, params)
    _check_divides(used["pq_m"], dim)
    if n < 256 * 39:
        logger.warning("IVF-PQ over %d names is approximate without benefit; it is meant for millions of names", n)
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, used["nlist"], used["pq_m"], used["pq_bits"], faiss.METRIC_INNER_PRODUCT)
    index.cp.min_points_per_centroid = 1  # small KBs: train anyway, quietly
    index.pq.cp.min_points_per_centroid = 1
    index.train(vectors)
    return index, used


def _check_divides(pq_m: int, dim: int) -> None:
    if dim % pq_m:
        raise InputError(f"pq_m={pq_m} must divide the vector dimension {dim}", field="pq_m")


def _merge_params(used: Dict[str, int], params: Dict[str, int]) -> None:
    unknown = set(params) - set(used)
    if unknown:
        raise InputError(f"unknown index parameter(s) {sorted(unknown)}; this kind takes {sorted(used)}",
                         field="params")
    for key, value in params.items():
        smallest = 0 if key == "rerank" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < smallest:
            raise InputError(f"must be an integer >= {smallest}, got {value!r}", field=key)
        used[key] = value


def configure_search(index: Any, kind: str, params: Dict[str, int], k: int = 0) -> None:
    """Set the search-time parameters a saved manifest records (FAISS does not save them);
    an HNSW search explores at least ``k`` candidates, or it could return fewer than ``k``."""
    if kind == "hnsw":
        faiss_module().downcast_index(index).hnsw.efSearch = max(int(params.get("ef_search", 128)), k)
    elif kind == "ivfpq":
        faiss_module().extract_index_ivf(index).nprobe = int(params.get("nprobe", 16))


class RowFilter:
    """The rows a search may return (a boolean mask over the index's rows). Its FAISS selector,
    a bitmap of one bit per row, is made once and keeps its bytes alive: FAISS holds a bare
    pointer to them."""

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = np.ascontiguousarray(mask, dtype=bool).reshape(-1)
        self.count = int(self.mask.sum())
        self._bits: Optional[np.ndarray] = None
        self._selector: Any = None

    def __len__(self) -> int:
        return len(self.mask)

    @property
    def selector(self) -> Any:
        if self._selector is None:
            faiss = faiss_module()
            self._bits = np.packbits(self.mask, bitorder="little")  # FAISS reads bit i of byte i // 8
            self._selector = faiss.IDSelectorBitmap(len(self._bits), faiss.swig_ptr(self._bits))  # n: bytes
        return self._selector

    def __repr__(self) -> str:
        return f"RowFilter({self.count} of {len(self.mask)} rows)"


def plain_search(index: Any, kind: str, params: Dict[str, int], vectors: np.ndarray,
                 k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows of the whole index (an HNSW search explores at least ``k`` candidates)."""
    if kind == "hnsw":
        configure_search(index, kind, params, k)
    return index.search(vectors, k)


def filtered_search(index: Any, kind: str, params: Dict[str, int], vectors: np.ndarray, k: int,
                    rows: RowFilter) -> Tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows among ``rows`` per query (row -1 where there are fewer).

    With a selector, an approximate kind can come back short of ``k`` allowed rows though
    there are more (HNSW's graph walk or IVF's probed lists reach too few of them, worst for a
    small type), and those queries are searched again: IVF with the selector in every list
    (probing more lists is the only way to reach more rows), HNSW by :func:`overfetch_search`."""
    n = len(vectors)
    if rows.count == 0:
        return np.full((n, k), -np.inf, dtype=np.float32), np.full((n, k), -1, dtype=np.int64)
    if rows.count == len(rows):
        return plain_search(index, kind, params, vectors, k)
    if kind not in SELECTOR_KINDS:
        return overfetch_search(index, kind, params, vectors, k, rows)
    scores, found = index.search(vectors, k, params=_selector_params(kind, params, k, rows.selector))
    short = np.flatnonzero((found >= 0).sum(axis=1) < min(k, rows.count))
    if len(short) and kind == "ivfpq":
        every_list = dict(params, nprobe=faiss_module().extract_index_ivf(index).nlist)
        scores[short], found[short] = index.search(vectors[short], k,
                                                   params=_selector_params(kind, every_list, k, rows.selector))
    elif len(short):
        scores[short], found[short] = overfetch_search(index, kind, params, vectors[short], k, rows)
    return scores, found


def _selector_params(kind: str, params: Dict[str, int], k: int, selector: Any) -> Any:
    """FAISS search parameters with ``selector``. They replace the index's own search settings,
    whose defaults (efSearch 16, nprobe 1) are not ours, so the manifest's are set again."""
    faiss = faiss_module()
    if kind == "hnsw":
        return faiss.SearchParametersHNSW(sel=selector, efSearch=max(int(params.get("ef_search", 128)), k))
    if kind == "ivfpq":
        return faiss.SearchParametersIVF(sel=selector, nprobe=int(params.get("nprobe", 16)))
    return faiss.SearchParameters(sel=selector)


def overfetch_search(index: Any, kind: str, params: Dict[str, int], vectors: np.ndarray, k: int,
                     rows: RowFilter) -> Tuple[np.ndarray, np.ndarray]:
    """The filtered search of a kind without selectors: search the whole index for more rows
    than ``k`` and keep the allowed ones, asking for :data:`OVERFETCH_GROWTH` times more for the
    queries still short of ``k`` until they have ``k`` or the index has no more rows to give.

    The first round asks for about twice ``k`` divided by the allowed share of rows, which is
    enough for most queries (a type that is half the names: 4·k)."""
    n, total = len(vectors), len(rows)
    out_scores = np.full((n, k), -np.inf, dtype=np.float32)
    out_rows = np.full((n, k), -1, dtype=np.int64)
    needed = min(k, rows.count)
    pending = np.arange(n)
    fetch = min(total, max(2 * k, math.ceil(2 * k * total / max(rows.count, 1))))
    while len(pending):
        scores, found = plain_search(index, kind, params, vectors[pending], fetch)
        valid = found >= 0
        allowed = valid & rows.mask[np.where(valid, found, 0)]
        finished = []
        for j, query in enumerate(pending):
            hits = np.flatnonzero(allowed[j])[:k]
            exhausted = fetch >= total or int(valid[j].sum()) < fetch  # the index gave all it had
            if len(hits) >= needed or exhausted:
                out_scores[query, :len(hits)] = scores[j, hits]
                out_rows[query, :len(hits)] = found[j, hits]
                finished.append(j)
        pending = np.delete(pending, finished)
        fetch = min(total, fetch * OVERFETCH_GROWTH)
    return out_scores, out_rows


def rerank_exact(queries: np.ndarray, rows: np.ndarray, lookup: Callable[[np.ndarray], Any],
                 k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Score the candidate ``rows`` (n, m) of ``queries`` (n, dim) exactly with the vectors
    ``lookup(rows)`` returns, and keep the best ``k`` per query (row -1 = no candidate).

    Each distinct candidate is read once, in row order, so a memory-mapped file is read
    sequentially where candidates share pages."""
    valid = rows >= 0
    distinct, inverse = np.unique(np.where(valid, rows, 0), return_inverse=True)
    table = np.asarray(lookup(distinct), dtype=np.float32)
    candidates = table[inverse.reshape(rows.shape)]  # (n, m, dim)
    exact = np.einsum("nd,nmd->nm", queries.astype(np.float32, copy=False), candidates)
    exact[~valid] = -np.inf
    order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    picked_rows = np.take_along_axis(np.where(valid, rows, -1), order, axis=1)
    return np.take_along_axis(exact, order, axis=1).astype(np.float32), picked_rows


def promote_rows(scores: np.ndarray, found: np.ndarray, promoted: Sequence[Optional[np.ndarray]],
                 promoted_scores: Sequence[float], k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Merge rows known to score ``promoted_scores[i]`` for query ``i`` (``promoted[i]``: None or
    row numbers) into that query's hits (n, k), best ``k`` kept, each row once, best first."""
    scores, found = scores.copy(), found.copy()
    for i, extra in enumerate(promoted):
        if extra is None or not len(extra):
            continue
        keep = (found[i] >= 0) & ~np.isin(found[i], extra)
        rows = np.concatenate([np.asarray(extra, dtype=np.int64), found[i][keep]])
        values = np.concatenate([np.full(len(extra), promoted_scores[i], dtype=np.float32), scores[i][keep]])
        order = np.argsort(-values, kind="stable")[:k]
        found[i], scores[i] = -1, -np.inf
        found[i, :len(order)], scores[i, :len(order)] = rows[order], values[order]
    return scores, found


__all__ = ["INDEX_KINDS", "SELECTOR_KINDS", "RowFilter", "check_kind", "configure_search", "faiss_module",
           "filtered_search", "make_faiss_index", "overfetch_search", "plain_search", "promote_rows", "rerank_exact"]
