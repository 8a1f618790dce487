"""Refinement codes: a second product quantiser over what a PQ index's codes miss.

The embedded default's 4-bit PQ codes (64 bytes a name) search fast but score a name ~0.10 below
its exact cosine, give or take 0.04, so its near-best candidates are encoded again to be ranked
(:mod:`spacy_sapbert.index.exact_rescore`), and encoding is the slow part: 2.5 s of 10.6 s on 200
BC5CDR dev abstracts. The residual of each vector (exact minus its PQ reconstruction) quantised
with 8-bit codes of ``refine_m`` sub-vectors brings a candidate's score within about 0.013 of the
exact one at 64 bytes more a name. Scored with them, the candidates a mention's best could be
confused with lie within a narrower gap, so far fewer names are encoded: on the 2,572 distinct
gold mention texts of BC5CDR dev and NCBI test, 2,713 candidates lie within 0.03 of the refined
best against 10,374 within 0.1 of the PQ best, and re-scoring them gives the best concept exact
scores give for every text (99.96% before); on 200 BC5CDR dev abstracts re-scoring took 0.7 s
instead of 2.4 s.

The codes are a FAISS ``IndexPQ`` over the residuals, one row per index row, saved beside the
index (``refine.faiss``) by :mod:`spacy_sapbert.index.files`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.index.kinds import check_divides, faiss_module

REFINE_BITS = 8
"""Bits per sub-vector code of the residual quantiser (256 centroids each)."""
REFINE_FILE = "refine.faiss"


def train_refine_codes(index: Any, vectors: np.ndarray, refine_m: int) -> Any:
    """Residual codes of ``vectors`` (the exact vectors, one per row of ``index``, in its order)
    against the reconstructions of the compressed ``index``: an 8-bit ``IndexPQ`` of ``refine_m``
    sub-quantisers, trained on the residuals and holding one code per row."""
    faiss = faiss_module()
    base = faiss.downcast_index(index)
    if not isinstance(base, faiss.IndexPQ):
        raise InputError(f"refinement codes are made for a pq index, not {type(base).__name__}", field="refine_m")
    dim = int(base.d)
    if refine_m < 1:
        raise InputError(f"must be an integer >= 1, got {refine_m!r}", field="refine_m")
    check_divides(refine_m, dim, "refine_m")
    if len(vectors) != base.ntotal:
        raise InputError(f"{len(vectors)} vectors for an index of {base.ntotal} rows", field="vectors")
    residuals = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32) - base.reconstruct_n(0, base.ntotal))
    bits = min(REFINE_BITS, max(1, int(np.log2(max(len(residuals), 2)))))  # a small KB: fewer centroids
    codes = faiss.IndexPQ(dim, refine_m, bits, faiss.METRIC_L2)
    codes.pq.cp.min_points_per_centroid = 1
    codes.train(residuals)
    codes.add(residuals)
    return codes


def refined_vectors(index: Any, codes: Any, rows: np.ndarray) -> np.ndarray:
    """(len(rows), dim) float32: each row's PQ reconstruction plus its decoded residual."""
    faiss = faiss_module()
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if not len(rows):
        return np.zeros((0, int(index.d)), dtype=np.float32)
    base = faiss.downcast_index(index)
    return base.reconstruct_batch(rows) + codes.reconstruct_batch(rows)


def refine_scores(index: Any, codes: Any, queries: np.ndarray, scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The hits' scores (n, k) again, from the refined vectors (rows -1 keep their score). Order is the
    caller's to restore; a query's own name is scored exactly afterwards (``NameIndex.search``)."""
    valid = rows >= 0
    if not valid.any():
        return scores.copy()
    distinct, inverse = np.unique(rows[valid], return_inverse=True)
    table = refined_vectors(index, codes, distinct)
    out = np.array(scores, dtype=np.float32, copy=True)
    picked = np.flatnonzero(valid.ravel())
    query_of = picked // rows.shape[1]
    values = np.einsum("nd,nd->n", np.asarray(queries, dtype=np.float32)[query_of], table[inverse])
    np.put(out, picked, values)  # flat positions of the valid hits
    return out


__all__ = ["REFINE_BITS", "REFINE_FILE", "refine_scores", "refined_vectors", "train_refine_codes"]
