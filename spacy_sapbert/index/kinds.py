"""The FAISS index behind each kind of :class:`~spacy_sapbert.index.name_index.NameIndex`.

Vectors are unit length, so inner product is cosine similarity. ``flat`` is exact and
is the default (MEDIC's ~70k names search in microseconds); ``hnsw`` and ``ivfpq`` are
for KBs with millions of names, where a flat index is slow (HNSW) or too big (IVF-PQ;
its scores are approximate). ``pq`` (product quantisation, searched exhaustively) keeps
a KB of ~10^5 names in a few MB, which is how the embedded default ships its index;
its scores are approximate too. A ``pq`` index of 4-bit codes (the default: ``pq_m`` = dim/3
sub-quantisers, 64 bytes a name at 384 dimensions) is searched through FAISS's fast-scan twin
(:func:`pq_searcher`), 15× faster than 8-bit codes of the same size. The two compressed kinds take
``rerank=N``: the top ``N`` rows of the compressed search are scored again exactly (:func:`rerank_exact`).

A ``pq`` index also takes ``refine_m=N``: residual codes of ``N`` bytes a name that bring its scores close to
exact (:mod:`spacy_sapbert.index.refine`).

A search may be restricted to some rows (the names of concepts of some types):
:mod:`spacy_sapbert.index.row_filter`.

An exact (``flat``) search is a matrix multiply, but FAISS takes it row by row below a batch size
of its own choosing (a few hundred queries on FAISS 1.15: 282 mention vectors over MEDIC's 73,860
names, 1.7 s, against 0.14 s through BLAS on two cores), so flat searches go through BLAS whatever
the batch (:func:`blas_distances`).

FAISS is imported when an index is made or read, not when this module is.
"""
from __future__ import annotations

import logging
import math
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np

from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)

INDEX_KINDS = ("flat", "hnsw", "ivfpq", "pq")
FLAT_SEARCHES = ("float32", "bfloat16", "faiss")
"""How a flat index can be searched (:func:`searcher_for`)."""


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


FAST_SCAN_BITS = 4
"""Code width of a PQ index searched through FAISS's fast-scan (SIMD) kernels."""


def _make_pq(dim: int, vectors: np.ndarray, params: Dict[str, int]) -> Tuple[Any, Dict[str, int]]:
    faiss = faiss_module()
    # 4-bit codes of pq_m sub-vectors (dim/3 by default, 3 dimensions each: 64 bytes per name at dim 384), searched
    # by fast-scan: on the default's 180,068 names, 1,500 queries took 0.42 s against 6.5 s for 64 8-bit codes, and
    # found the exact best first more often (87.1% against 84.1%)
    used = {"pq_m": next(m for m in (dim // 3, dim // 4, dim // 2, dim, 1) if m >= 1 and dim % m == 0),
            "pq_bits": FAST_SCAN_BITS, "rerank": 0, "refine_m": 0}
    _merge_params(used, params)
    check_divides(used["pq_m"], dim)
    if used["refine_m"]:
        check_divides(used["refine_m"], dim, "refine_m")
        if used["rerank"]:
            raise InputError("rerank scores from stored vectors, refine_m from residual codes: choose one",
                             field="refine_m")
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
    check_divides(used["pq_m"], dim)
    if n < 256 * 39:
        logger.warning("IVF-PQ over %d names is approximate without benefit; it is meant for millions of names", n)
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, used["nlist"], used["pq_m"], used["pq_bits"], faiss.METRIC_INNER_PRODUCT)
    index.cp.min_points_per_centroid = 1  # small KBs: train anyway, quietly
    index.pq.cp.min_points_per_centroid = 1
    index.train(vectors)
    return index, used


def check_divides(value: int, dim: int, field: str = "pq_m") -> None:
    """A sub-quantiser count (``field``) must split ``dim`` evenly."""
    if dim % value:
        raise InputError(f"{field}={value} must divide the vector dimension {dim}", field=field)


def _merge_params(used: Dict[str, int], params: Dict[str, int]) -> None:
    unknown = set(params) - set(used)
    if unknown:
        raise InputError(f"unknown index parameter(s) {sorted(unknown)}; this kind takes {sorted(used)}",
                         field="params")
    for key, value in params.items():
        smallest = 0 if key in ("rerank", "refine_m") else 1
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


@contextmanager
def blas_distances() -> Iterator[None]:
    """FAISS's exhaustive searches through BLAS for any number of queries, for the time of the
    block: its ``distance_compute_blas_threshold`` (process-wide) is set to 1 and then given back, so
    a user's own FAISS searches elsewhere keep their setting."""
    cvar = faiss_module().cvar
    before = cvar.distance_compute_blas_threshold
    cvar.distance_compute_blas_threshold = 1
    try:
        yield
    finally:
        cvar.distance_compute_blas_threshold = before


def pq_searcher(index: Any) -> Any:
    """What searches a PQ index: for 4-bit codes a fast-scan copy (``IndexPQFastScan``: the codes repacked for
    SIMD, distances from 8-bit quantised lookup tables, within about 0.002 of ``IndexPQ``'s), else the index."""
    faiss = faiss_module()
    pq = faiss.downcast_index(index)
    if isinstance(pq, faiss.IndexPQ) and pq.pq.nbits == FAST_SCAN_BITS and pq.ntotal:
        return faiss.IndexPQFastScan(pq)
    return index


def pq_rows_searcher(index: Any, rows: np.ndarray) -> Any:
    """What searches the codes of ``rows`` of the PQ ``index`` alone (row ``i`` of it is ``rows[i]``), as
    :func:`pq_searcher` searches a whole index. 4-bit codes are packed straight into a fast-scan index,
    a block of 32 codes at a time: a copy of the rows' codes in an ``IndexPQ`` first (which FAISS's
    fast-scan constructor takes) was a transient of twice their size for each type filter."""
    faiss = faiss_module()
    full = faiss.downcast_index(index)
    codes = faiss.rev_swig_ptr(full.codes.data(), full.ntotal * full.code_size).reshape(full.ntotal, full.code_size)
    if full.pq.nbits != FAST_SCAN_BITS or not len(rows):
        allowed = faiss.IndexPQ(full.d, full.pq.M, full.pq.nbits, full.metric_type)
        allowed.pq = full.pq
        allowed.is_trained = True
        allowed.add_sa_codes(np.ascontiguousarray(codes[rows]))
        return pq_searcher(allowed)
    searcher = faiss.IndexPQFastScan(full.d, full.pq.M, full.pq.nbits, full.metric_type)
    searcher.pq = full.pq
    searcher.is_trained = True
    packer = searcher.get_CodePacker()
    per_block, block_bytes = packer.nvec, packer.block_size
    blocks = -(-len(rows) // per_block)
    searcher.ntotal, searcher.ntotal2 = len(rows), blocks * per_block
    searcher.codes.resize(blocks * block_bytes)
    packed = faiss.rev_swig_ptr(searcher.codes.data(), blocks * block_bytes)
    chunk = np.zeros((per_block, full.code_size), dtype=np.uint8)  # the last block is padded with zero codes
    for block in range(blocks):
        part = rows[block * per_block:(block + 1) * per_block]
        chunk[:len(part)] = codes[part]
        chunk[len(part):] = 0
        packer.pack_all(faiss.swig_ptr(chunk), faiss.swig_ptr(packed[block * block_bytes:(block + 1) * block_bytes]))
    return searcher


def searcher_for(index: Any, kind: str, flat_search: str = "faiss") -> Any:
    """What searches an index of ``kind``: :func:`pq_searcher` for ``pq``; for a non-empty ``flat`` one
    with ``flat_search`` ``"float32"`` or ``"bfloat16"``, a
    :class:`~spacy_sapbert.index.matmul_flat.MatmulFlatSearch` (FAISS's answers, faster); else the index."""
    if flat_search not in FLAT_SEARCHES:
        raise InputError(f"flat_search {flat_search!r}: expected one of {', '.join(FLAT_SEARCHES)}",
                         field="flat_search")
    if kind == "pq":
        return pq_searcher(index)
    if kind == "flat" and flat_search != "faiss" and index.ntotal:
        from spacy_sapbert.index.matmul_flat import MatmulFlatSearch
        from spacy_sapbert.util.devices import torch_installed

        if not torch_installed():
            raise InputError(f"flat_search {flat_search!r} multiplies on torch, which is not installed here: use "
                             "'faiss', or pip install 'spacy-sapbert[torch]'", field="flat_search")

        return MatmulFlatSearch(index, bf16=flat_search == "bfloat16")
    return index


def plain_search(index: Any, kind: str, params: Dict[str, int], vectors: np.ndarray,
                 k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Top-``k`` rows of the whole index (an HNSW search explores at least ``k`` candidates)."""
    if kind == "hnsw":
        configure_search(index, kind, params, k)
    if kind == "flat":
        with blas_distances():
            return index.search(vectors, k)
    return index.search(vectors, k)


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


__all__ = ["FAST_SCAN_BITS", "FLAT_SEARCHES", "INDEX_KINDS", "blas_distances", "check_divides", "check_kind",
           "configure_search", "faiss_module", "make_faiss_index", "plain_search", "pq_rows_searcher", "pq_searcher",
           "promote_rows", "rerank_exact", "searcher_for"]
