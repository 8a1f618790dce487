"""NameIndex: every normalised KB name, encoded once, in a FAISS inner-product index.

Vectors are unit length, so inner product is cosine similarity. ``flat`` is exact and
is the default (MEDIC's ~70k names search in microseconds); ``hnsw`` and ``ivfpq`` are
for KBs with millions of names, where a flat index is slow (HNSW) or too big (IVF-PQ;
its scores are approximate). ``pq`` (product quantisation, searched exhaustively) keeps
a KB of ~10^5 names in a few MB, which is how the embedded default ships its index;
its scores are approximate too. The two compressed kinds take ``rerank=N``: the top ``N``
rows of the compressed search are scored again exactly against float16 copies of the name
vectors, kept in ``vectors.npy`` and memory-mapped from disk, so the RAM they cost is the
pages the candidates touch, not 768 bytes per name.

A saved index is tied to the model and the KB it was built from: ``manifest.json``
records both fingerprints and :meth:`NameIndex.load` refuses a different encoder or KB,
because a stale index does not fail, it just links wrongly.

Files of a saved index (no pickle anywhere):

    index.faiss     the FAISS index (faiss.write_index)
    names.json.gz   distinct normalised names (gzip JSON; plain names.json is read too)
    concepts.json.gz  distinct concept IDs
    rows.npy        int32 (rows, 2): FAISS row → (name number, concept number)
    vectors.npy     float16 (names, dim), for ``rerank`` only (read memory-mapped)
    manifest.json   kind, parameters, dimensions, fingerprints, encoder settings
"""
from __future__ import annotations

import gzip
import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from .atomic import atomic_dir, check_replaceable, remove_stale_temps
from .encoder import Encoder
from .errors import InputError
from .kb import KnowledgeBase

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
FORMAT_VERSION = 1
INDEX_KINDS = ("flat", "hnsw", "ivfpq", "pq")
MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
RERANK_FILE = "vectors.npy"


class IndexMismatchError(InputError):
    """A saved index was built with another model or KB than the one it is loaded with."""


def _faiss() -> Any:
    import faiss

    return faiss


class NameIndex:
    """Row ``i`` of the FAISS index is the pair (``names[i]``, ``concept_ids[i]``).

    A name shared by several concepts is encoded once and gets one row per concept, so a
    search returns every concept that has the name.
    """

    def __init__(self, index: Any, names: List[str], concept_ids: List[str], manifest: Dict[str, Any]) -> None:
        if index.ntotal != len(names) or len(names) != len(concept_ids):
            raise ValueError(f"index has {index.ntotal} rows but {len(names)} names / {len(concept_ids)} concept IDs")
        self.index = index
        self.names = names
        self.concept_ids = concept_ids
        self.manifest = manifest
        self._tables: Optional[Tuple[List[str], List[str], np.ndarray]] = None
        self.rerank_vectors: Optional[np.ndarray] = None
        """float16 (names, dim) for exact re-ranking (``params["rerank"] > 0``), memory-mapped once saved."""
        self._configure_search()

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

        ``params`` tune the approximate kinds: ``hnsw_m``, ``ef_construction``,
        ``ef_search`` (HNSW); ``nlist``, ``pq_m``, ``pq_bits``, ``nprobe`` (IVF-PQ);
        ``pq_m``, ``pq_bits`` (PQ);
        unset ones are derived from the number of names.
        """
        if kind not in INDEX_KINDS:
            raise InputError(f"unknown index kind {kind!r}: use one of {INDEX_KINDS}", field="kind")
        pairs = list(kb.name_concept_pairs())
        pairs = [(name, cid) for name, cid in pairs if name]
        if not pairs:
            raise InputError(f"knowledge base {kb.name!r} has no names to index ({len(kb)} concepts; every name is "
                             "empty after normalisation)" if len(kb) else
                             f"knowledge base {kb.name!r} is empty: no concepts, no names to index")
        unique_names = list(dict.fromkeys(name for name, _ in pairs))
        name_number = {name: i for i, name in enumerate(unique_names)}
        concepts = list(dict.fromkeys(cid for _, cid in pairs))
        concept_number = {cid: i for i, cid in enumerate(concepts)}
        rows = np.array([(name_number[n], concept_number[c]) for n, c in pairs], dtype=np.int32)

        logger.info("encoding %d names (%d concepts, %d rows) of KB %r with %s", len(unique_names), len(concepts),
                    len(rows), kb.name, encoder.source)
        started = time.perf_counter()
        vectors = encoder.encode(unique_names, batch_size=batch_size, show_progress=show_progress)
        encode_seconds = time.perf_counter() - started
        row_vectors = np.ascontiguousarray(vectors[rows[:, 0]])
        faiss_index, params_used = _make_faiss_index(kind, encoder.dim, row_vectors, params)
        faiss_index.add(row_vectors)
        del row_vectors
        seconds = time.perf_counter() - started
        logger.info("index built in %.1f s (%.0f names/s encoding)", seconds, len(unique_names) / max(encode_seconds, 1e-9))

        manifest = {
            "format_version": FORMAT_VERSION,
            "kind": kind,
            "params": params_used,
            "dim": encoder.dim,
            "rows": int(len(rows)),
            "names": len(unique_names),
            "concepts": len(concepts),
            "model_fingerprint": encoder.fingerprint,
            "model": encoder.source,
            "encoder_settings": encoder.settings,
            "kb_fingerprint": kb.fingerprint(),
            "kb_name": kb.name,
            "build": {"seconds": round(seconds, 3), "encode_seconds": round(encode_seconds, 3),
                      "names_per_second": round(len(unique_names) / max(encode_seconds, 1e-9), 1),
                      "device": encoder.device, "dtype": encoder.dtype},
        }
        names = [unique_names[i] for i in rows[:, 0]]
        concept_ids = [concepts[i] for i in rows[:, 1]]
        index = cls(faiss_index, names, concept_ids, manifest)
        index._tables = (unique_names, concepts, rows)
        if params_used.get("rerank"):
            index.rerank_vectors = vectors.astype(np.float16)
        return index

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
        if kind not in INDEX_KINDS:
            raise InputError(f"unknown index kind {kind!r}: use one of {INDEX_KINDS}", field="kind")
        vectors = np.ascontiguousarray(self.vectors(), dtype=np.float32)
        started = time.perf_counter()
        faiss_index, params_used = _make_faiss_index(kind, self.dim, vectors, params)
        faiss_index.add(vectors)
        manifest = dict(self.manifest, kind=kind, params=params_used)
        manifest["build"] = dict(self.manifest.get("build", {}), converted_from=self.kind,
                                 convert_seconds=round(time.perf_counter() - started, 3))
        index = type(self)(faiss_index, list(self.names), list(self.concept_ids), manifest)
        index._tables = self._tables
        if params_used.get("rerank"):
            # every row of a name holds the same vector: take each name's first row
            _, first_row = np.unique(self._compact_tables()[2][:, 0], return_index=True)
            index.rerank_vectors = vectors[first_row].astype(np.float16)
        return index

    def _configure_search(self) -> None:
        faiss = _faiss()
        params = self.manifest.get("params", {})
        if self.manifest.get("kind") == "hnsw":
            faiss.downcast_index(self.index).hnsw.efSearch = int(params.get("ef_search", 128))
        elif self.manifest.get("kind") == "ivfpq":
            faiss.extract_index_ivf(self.index).nprobe = int(params.get("nprobe", 16))

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
    def model_fingerprint(self) -> str:
        return str(self.manifest["model_fingerprint"])

    @property
    def kb_fingerprint(self) -> str:
        return str(self.manifest["kb_fingerprint"])

    def search(self, vectors: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows per query: scores (n, k) float32 best first, rows (n, k) int64.

        Missing hits (``k`` larger than the index) have row -1 and score ``-inf``.
        """
        if k < 1:
            raise InputError(f"k must be positive, got {k}", field="k")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise InputError(f"query vectors must have shape (n, {self.dim}), got {vectors.shape}")
        if len(vectors) == 0:
            return np.zeros((0, k), dtype=np.float32), np.zeros((0, k), dtype=np.int64)
        if self.kind == "hnsw":
            hnsw = _faiss().downcast_index(self.index).hnsw
            hnsw.efSearch = max(int(self.manifest["params"].get("ef_search", 128)), k)
        rerank = int(self.manifest.get("params", {}).get("rerank", 0)) if self.rerank_vectors is not None else 0
        scores, rows = self.index.search(vectors, max(k, rerank))
        scores = scores.astype(np.float32, copy=False)
        rows = rows.astype(np.int64, copy=False)
        if rerank:
            name_of_row = self._compact_tables()[2][:, 0]
            scores, rows = rerank_exact(vectors, rows, lambda r: self.rerank_vectors[name_of_row[r]], k)
        scores[rows < 0] = -np.inf
        return scores, rows

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
        """Write the index to ``folder``, replacing an index saved there before.

        The files are written to a temporary sibling folder and swapped in whole
        (:func:`~spacy_sapbert.atomic.atomic_dir`), so a save killed at any moment leaves the
        previous index or the new one, never a mix of both (which would load and link
        wrongly); it also makes saving an index back over the folder it is memory-mapped
        from safe. A folder holding anything but a saved index is refused, not replaced:
        see :func:`check_save_target`. Temporary folders left by killed saves are removed.
        A symbolic link to a folder stays a link: the folder it points to is replaced.
        """
        folder = Path(folder)
        check_save_target(folder)
        real = folder.resolve()  # a link's target; "." or "idx/.." by its real name
        if real.parent.is_dir():
            removed = remove_stale_temps(real.parent, real.name)
            if removed:
                logger.info("removed %d temporary folder(s) left beside %s by an interrupted save", removed, real)
        unique_names, concepts, rows = self._compact_tables()
        with atomic_dir(real) as tmp:
            _faiss().write_index(self.index, str(tmp / INDEX_FILE))
            _write_json_gz(tmp / "names.json.gz", unique_names)
            _write_json_gz(tmp / "concepts.json.gz", concepts)
            np.save(tmp / "rows.npy", rows, allow_pickle=False)
            if self.rerank_vectors is not None:
                np.save(tmp / RERANK_FILE, np.asarray(self.rerank_vectors, dtype=np.float16), allow_pickle=False)
            (tmp / MANIFEST).write_text(json.dumps(self.manifest, indent=2, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
        return folder

    def _compact_tables(self) -> Tuple[List[str], List[str], np.ndarray]:
        if self._tables is not None:
            return self._tables
        unique_names = list(dict.fromkeys(self.names))
        concepts = list(dict.fromkeys(self.concept_ids))
        name_number = {n: i for i, n in enumerate(unique_names)}
        concept_number = {c: i for i, c in enumerate(concepts)}
        rows = np.array([(name_number[n], concept_number[c]) for n, c in zip(self.names, self.concept_ids)],
                        dtype=np.int32).reshape(-1, 2)
        self._tables = (unique_names, concepts, rows)
        return self._tables

    @classmethod
    def load(cls, folder: PathLike, encoder: Optional[Encoder] = None,
             kb: Optional[KnowledgeBase] = None) -> "NameIndex":
        """Open a saved index; with ``encoder``/``kb`` given, check that they are the ones it was built with."""
        folder = Path(folder)
        manifest_path = folder / MANIFEST
        if not folder.is_dir():
            raise InputError("index folder not found", folder)
        if not manifest_path.is_file():
            raise InputError(f"not a saved NameIndex: no {MANIFEST}", folder)
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"invalid JSON ({err})", manifest_path) from err
        if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
            raise InputError(f"unsupported index format {manifest.get('format_version') if isinstance(manifest, dict) else None!r}"
                             f" (this version reads {FORMAT_VERSION})", manifest_path, field="format_version")
        for key in ("kind", "dim", "rows", "model_fingerprint", "kb_fingerprint"):
            if key not in manifest:
                raise InputError("missing", manifest_path, field=key)
        try:
            faiss_index = _faiss().read_index(str(folder / INDEX_FILE))
            unique_names = _read_json_table(folder, "names")
            concepts = _read_json_table(folder, "concepts")
            rows = np.load(folder / "rows.npy", allow_pickle=False)
        except (OSError, RuntimeError, ValueError, EOFError) as err:
            raise InputError(f"cannot read the index files ({err})", folder) from err
        if rows.ndim != 2 or rows.shape[1] != 2 or len(rows) != manifest["rows"] or faiss_index.ntotal != len(rows):
            raise InputError(f"index files disagree: manifest says {manifest['rows']} rows, index.faiss has "
                             f"{faiss_index.ntotal}, rows.npy has shape {rows.shape}", folder)
        if len(rows) and (rows[:, 0].max() >= len(unique_names) or rows[:, 1].max() >= len(concepts) or rows.min() < 0):
            raise InputError("rows.npy points outside names.json/concepts.json", folder)
        names = [unique_names[i] for i in rows[:, 0]]
        concept_ids = [concepts[i] for i in rows[:, 1]]
        index = cls(faiss_index, names, concept_ids, manifest)
        index._tables = (unique_names, concepts, rows.astype(np.int32, copy=False))
        if manifest.get("params", {}).get("rerank"):
            try:
                stored = np.load(folder / RERANK_FILE, mmap_mode="r", allow_pickle=False)
            except (OSError, ValueError) as err:
                raise InputError(f"the index re-ranks but its vectors cannot be read ({err})",
                                 folder / RERANK_FILE) from err
            if stored.shape != (len(unique_names), manifest["dim"]) or stored.dtype != np.float16:
                raise InputError(f"expected float16 vectors of shape ({len(unique_names)}, {manifest['dim']}), "
                                 f"found {stored.dtype} {stored.shape}", folder / RERANK_FILE)
            index.rerank_vectors = stored
        index.check(encoder, kb, where=manifest_path)
        return index

    def __repr__(self) -> str:
        return (f"NameIndex(kind={self.kind!r}, rows={len(self)}, dim={self.dim}, "
                f"kb={self.manifest.get('kb_name')!r}, model={self.manifest.get('model')!r})")


def is_index_folder(folder: PathLike) -> bool:
    """Whether ``folder`` holds a saved NameIndex: a ``manifest.json`` that is a JSON object
    with the keys every index manifest has (any format version)."""
    try:
        manifest = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and all(key in manifest for key in ("format_version", "kind",
                                                                           "model_fingerprint"))


def check_save_target(folder: PathLike) -> None:
    """Raise :class:`InputError` unless :meth:`NameIndex.save` may write ``folder``: it is
    missing, empty or a saved index. Replacing anything else would delete files that are
    not ours (there is no overwrite flag); callers that build for minutes can check first."""
    check_replaceable(folder, is_index_folder, f"a saved NameIndex (no {MANIFEST})",
                      "Choose a new or empty folder, or delete this one yourself", option="index folder")


def _make_faiss_index(kind: str, dim: int, vectors: np.ndarray, params: Dict[str, int]) -> Tuple[Any, Dict[str, int]]:
    """An empty FAISS index of ``kind`` (trained if it needs training) and the parameters used."""
    faiss = _faiss()
    n = len(vectors)
    if kind == "flat":
        if params:
            raise InputError(f"a flat index takes no parameters, got {sorted(params)}", field="params")
        return faiss.IndexFlatIP(dim), {}
    if kind == "pq":
        # 8-bit codes of pq_m sub-vectors (dim/4 dimensions by default: 96 bytes per name at dim 384)
        used = {"pq_m": next(m for m in (dim // 4, dim // 2, dim, 1) if m >= 1 and dim % m == 0), "pq_bits": 8,
                "rerank": 0}
        _merge_params(used, params)
        if dim % used["pq_m"]:
            raise InputError(f"pq_m={used['pq_m']} must divide the vector dimension {dim}", field="pq_m")
        used["pq_bits"] = min(used["pq_bits"], max(1, int(math.log2(max(n, 2)))))  # small KBs: fewer centroids
        index = faiss.IndexPQ(dim, used["pq_m"], used["pq_bits"], faiss.METRIC_INNER_PRODUCT)
        index.pq.cp.min_points_per_centroid = 1
        index.train(vectors)
        return index, used
    if kind == "hnsw":
        used = {"hnsw_m": 32, "ef_construction": 80, "ef_search": 128}
        _merge_params(used, params)
        index = faiss.IndexHNSWFlat(dim, used["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = used["ef_construction"]
        return index, used
    # IVF-PQ: nlist ~ 4·sqrt(n) lists with >= 39 training points each, sub-quantisers of
    # 8 dimensions, 8-bit codes once there are enough points to train 256 centroids.
    nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))
    pq_m = next((m for m in (dim // 8, dim // 4, dim // 2, 1) if m >= 1 and dim % m == 0), 1)
    pq_bits = 8 if n >= 256 * 39 else max(1, min(8, int(math.log2(max(n, 2) / 39)) if n >= 78 else 1))
    used = {"nlist": nlist, "pq_m": pq_m, "pq_bits": pq_bits, "nprobe": min(nlist, 16), "rerank": 0}
    _merge_params(used, params)
    if dim % used["pq_m"]:
        raise InputError(f"pq_m={used['pq_m']} must divide the vector dimension {dim}", field="pq_m")
    if n < 256 * 39:
        logger.warning("IVF-PQ over %d names is approximate without benefit; it is meant for millions of names", n)
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFPQ(quantizer, dim, used["nlist"], used["pq_m"], used["pq_bits"], faiss.METRIC_INNER_PRODUCT)
    index.cp.min_points_per_centroid = 1  # small KBs: train anyway, quietly
    index.pq.cp.min_points_per_centroid = 1
    index.train(vectors)
    return index, used


def _write_json_gz(path: Path, value: Any) -> None:
    # mtime=0: the same tables give the same bytes (a shipped index does not change in git on a rebuild)
    with gzip.GzipFile(path, "wb", mtime=0) as handle:
        handle.write(json.dumps(value, ensure_ascii=False).encode("utf-8"))


def _read_json_table(folder: Path, stem: str) -> List[str]:
    packed = folder / f"{stem}.json.gz"
    if packed.is_file():
        with gzip.open(packed, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    return json.loads((folder / f"{stem}.json").read_text(encoding="utf-8"))


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


def rerank_exact(queries: np.ndarray, rows: np.ndarray, lookup: Any, k: int) -> Tuple[np.ndarray, np.ndarray]:
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
