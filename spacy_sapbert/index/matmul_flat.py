"""Exact search of a flat index through one torch matrix multiply and a block top-k, instead of FAISS's.

A flat search is one matrix multiply of the queries with every name vector. FAISS does it in
float32 and then ranks every query's scores through a heap; torch's multiply with the block top-k of
:func:`top_rows` is faster on the same CPU (2,048 queries over 73,860 random clustered unit vectors of
384 dimensions, k 25, on two cores of an Intel Xeon with AVX512-BF16 but no AMX, medians of 5: 0.99 s
against FAISS's 3.29 s, the bf16 path 1.21 s), and reads FAISS's own float32 vectors in place, so it
costs no memory.

**float32** (``bf16=False``): the scores are the float32 ones (the same rows as FAISS but for ties and
the last bits of a different summation order), so nothing is searched again.

**bf16** (``bf16=True``), where the CPU multiplies bf16 faster (AMX, or AVX512-BF16 on AMD:
:func:`~spacy_sapbert.util.devices.cpu_prefers_bf16`): the product in bf16 runs faster still (2,048
queries over MEDIC on two AVX512-BF16 cores of an AMD EPYC: 0.51-0.61 s with the top-k, against
FAISS's 0.76 s), and its scores are within :data:`ERROR_BOUND` of the float32 ones. So the best
``k +`` :data:`SHORTLIST_EXTRA` rows by bf16 score are scored again in float32 from the index's own
vectors and the best ``k`` kept. That is the float32 search's answer whenever the k-th float32
score clears the shortlist's last bf16 score by the bound, since no row left out can then beat it.
The queries where it does not (43 of BC5CDR dev's 2,269 mention texts over MEDIC at the linker's k of
25, none of NCBI test's 400: a crowd of near-equal names) are returned as unsure, and
:meth:`NameIndex.search <spacy_sapbert.index.name_index.NameIndex.search>` searches them again with
FAISS in float32 (:func:`~spacy_sapbert.index.kinds.plain_search`,
:func:`~spacy_sapbert.index.row_filter.filtered_search`). It costs a bf16 copy of the vectors
beside FAISS's float32 ones (half their size again).

The bound: the query and the names are unit vectors; rounding each coordinate to bf16 (8
significant bits, u = 2^-8) moves a vector by at most u of its length, so a product moves by at
most 2u + u^2 (Cauchy-Schwarz); the products are summed in float32 (error below 2^-15 over 384
dimensions) and the sum rounded to bf16 once more (u of a score of about 1): 3u + 2^-12 covers it.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

SHORTLIST_EXTRA = 32
"""Rows beyond ``k`` scored again in float32 per query."""
ERROR_BOUND = 3 * 2.0 ** -8 + 2.0 ** -12
"""How far a bf16 score can be from the float32 one (module docstring)."""
CHUNK = 128
"""Most queries per matrix multiply, fewer for a large index: a chunk's scores are kept under
:data:`CHUNK_BYTES` (in bf16 over MEDIC's 73,860 names 128 queries take 19 MB; over 180,068 names 64 take
23 MB; float32 scores take twice as much)."""
CHUNK_BYTES = 30 * 2 ** 20
"""Under glibc's largest mmap threshold (32 MB), so the next chunk and the next search reuse the scores'
memory instead of faulting in fresh pages (at 256 queries over MEDIC, 10-20 ms of a 60 ms search here)."""
BLOCK = 64
"""Scores per block in :func:`top_rows`."""
QUERY_MULTIPLE = 32
"""A chunk's queries are padded with zero rows to a multiple of this: oneDNN keeps a kernel per shape it
multiplies, and 40 searches of 1 to 128 queries over 73,860 names grew the process by 81 MB with their
exact counts, 39 MB with this."""


class MatmulFlatSearch:
    """Searches a FAISS ``IndexFlatIP`` as :meth:`search` does: in float32, or in bf16 with float32
    re-scoring (``bf16``; a bf16 copy of its vectors)."""

    def __init__(self, index: Any, bf16: bool = True) -> None:
        import faiss
        import torch

        self.index = index
        self.bf16 = bf16
        self.ntotal = int(index.ntotal)
        # FAISS's own float32 storage, read in place (the index is kept, so it stays valid)
        self._vectors = faiss.rev_swig_ptr(index.get_xb(), self.ntotal * index.d).reshape(self.ntotal, index.d)
        self._matrix = torch.from_numpy(self._vectors).to(torch.bfloat16) if bf16 else torch.from_numpy(self._vectors)
        score_bytes = 2 if bf16 else 4
        fits = CHUNK_BYTES // (score_bytes * max(self.ntotal, 1)) // QUERY_MULTIPLE * QUERY_MULTIPLE
        self.chunk = min(CHUNK, max(QUERY_MULTIPLE, fits))

    def search(self, queries: np.ndarray, k: int, mask: Optional[np.ndarray] = None
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-``k`` rows per query (among those ``mask`` allows), best first: scores (n, k) float32, rows
        (n, k) int64, row -1 and score ``-inf`` where there are fewer rows; and the positions of the
        queries whose answer the bf16 bound does not prove, to be searched again in float32 (none in
        float32)."""
        import torch

        queries = np.ascontiguousarray(queries, dtype=np.float32)
        n = len(queries)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        rows = np.full((n, k), -1, dtype=np.int64)
        allowed = self.ntotal if mask is None else int(mask.sum())
        shortlist = min(k + SHORTLIST_EXTRA, allowed) if self.bf16 else min(k, allowed)
        if n == 0 or shortlist == 0:
            return scores, rows, np.zeros(0, dtype=np.int64)
        blocked = None if mask is None else torch.from_numpy(~mask)
        unsure = []
        with torch.inference_mode():
            for start in range(0, n, self.chunk):
                chunk = queries[start:start + self.chunk]
                padded = -(-len(chunk) // QUERY_MULTIPLE) * QUERY_MULTIPLE
                padded_chunk = torch.zeros(padded, chunk.shape[1], dtype=self._matrix.dtype)
                padded_chunk[:len(chunk)] = torch.from_numpy(chunk)
                product = (padded_chunk @ self._matrix.T)[:len(chunk)]
                if blocked is not None:
                    product.masked_fill_(blocked, float("-inf"))
                best, best_rows = top_rows(product, shortlist)
                if not self.bf16:  # the float32 scores: the answer
                    scores[start:start + len(chunk), :shortlist] = best.numpy()
                    rows[start:start + len(chunk), :shortlist] = best_rows.numpy()
                    continue
                candidates = best_rows.numpy()
                exact = np.einsum("nd,nmd->nm", chunk, self._vectors[candidates])
                order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
                kept = np.take_along_axis(exact, order, axis=1)
                scores[start:start + len(chunk), :kept.shape[1]] = kept
                rows[start:start + len(chunk), :kept.shape[1]] = np.take_along_axis(candidates, order, axis=1)
                if shortlist < allowed:  # rows were left out: is the k-th kept one safely above them?
                    last = best[:, -1].float().numpy()
                    unsure.extend((start + np.flatnonzero(kept[:, -1] < last + ERROR_BOUND)).tolist())
        return scores, rows, np.array(unsure, dtype=np.int64)


def top_rows(scores: Any, k: int) -> Tuple[Any, Any]:
    """``torch.topk(scores, k, dim=1)``'s values and columns, found from the maxima of blocks of
    :data:`BLOCK` columns: the ``k`` best of a row lie in the ``k`` blocks with the best maxima (any one
    outside them has ``k`` block maxima at least as high), so only those blocks' columns are ranked. On
    bf16 scores of 282 queries over 73,860 names: 20 ms against 30 ms. Where scores tie, the columns may be
    other tied ones than ``topk``'s; the values are the same. In a row with fewer than ``k`` finite scores a
    ``-inf`` may stand for no column at all: its column is then -1."""
    import torch

    rows, columns = scores.shape
    whole = columns // BLOCK
    if k * BLOCK * 4 > columns:  # few blocks: no gain
        top = torch.topk(scores, k, dim=1)
        return top.values, top.indices
    maxima = scores[:, :whole * BLOCK].view(rows, whole, BLOCK).amax(dim=2)
    if whole * BLOCK < columns:  # the last, shorter block
        maxima = torch.cat([maxima, scores[:, whole * BLOCK:].amax(dim=1, keepdim=True)], dim=1)
    best_blocks = torch.topk(maxima, k, dim=1).indices
    inside = (best_blocks[:, :, None] * BLOCK + torch.arange(BLOCK)).reshape(rows, -1)
    valid = inside < columns  # the last block's columns past the end
    inside = torch.where(valid, inside, torch.zeros_like(inside))
    values = torch.gather(scores, 1, inside).masked_fill_(~valid, float("-inf"))
    top = torch.topk(values, k, dim=1)
    columns = torch.gather(inside, 1, top.indices)
    return top.values, torch.where(torch.gather(valid, 1, top.indices), columns, -1)


__all__ = ["BLOCK", "CHUNK", "CHUNK_BYTES", "ERROR_BOUND", "MatmulFlatSearch", "QUERY_MULTIPLE", "SHORTLIST_EXTRA",
           "top_rows"]
