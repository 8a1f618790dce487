"""NameIndex: every normalised KB name, encoded once, in a FAISS inner-product index.

The kinds of index (``flat``, ``hnsw``, ``ivfpq``, ``pq``) and what each is for are in
:mod:`spacy_sapbert.index.kinds`; how one is built or converted in :mod:`spacy_sapbert.index.building`; the
files of a saved index in :mod:`spacy_sapbert.index.files`; the tables that map its rows to names and
concepts in :mod:`spacy_sapbert.index.tables`.

A saved index is tied to the model and the KB it was built from: ``manifest.json``
records both fingerprints and :meth:`NameIndex.load` refuses a different encoder or KB,
because a stale index does not fail, it just links wrongly.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.matmul_flat import MatmulFlatSearch
from spacy_sapbert.index.building import build_index, convert_index, with_refine_codes
from spacy_sapbert.index.files import (FORMAT_VERSION, INDEX_FILE, MANIFEST, RERANK_FILE, IndexFiles, check_save_target,
                          is_index_folder, read_index_folder, write_index_folder)
from spacy_sapbert.index.kinds import (INDEX_KINDS, configure_search, make_faiss_index, plain_search, promote_rows,
                                      rerank_exact, searcher_for)
from spacy_sapbert.index.refine import refine_scores
from spacy_sapbert.index.row_filter import RowFilter, filtered_search
from spacy_sapbert.index.tables import NameRows, RowValues, Tables, tables_of
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.util.devices import cpu_prefers_bf16, torch_installed

PathLike = Union[str, Path]


class IndexMismatchError(InputError):
    """A saved index was built with another model or KB than the one it is loaded with."""


class NameIndex:
    """Row ``i`` of the FAISS index is the pair (``names[i]``, ``concept_ids[i]``).

    A name shared by several concepts is encoded once and gets one row per concept, so a
    search returns every concept that has the name.
    """

    def __init__(self, index: Any, names: Sequence[str], concept_ids: Sequence[str], manifest: Dict[str, Any]) -> None:
        if index.ntotal != len(names) or len(names) != len(concept_ids):
            raise ValueError(f"index has {index.ntotal} rows but {len(names)} names / {len(concept_ids)} concept IDs")
        self.index = index
        self.names = names
        self.concept_ids = concept_ids
        self.manifest = manifest
        self._tables: Optional[Tables] = None
        self._rows_of_name: Optional[NameRows] = None
        self.rerank_vectors: Optional[np.ndarray] = None
        """float16 (names, dim) for exact re-ranking (``params["rerank"] > 0``), memory-mapped once saved."""
        self.refine_codes: Optional[Any] = None
        """A ``pq`` index's residual codes (``params["refine_m"] > 0``): :mod:`spacy_sapbert.index.refine`."""
        self._made_searcher: Optional[Tuple[Any, Any]] = None
        """((the index, its rows, :attr:`flat_search`), what searches it:
        :func:`~spacy_sapbert.index.kinds.searcher_for`), made on first use."""
        self.flat_search: Optional[str] = None
        """How a ``flat`` index is searched (:mod:`~spacy_sapbert.index.matmul_flat`; the same answers):
        ``"float32"``, a torch matrix multiply over FAISS's vectors; ``"bfloat16"``, one in bf16 with
        float32 re-scoring (a bf16 copy of the vectors beside them); ``"faiss"``, FAISS's own search;
        ``None``: bf16 where it beats float32 on this CPU
        (:func:`~spacy_sapbert.util.devices.cpu_prefers_bf16`), else float32."""
        configure_search(self.index, str(manifest.get("kind", "")), manifest.get("params", {}))

    @classmethod
    def _from_tables(cls, faiss_index: Any, tables: Tables, manifest: Dict[str, Any]) -> "NameIndex":
        unique_names, concepts, rows = tables
        index = cls(faiss_index, RowValues(unique_names, rows[:, 0]), RowValues(concepts, rows[:, 1]), manifest)
        index._tables = tables
        return index

    # -- building -----------------------------------------------------------------
    @classmethod
    def build(
        cls,
        kb: KnowledgeBase,
        encoder: Encoder,
        kind: str = "flat",
        show_progress: bool = True,
        batch_size: Optional[int] = None,
        **params: int,
    ) -> "NameIndex":
        """Encode every distinct normalised name of ``kb`` once and index the vectors.

        ``batch_size`` is names per encoder forward pass (the encoder's own by default).
        ``params`` tune the approximate kinds: ``hnsw_m``, ``ef_construction``,
        ``ef_search`` (HNSW); ``nlist``, ``pq_m``, ``pq_bits``, ``nprobe`` (IVF-PQ);
        ``pq_m``, ``pq_bits``, ``refine_m`` (PQ); ``rerank`` (IVF-PQ, PQ); unset ones are
        derived from the number of names.
        """
        return build_index(cls, kb, encoder, kind, show_progress, batch_size, params)

    def vectors(self) -> np.ndarray:
        """The stored vectors, one per row: exact for flat and HNSW; float16-rounded for a
        compressed index with ``rerank`` (other compressed indexes keep codes only)."""
        if self.rerank_vectors is not None:
            return np.asarray(self.rerank_vectors[self._compact_tables()[2][:, 0]], dtype=np.float32)
        if self.kind not in ("flat", "hnsw"):
            raise InputError(f"a {self.kind} index keeps compressed codes, not its vectors; convert from a flat index",
                             field="kind")
        return self.index.reconstruct_n(0, self.index.ntotal)

    def convert(self, kind: str, **params: int) -> "NameIndex":
        """The same rows in an index of another ``kind``, from this index's exact vectors
        (no name is encoded again): e.g. a flat index → the compact ``pq`` one that ships."""
        return convert_index(self, kind, params)

    def with_refine_codes(self, vectors: Optional[np.ndarray], refine_m: int) -> "NameIndex":
        """This ``pq`` index, its codes untouched, with residual codes of ``refine_m`` bytes a row made
        from ``vectors`` (the exact ones, one per row: a flat index's :meth:`vectors`), or with none
        (``refine_m`` 0): a package whose KB and codes stay the same changes them without its index
        file changing."""
        return with_refine_codes(self, vectors, refine_m)

    # -- searching ----------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @property
    def kind(self) -> str:
        return str(self.manifest["kind"])

    @property
    def exact_scores(self) -> bool:
        """Whether :meth:`search` gives exact cosines (flat, HNSW, or re-ranked from stored vectors)."""
        return self.kind in ("flat", "hnsw") or self.rerank_vectors is not None

    @property
    def model_fingerprint(self) -> str:
        return str(self.manifest["model_fingerprint"])

    @property
    def kb_fingerprint(self) -> str:
        return str(self.manifest["kb_fingerprint"])

    def search(self, vectors: np.ndarray, k: int, rows: Optional[RowFilter] = None,
               texts: Optional[Sequence[str]] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows per query: scores (n, k) float32 best first, rows (n, k) int64.

        ``rows`` restricts the search to some rows (:meth:`row_mask`): the best ``k`` of
        those, however far down the unrestricted ranking they are (see
        :mod:`~spacy_sapbert.index.kinds`). Missing hits (``k`` larger than the index or the
        allowed rows) have row -1 and score ``-inf``.

        ``texts``, the normalised strings the query vectors encode: the rows of a name equal to
        the query's text are scored exactly and ranked first. Their vector is the query's own,
        so the cosine is ``q·q``, which a compressed index's codes only approximate (a PQ code
        scores an exact match ~0.87, and a near name of another concept can beat it). Equal
        scores (the rows of a name several concepts share) come last row first in every kind,
        as FAISS's exact search returns them, so a compressed index breaks those ties alike.
        """
        if k < 1:
            raise InputError(f"k must be positive, got {k}", field="k")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise InputError(f"query vectors must have shape (n, {self.dim}), got {vectors.shape}")
        if rows is not None and len(rows) != len(self):
            raise InputError(f"the row filter covers {len(rows)} rows but the index has {len(self)}", field="rows")
        if len(vectors) == 0:
            return np.zeros((0, k), dtype=np.float32), np.zeros((0, k), dtype=np.int64)
        params = self.manifest.get("params", {})
        rerank = int(params.get("rerank", 0)) if self.rerank_vectors is not None else 0
        depth = max(k, rerank)
        # a filtered search of any kind but flat goes through the row filter's own structures: the whole
        # index's searcher (for PQ a fast-scan copy of every code, 12 MB for the default) is not made for it
        searched = self._searcher() if rows is None or self.kind == "flat" else self.index
        if isinstance(searched, MatmulFlatSearch):  # the queries its bf16 bound leaves unsure: FAISS's search
            scores, found, unsure = searched.search(vectors, depth, None if rows is None else rows.mask)
            if len(unsure):
                scores[unsure], found[unsure] = self._faiss_search(self.index, vectors[unsure], depth, rows)
        else:
            scores, found = self._faiss_search(searched, vectors, depth, rows)
        scores = scores.astype(np.float32, copy=False)
        found = found.astype(np.int64, copy=False)
        if rerank:
            name_of_row = self._compact_tables()[2][:, 0]
            scores, found = rerank_exact(vectors, found, lambda r: self.rerank_vectors[name_of_row[r]], k)
        elif self.refine_codes is not None:
            scores = refine_scores(self.index, self.refine_codes, vectors, scores, found)  # ordered below
        if texts is not None:
            scores, found = self._score_own_names(vectors, texts, scores, found, k, rows)
        scores[found < 0] = -np.inf
        # rows of one name score the same (one vector): last row first, as FAISS's exact search
        # returns such ties, so that every kind (and a promoted name) breaks them alike
        order = np.lexsort((-found, -scores), axis=-1)
        return np.take_along_axis(scores, order, axis=1), np.take_along_axis(found, order, axis=1)

    def _faiss_search(self, searched: Any, vectors: np.ndarray, k: int, rows: Optional[RowFilter]
                      ) -> Tuple[np.ndarray, np.ndarray]:
        params = self.manifest.get("params", {})
        if rows is None:
            return plain_search(searched, self.kind, params, vectors, k)
        return filtered_search(self.index, self.kind, params, vectors, k, rows)

    def _searcher(self) -> Any:
        """What searches the index (made again when the index, its size or :attr:`flat_search` changed)."""
        key = (self.index, self.index.ntotal, self.flat_search)
        made = self._made_searcher
        if made is None or made[0][0] is not self.index or made[0][1:] != key[1:]:
            self._made_searcher = (key, searcher_for(self.index, self.kind,
                                                     flat_search=self.flat_search or self._default_flat_search()))
        return self._made_searcher[1]

    def _default_flat_search(self) -> str:
        """How a flat index is searched unless :attr:`flat_search` says: a bf16 or float32 matrix multiply on torch
        (bf16 where the CPU prefers it), FAISS's own search where torch is not installed (the base install)."""
        if self.kind != "flat" or not torch_installed():
            return "faiss"
        return "bfloat16" if cpu_prefers_bf16() else "float32"

    def _score_own_names(self, vectors: np.ndarray, texts: Sequence[str], scores: np.ndarray, found: np.ndarray,
                         k: int, rows: Optional[RowFilter]) -> Tuple[np.ndarray, np.ndarray]:
        if len(texts) != len(vectors):
            raise InputError(f"{len(texts)} texts for {len(vectors)} query vectors", field="texts")
        own = self._name_rows().rows(texts)
        if rows is not None:
            own = [None if r is None else r[rows.mask[r]] for r in own]
        exact = np.einsum("nd,nd->n", vectors, vectors)
        return promote_rows(scores, found, own, exact, k)

    def _name_rows(self) -> NameRows:
        """The rows of each normalised name, built once (from the compact tables, no KB scan)."""
        if self._rows_of_name is None:
            names, _, table = self._compact_tables()
            self._rows_of_name = NameRows(names, table[:, 0])
        return self._rows_of_name

    def stored_name_vectors(self, texts: Sequence[str]) -> Tuple[List[int], np.ndarray]:
        """Of ``texts`` (normalised), the positions of those that are names of this index and their
        vectors as stored, when the index keeps them exactly (flat, HNSW; else none): the vector a
        name was indexed with is its encoding, so a mention that is a KB name need not be encoded
        again (the same numbers but for the last bits a different batch gives)."""
        if self.kind not in ("flat", "hnsw") or not texts:
            return [], np.zeros((0, self.dim), dtype=np.float32)
        own = self._name_rows().rows(texts)
        positions = [i for i, rows in enumerate(own) if rows is not None and len(rows)]
        rows = np.array([own[i][0] for i in positions], dtype=np.int64)
        vectors = self.index.reconstruct_batch(rows) if len(rows) else np.zeros((0, self.dim), dtype=np.float32)
        return positions, np.asarray(vectors, dtype=np.float32)

    def concepts_named(self, name: str) -> List[str]:
        """The concepts that have ``name`` (normalised, as the index stores names) as one of theirs."""
        rows = self._name_rows().rows([name])[0]
        return [] if rows is None else [self.concept_ids[row] for row in rows]

    def row_mask(self, allowed: Callable[[str], bool]) -> np.ndarray:
        """One bool per row: whether ``allowed(concept_id)`` holds for the row's concept (asked
        once per concept, not per name), for a :class:`RowFilter`."""
        _, concepts, rows = self._compact_tables()
        keep = np.fromiter((bool(allowed(cid)) for cid in concepts), dtype=bool, count=len(concepts))
        return keep[rows[:, 1]]

    # -- checks -------------------------------------------------------------------
    def check(self, encoder: Optional[Encoder] = None, kb: Optional[KnowledgeBase] = None,
              where: Optional[PathLike] = None) -> None:
        """Raise :class:`IndexMismatchError` unless ``encoder``/``kb`` are the ones the index was built with."""
        where = where if where is not None else "<index>"
        if encoder is not None:
            if encoder.dim != self.dim:
                raise IndexMismatchError(f"index vectors have {self.dim} dimensions but the encoder {encoder.source!r} "
                                         f"makes {encoder.dim}; rebuild the index with this model", where, field="dim")
            if encoder.fingerprint != self.model_fingerprint:
                raise IndexMismatchError(
                    f"index was built with model {self.manifest.get('model')!r} (fingerprint {self.model_fingerprint}, "
                    f"settings {self.manifest.get('encoder_settings')}) but the encoder given is {encoder.source!r} "
                    f"(fingerprint {encoder.fingerprint}, settings {encoder.settings}); rebuild the index "
                    "(sapbert index build) with this model", where, field="model_fingerprint")
        if kb is not None and kb.fingerprint() != self.kb_fingerprint:
            raise IndexMismatchError(
                f"index was built from KB {self.manifest.get('kb_name')!r} (fingerprint {self.kb_fingerprint}) but the "
                f"KB given is {kb.name!r} (fingerprint {kb.fingerprint()}); rebuild the index (sapbert index build) "
                "with this KB", where, field="kb_fingerprint")

    # -- files --------------------------------------------------------------------
    def save(self, folder: PathLike) -> Path:
        """Write the index to ``folder``, replacing an index saved there before; never a
        folder that holds anything else (see :func:`~spacy_sapbert.index.files.write_index_folder`:
        a save killed at any moment leaves the old index or the new one)."""
        check_save_target(folder)
        files = IndexFiles(self.index, *self._compact_tables(), manifest=self.manifest,
                           rerank_vectors=self.rerank_vectors, refine_codes=self.refine_codes)
        return write_index_folder(folder, files)

    def _compact_tables(self) -> Tables:
        if self._tables is None:
            self._tables = tables_of(self.names, self.concept_ids)
        return self._tables

    @classmethod
    def load(cls, folder: PathLike, encoder: Optional[Encoder] = None,
             kb: Optional[KnowledgeBase] = None) -> "NameIndex":
        """Open a saved index; with ``encoder``/``kb`` given, check that they are the ones it was built with."""
        files = read_index_folder(folder)
        index = cls._from_tables(files.faiss_index, (files.unique_names, files.concepts, files.rows), files.manifest)
        index.rerank_vectors, index.refine_codes = files.rerank_vectors, files.refine_codes
        index.check(encoder, kb, where=Path(folder) / MANIFEST)
        return index

    def __repr__(self) -> str:
        return (f"NameIndex(kind={self.kind!r}, rows={len(self)}, dim={self.dim}, "
                f"kb={self.manifest.get('kb_name')!r}, model={self.manifest.get('model')!r})")


__all__ = ["NameIndex", "IndexMismatchError", "RowFilter",
           "INDEX_KINDS", "FORMAT_VERSION", "MANIFEST", "INDEX_FILE", "RERANK_FILE",
           "is_index_folder", "check_save_target", "make_faiss_index", "rerank_exact"]
