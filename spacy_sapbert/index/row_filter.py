"""Searches restricted to some rows of a name index: the names of concepts of some types.

The restriction is applied inside the search, never by dropping the hits of a top-k search, so a
mention whose nearest names are all excluded still gets the best allowed ones. Each kind does it
the way that is fastest and gives the rows exact search over the allowed rows gives:

- ``pq``: a PQ search is exhaustive, so the allowed rows' codes are searched alone, in an index of
  their own made once per filter (:meth:`RowFilter.pq_codes`; FAISS's ``IndexPQ`` refuses ID
  selectors, faiss issue #3559). Its scores are the full index's to the bit (the same codes and
  tables); it scans only the allowed codes: on the embedded default's 180,068 names, 300 queries
  restricted to 45% of the rows took 1.48 s by over-fetching the whole index (the way before) and
  0.70 s this way, for a copy of the allowed codes (64 bytes a row: 5 MB for the 79,820 Disease rows).
  4-bit codes are packed into a fast-scan index of their own (:func:`~spacy_sapbert.index.kinds.pq_rows_searcher`).
- ``flat``: when the allowed rows are not few (:data:`FLAT_OVERFETCH_SHARE`), the whole index is
  searched through BLAS for more rows than wanted (:func:`overfetch_search`); FAISS's selector
  search scores the allowed rows one at a time, ten times slower than a matrix multiply.
- ``flat`` with few allowed rows, ``hnsw``, ``ivfpq``: a FAISS ID selector (a bitmap) at search
  time; the approximate kinds can come back short of allowed rows a selector search does not
  reach (:func:`filtered_search`).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np

from spacy_sapbert.index.kinds import faiss_module, plain_search, pq_rows_searcher

OVERFETCH_GROWTH = 4
"""Each further over-fetch round asks for this many times more rows."""
FLAT_OVERFETCH_SHARE = 0.05
"""A filtered flat search over-fetches through BLAS when at least this share of rows is allowed (and
takes FAISS's selector, which scores only the allowed rows one by one, when fewer are). Measured on
two cores over 73,860 names, 282 queries: 60% allowed, selector 2.1 s, over-fetch 0.21 s; 10%, 0.69
against 0.22 s; 2%, 0.06 against 0.28 s."""


class RowFilter:
    """The rows a search may return (a boolean mask over the index's rows). What a search needs
    from it is made on first use and kept: the FAISS selector (a bitmap of one bit per row, whose
    bytes it keeps alive: FAISS holds a bare pointer to them), and for a PQ index the allowed
    rows' codes in an index of their own."""

    def __init__(self, mask: np.ndarray) -> None:
        self.mask = np.ascontiguousarray(mask, dtype=bool).reshape(-1)
        self.count = int(self.mask.sum())
        self._bits: Optional[np.ndarray] = None
        self._selector: Any = None
        self._pq: Optional[Tuple[Any, Any, np.ndarray]] = None  # (the full index, its allowed codes, their rows)

    def __len__(self) -> int:
        return len(self.mask)

    @property
    def selector(self) -> Any:
        if self._selector is None:
            faiss = faiss_module()
            self._bits = np.packbits(self.mask, bitorder="little")  # FAISS reads bit i of byte i // 8
            self._selector = faiss.IDSelectorBitmap(len(self._bits), faiss.swig_ptr(self._bits))  # n: bytes
        return self._selector

    def pq_codes(self, index: Any) -> Tuple[Any, np.ndarray]:
        """An index of the allowed rows of ``index`` (its quantiser and codes, copied; searched as
        :func:`~spacy_sapbert.index.kinds.pq_rows_searcher` makes it) and the row of ``index`` each of its rows
        is; made once per index."""
        if self._pq is None or self._pq[0] is not index:
            rows = np.flatnonzero(self.mask)
            self._pq = (index, pq_rows_searcher(index, rows), rows)
        return self._pq[1], self._pq[2]

    def __repr__(self) -> str:
        return f"RowFilter({self.count} of {len(self.mask)} rows)"


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
    if kind == "pq":
        allowed, row_of = rows.pq_codes(index)
        scores, found = allowed.search(vectors, k)
        return scores, np.where(found >= 0, row_of[np.maximum(found, 0)], -1)
    if kind == "flat" and rows.count >= FLAT_OVERFETCH_SHARE * len(rows):
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
    """The filtered search by over-fetching: search the whole index for more rows than ``k`` and
    keep the allowed ones, asking for :data:`OVERFETCH_GROWTH` times more for the queries still
    short of ``k`` until they have ``k`` or the index has no more rows to give.

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


__all__ = ["FLAT_OVERFETCH_SHARE", "OVERFETCH_GROWTH", "RowFilter", "filtered_search",
           "overfetch_search"]
