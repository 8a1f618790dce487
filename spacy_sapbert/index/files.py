"""The folder a :class:`~spacy_sapbert.index.name_index.NameIndex` is saved in: writing it whole, reading and
verifying it, recognising one. No pickle anywhere::

    index.faiss       the FAISS index (faiss.write_index)
    names.json.gz     distinct normalised names (gzip JSON; plain names.json is read too)
    concepts.json.gz  distinct concept IDs
    rows.npy          int32 (rows, 2): FAISS row → (name number, concept number)
    vectors.npy       float16 (names, dim), for ``rerank`` only (read memory-mapped)
    refine.faiss      residual codes (a FAISS IndexPQ), for ``refine_m`` only (:mod:`spacy_sapbert.index.refine`)
    manifest.json     kind, parameters, dimensions, fingerprints, encoder settings
"""
from __future__ import annotations

import gzip
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.index.kinds import faiss_module
from spacy_sapbert.index.packed_strings import as_list, json_string_list
from spacy_sapbert.index.refine import REFINE_FILE
from spacy_sapbert.util.atomic import atomic_dir, check_replaceable, remove_stale_temps
from spacy_sapbert.util.jsonfile import read_json_object

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
RERANK_FILE = "vectors.npy"
REQUIRED_KEYS = ("kind", "dim", "rows", "model_fingerprint", "kb_fingerprint")


@dataclass
class IndexFiles:
    """What an index folder holds, read and checked against itself (not against a model or KB)."""

    faiss_index: Any
    unique_names: Sequence[str]
    concepts: Sequence[str]
    rows: np.ndarray
    """int32 (rows, 2): FAISS row → (name number, concept number)"""
    manifest: Dict[str, Any]
    rerank_vectors: Optional[np.ndarray] = None
    refine_codes: Optional[Any] = None


def write_index_folder(folder: PathLike, files: IndexFiles) -> Path:
    """Write ``files`` to ``folder``, replacing an index saved there before.

    The files are written to a temporary sibling folder and swapped in whole
    (:func:`~spacy_sapbert.util.atomic.atomic_dir`), so a save killed at any moment leaves the
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
    with atomic_dir(real) as tmp:
        faiss_module().write_index(files.faiss_index, str(tmp / INDEX_FILE))
        _write_json_gz(tmp / "names.json.gz", files.unique_names)
        _write_json_gz(tmp / "concepts.json.gz", files.concepts)
        np.save(tmp / "rows.npy", files.rows, allow_pickle=False)
        if files.rerank_vectors is not None:
            np.save(tmp / RERANK_FILE, np.asarray(files.rerank_vectors, dtype=np.float16), allow_pickle=False)
        if files.refine_codes is not None:
            faiss_module().write_index(files.refine_codes, str(tmp / REFINE_FILE))
        (tmp / MANIFEST).write_text(json.dumps(files.manifest, indent=2, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
    return folder


def read_index_folder(folder: PathLike) -> IndexFiles:
    """Read a saved index; an :class:`InputError` naming the file when one is missing, of
    another format version, or disagrees with the others."""
    folder = Path(folder)
    manifest = _read_manifest(folder)
    try:
        faiss_index = faiss_module().read_index(str(folder / INDEX_FILE))
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
    files = IndexFiles(faiss_index, unique_names, concepts, rows.astype(np.int32, copy=False), manifest)
    if manifest.get("params", {}).get("rerank"):
        files.rerank_vectors = _read_rerank_vectors(folder, len(unique_names), manifest["dim"])
    if manifest.get("params", {}).get("refine_m"):
        files.refine_codes = _read_refine_codes(folder, len(rows), manifest["dim"])
    return files


def _read_manifest(folder: Path) -> Dict[str, Any]:
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        raise InputError("index folder not found", folder)
    if not manifest_path.is_file():
        raise InputError(f"not a saved NameIndex: no {MANIFEST}", folder)
    manifest = read_json_object(manifest_path, FORMAT_VERSION, "index")
    for key in REQUIRED_KEYS:
        if key not in manifest:
            raise InputError("missing", manifest_path, field=key)
    return manifest


def _read_rerank_vectors(folder: Path, names: int, dim: int) -> np.ndarray:
    """The float16 name vectors, memory-mapped: the RAM they cost is the pages a search touches."""
    try:
        stored = np.load(folder / RERANK_FILE, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise InputError(f"the index re-ranks but its vectors cannot be read ({err})", folder / RERANK_FILE) from err
    if stored.shape != (names, dim) or stored.dtype != np.float16:
        raise InputError(f"expected float16 vectors of shape ({names}, {dim}), found {stored.dtype} {stored.shape}",
                         folder / RERANK_FILE)
    return stored


def _read_refine_codes(folder: Path, rows: int, dim: int) -> Any:
    path = folder / REFINE_FILE
    try:
        codes = faiss_module().read_index(str(path))
    except (OSError, RuntimeError) as err:
        raise InputError(f"the index has refinement codes (refine_m) but they cannot be read ({err})", path) from err
    if codes.ntotal != rows or codes.d != dim:
        raise InputError(f"expected refinement codes of {rows} rows and {dim} dimensions, found {codes.ntotal} "
                         f"and {codes.d}", path)
    return codes


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
    """Raise :class:`InputError` unless an index may be saved to ``folder``: it is missing,
    empty or a saved index. Replacing anything else would delete files that are not ours
    (there is no overwrite flag); callers that build for minutes can check first."""
    check_replaceable(folder, is_index_folder, f"a saved NameIndex (no {MANIFEST})",
                      "Choose a new or empty folder, or delete this one yourself", option="index folder")


def _write_json_gz(path: Path, value: Any) -> None:
    # mtime=0: the same tables give the same bytes (a shipped index does not change in git on a rebuild)
    with gzip.GzipFile(path, "wb", mtime=0) as handle:
        handle.write(json.dumps(as_list(value), ensure_ascii=False).encode("utf-8"))


def _read_json_table(folder: Path, stem: str) -> Sequence[str]:
    """A table of strings, packed where it can be (:mod:`spacy_sapbert.index.packed_strings`)."""
    packed = folder / f"{stem}.json.gz"
    if packed.is_file():
        with gzip.open(packed, "rb") as handle:
            return json_string_list(handle.read())
    return json_string_list((folder / f"{stem}.json").read_bytes())


__all__ = ["FORMAT_VERSION", "INDEX_FILE", "MANIFEST", "RERANK_FILE", "IndexFiles", "check_save_target",
           "is_index_folder", "read_index_folder", "write_index_folder"]
