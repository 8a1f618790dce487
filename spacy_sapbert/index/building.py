"""How a :class:`~spacy_sapbert.index.name_index.NameIndex` is made: from a KB and an encoder (every
name encoded once), from another index's exact vectors (another kind, no name encoded again), or
from a ``pq`` index with residual codes added or dropped. Kept apart from the index's searching so
that each reads on its own; the index's ``build``, ``convert`` and ``with_refine_codes`` call these.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Dict, Optional, Type

import numpy as np

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.files import FORMAT_VERSION
from spacy_sapbert.index.kinds import check_kind, make_faiss_index
from spacy_sapbert.index.refine import train_refine_codes
from spacy_sapbert.index.tables import kb_tables
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

if TYPE_CHECKING:
    from spacy_sapbert.index.name_index import NameIndex

logger = logging.getLogger(__name__)


def build_index(cls: Type["NameIndex"], kb: KnowledgeBase, encoder: Encoder, kind: str, show_progress: bool,
                batch_size: Optional[int], params: Dict[str, int]) -> "NameIndex":
    """Encode every distinct normalised name of ``kb`` once and index the vectors (``NameIndex.build``)."""
    check_kind(kind)
    tables = kb_tables(kb)
    unique_names, concepts, rows = tables
    logger.info("encoding %d names (%d concepts, %d rows) of KB %r with %s", len(unique_names), len(concepts),
                len(rows), kb.name, encoder.source)
    started = time.perf_counter()
    vectors = encoder.encode(unique_names, batch_size=batch_size, show_progress=show_progress)
    encode_seconds = time.perf_counter() - started
    row_vectors = np.ascontiguousarray(vectors[rows[:, 0]])
    faiss_index, params_used = make_faiss_index(kind, encoder.dim, row_vectors, params)
    faiss_index.add(row_vectors)
    refine_codes = train_refine_codes(faiss_index, row_vectors, params_used["refine_m"]) \
        if params_used.get("refine_m") else None
    del row_vectors
    seconds = time.perf_counter() - started
    names_per_second = len(unique_names) / max(encode_seconds, 1e-9)
    logger.info("index built in %.1f s (%.0f names/s encoding)", seconds, names_per_second)
    manifest = {
        "format_version": FORMAT_VERSION, "kind": kind, "params": params_used, "dim": encoder.dim,
        "rows": int(len(rows)), "names": len(unique_names), "concepts": len(concepts),
        "model_fingerprint": encoder.fingerprint, "model": encoder.source, "encoder_settings": encoder.settings,
        "kb_fingerprint": kb.fingerprint(), "kb_name": kb.name,
        "build": {"seconds": round(seconds, 3), "encode_seconds": round(encode_seconds, 3),
                  "names_per_second": round(names_per_second, 1), "device": encoder.device,
                  "dtype": encoder.dtype},
    }
    index = cls._from_tables(faiss_index, tables, manifest)
    index.refine_codes = refine_codes
    if params_used.get("rerank"):
        index.rerank_vectors = vectors.astype(np.float16)
    return index


def convert_index(source: "NameIndex", kind: str, params: Dict[str, Any]) -> "NameIndex":
    """The rows of ``source`` in an index of another ``kind``, from its exact vectors (``NameIndex.convert``)."""
    check_kind(kind)
    vectors = np.ascontiguousarray(source.vectors(), dtype=np.float32)
    started = time.perf_counter()
    faiss_index, params_used = make_faiss_index(kind, source.dim, vectors, params)
    faiss_index.add(vectors)
    manifest = dict(source.manifest, kind=kind, params=params_used)
    manifest["build"] = dict(source.manifest.get("build", {}), converted_from=source.kind,
                             convert_seconds=round(time.perf_counter() - started, 3))
    index = type(source)(faiss_index, list(source.names), list(source.concept_ids), manifest)
    index._tables = source._tables
    if params_used.get("refine_m"):
        index.refine_codes = train_refine_codes(faiss_index, vectors, params_used["refine_m"])
    if params_used.get("rerank"):
        # every row of a name holds the same vector: take each name's first row
        _, first_row = np.unique(source._compact_tables()[2][:, 0], return_index=True)
        index.rerank_vectors = vectors[first_row].astype(np.float16)
    return index


def with_refine_codes(source: "NameIndex", vectors: Optional[np.ndarray], refine_m: int) -> "NameIndex":
    """``source`` (a ``pq`` index), its codes untouched, with residual codes of ``refine_m`` bytes a row
    made from ``vectors``, or with none (``NameIndex.with_refine_codes``)."""
    if source.kind != "pq":
        raise InputError(f"refinement codes are made for a pq index, not a {source.kind} one", field="refine_m")
    if refine_m and vectors is None:
        raise InputError("refinement codes are made from the exact vectors: none given", field="vectors")
    codes = train_refine_codes(source.index, vectors, refine_m) if refine_m else None
    manifest = dict(source.manifest, params=dict(source.manifest.get("params", {}), refine_m=int(refine_m)))
    index = type(source)(source.index, source.names, source.concept_ids, manifest)
    index._tables, index.refine_codes = source._tables, codes
    return index


__all__ = ["build_index", "convert_index", "with_refine_codes"]
