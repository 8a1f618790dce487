"""Where a ``sapbert_linker`` pipe's encoder, KB and index come from: the model, KB and index
its settings name (loaded on first use), or the folder ``nlp.to_disk`` saved it in::

    <pipeline>/<name>/cfg.json        the format version, the KB's name and the score calibration
    <pipeline>/<name>/encoder/        HF model folder (safetensors) + sapbert.json
    <pipeline>/<name>/kb.jsonl.gz     the KB
    <pipeline>/<name>/index/          NameIndex files (see spacy_sapbert.index.files)
    <pipeline>/<name>/reranker/       the context re-ranker folder, when the pipe has one (``rerank``)
    <pipeline>/<name>/annotated_names.json   what training mentions were linked to (``annotated_names``)
    <pipeline>/<name>/exact_names.tsv.xz     names of concepts the KB lacks, matched exactly (``exact_names``)

The other settings are in the pipeline's ``config.cfg``, where spaCy keeps them.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import spacy.util

from spacy_sapbert.default import DEFAULT_MODEL, default_index_path, default_kb_name, default_kb_path
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.linking.annotated_names import FILE_NAME as ANNOTATED_NAMES_FILE, AnnotatedNames
from spacy_sapbert.linking.calibration import Calibration
from spacy_sapbert.linking.exact_names import FILE_NAME as EXACT_NAMES_FILE, ExactNames
from spacy_sapbert.linking.rerank.stage import ContextReranking, kb_canonical_names
from spacy_sapbert.linking.settings import LinkerSettings
from spacy_sapbert.util.gc_pause import gc_paused
from spacy_sapbert.util.jsonfile import read_json_object

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
CFG_FILE = "cfg.json"
ENCODER_DIR = "encoder"
KB_FILE = "kb.jsonl.gz"
INDEX_DIR = "index"
RERANKER_DIR = "reranker"
FORMAT_VERSION = 1
Parts = Tuple[Encoder, KnowledgeBase, NameIndex]


def configured_parts(settings: LinkerSettings, pipe_name: str, encoder: Optional[Encoder] = None,
                     kb: Optional[KnowledgeBase] = None, index: Optional[NameIndex] = None) -> Parts:
    """The parts given, and the others as ``settings`` configure them: the model and KB they
    name (the embedded default's without either), the index they name, the embedded default's
    index where it fits, or else an index built now (minutes for a large KB: logged)."""
    embedded = settings.model == DEFAULT_MODEL and not settings.kb
    if kb is None and not settings.kb and not embedded:
        raise InputError(f"{pipe_name}: no knowledge base configured for model {settings.model!r}; add the pipe "
                         "with config={'kb': 'path/to/kb.jsonl.gz'} (the embedded default KB comes with the "
                         f"embedded default model {DEFAULT_MODEL!r} only)", field="kb")
    if encoder is None:
        encoder = configured_encoder(settings)
    if kb is None:
        kb = KnowledgeBase.from_jsonl(settings.kb) if settings.kb else \
            KnowledgeBase.from_jsonl(default_kb_path(), name=default_kb_name())
    if index is None:
        index_path = settings.index or (default_index_path() if embedded and settings.index_kind == "flat" and
                                        settings.pooling is None and settings.max_length is None else None)
        if index_path:
            index = NameIndex.load(index_path, encoder=encoder, kb=kb)
        else:
            logger.info("%s: building the name index of KB %r (%d concepts) on first use; nlp.to_disk() saves it",
                        pipe_name, kb.name, len(kb))
            index = NameIndex.build(kb, encoder, kind=settings.index_kind)
    return encoder, kb, index


def configured_encoder(settings: LinkerSettings) -> Encoder:
    """The encoder the settings name, as it will link (seconds; the KB and index are not touched)."""
    return Encoder(settings.model, pooling=settings.pooling, max_length=settings.max_length, device=settings.device,
                   batch_size=settings.encode_batch_size, dtype=settings.precision, backend=settings.backend,
                   half_linears=True)


def configured_reranking(settings: LinkerSettings, kb: KnowledgeBase,
                         folder: Optional[PathLike] = None) -> Optional[ContextReranking]:
    """The second stage: the re-ranker in ``folder`` (a saved pipe's) or the one the ``rerank``
    setting names, on the pipe's device; None without either."""
    source = folder or settings.rerank
    if source is None:
        return None
    from spacy_sapbert.linking.rerank.model import Reranker

    return ContextReranking(Reranker.load(source, device=settings.device), kb_canonical_names(kb),
                            settings.rerank_max_gap)


def save_reranker(folder: Path, reranking: Optional[ContextReranking]) -> None:
    """Write the pipe's re-ranker folder. Without a re-ranker, a re-ranker folder that an earlier
    save left in this pipe's folder is removed, since loading would bring it back."""
    if reranking is not None:
        reranking.reranker.save(folder, weights_dtype=reranking.reranker.exact_weights_dtype(), overwrite=True)
    elif (folder / "reranker.json").is_file():
        shutil.rmtree(folder)


def configured_annotated_names(settings: LinkerSettings, kb: KnowledgeBase,
                               path: Optional[PathLike] = None) -> Optional[AnnotatedNames]:
    """The annotated-names stage: the table in ``path`` (a saved pipe's) or the one the
    ``annotated_names`` setting names, resolved against ``kb``; None without either."""
    source = path or settings.annotated_names
    if source is None:
        return None
    if not Path(source).is_file():
        raise InputError("annotated names file not found", source, field="annotated_names")
    return AnnotatedNames.from_disk(source).for_kb(kb)


def save_table_file(path: Path, table: Optional[Union[AnnotatedNames, ExactNames]]) -> None:
    """Write one of the pipe's table files (annotated names, exact names), or remove one an earlier save left
    (loading would bring it back)."""
    if table is not None:
        table.to_disk(path)
    elif path.is_file():
        path.unlink()


def configured_exact_names(settings: LinkerSettings, path: Optional[PathLike] = None) -> Optional[ExactNames]:
    """The exact-names stage: the table in ``path`` (a saved pipe's) or the one the ``exact_names`` setting
    names; None without either. Only its first line is read now; its names, when a span first needs them."""
    source = path or settings.exact_names
    return None if source is None else ExactNames(source)


def part_writers(linker: Any, reranking: Optional[ContextReranking], annotated: Optional[AnnotatedNames],
                 exact: Optional[ExactNames] = None) -> Dict[str, Callable[[Path], Any]]:
    """What ``to_disk`` writes, per part: the KB before cfg.json, which records its digest."""
    written: Dict[str, Path] = {}
    return {
        KB_FILE: lambda p: written.update(kb=linker.kb.to_jsonl(p)),
        CFG_FILE: lambda p: write_cfg(p, linker.kb, linker.calibration, written.get("kb")),
        ENCODER_DIR: linker.encoder.save,
        INDEX_DIR: linker.index.save,
        RERANKER_DIR: lambda p: save_reranker(p, reranking),
        ANNOTATED_NAMES_FILE: lambda p: save_table_file(p, annotated),
        EXACT_NAMES_FILE: lambda p: save_table_file(p, exact),
    }


def read_parts(path: PathLike, settings: LinkerSettings, name: str, exclude: Iterable[str]) -> Dict[str, Any]:
    """The saved parts in ``path`` but those in ``exclude``: cfg, encoder, kb, index (checked
    against both), and the re-ranker folder, annotated-names file and exact-names table where the pipe has them."""
    read: Dict[str, Any] = {}
    readers: Dict[str, Callable[[Path], None]] = {
        CFG_FILE: lambda p: read.update(cfg=read_cfg(p, name), calibration_file=p),
        ENCODER_DIR: lambda p: read.update(encoder=saved_encoder(p, settings)),
        KB_FILE: lambda p: read.update(kb=saved_kb(p, read.get("cfg", {}))),
        INDEX_DIR: lambda p: read.update(index=NameIndex.load(p, encoder=read.get("encoder"), kb=read.get("kb"))),
        RERANKER_DIR: lambda p: read.update(reranker=p if p.is_dir() else None),
        ANNOTATED_NAMES_FILE: lambda p: read.update(annotated=p if p.is_file() else None),
        EXACT_NAMES_FILE: lambda p: read.update(exact=p if p.is_file() else None),
    }
    with gc_paused():  # the KB, the index's tables, the annotated names: many small objects, no cycles
        spacy.util.from_disk(path, readers, exclude)
    return read


def saved_encoder(folder: PathLike, settings: LinkerSettings) -> Encoder:
    """A saved pipe's encoder: pooling and length are its own (sapbert.json); where and how it
    runs are the settings' (``spacy.load(..., config=...)`` can change them)."""
    return Encoder(folder, device=settings.device, batch_size=settings.encode_batch_size, dtype=settings.precision,
                   backend=settings.backend, half_linears=True)


def write_cfg(path: PathLike, kb: KnowledgeBase, calibration: Optional[Calibration] = None,
              kb_file: Optional[PathLike] = None) -> None:
    """Write what :func:`read_cfg` reads back, and nothing else. With ``kb_file``, the KB file just
    written beside it: its digest and the KB's fingerprint, so that loading the same bytes again
    need not work the fingerprint out (it hashes every concept: a third of the default's load)."""
    cfg: Dict[str, Any] = {"format_version": FORMAT_VERSION, "kb_name": kb.name}
    if kb_file is not None:
        cfg["kb_file"] = {"sha256": file_sha256(kb_file), "fingerprint": kb.fingerprint()}
    if calibration is not None:
        cfg["calibration"] = calibration.to_dict()
    Path(path).write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_cfg(path: PathLike, pipe_name: str) -> Dict[str, Any]:
    """A saved pipe's ``cfg.json``, its format version checked. Files written by earlier
    versions hold more keys (the settings, fingerprints): they are left unread."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"not a saved {pipe_name} component: no {CFG_FILE}", path.parent)
    return read_json_object(path, FORMAT_VERSION)


def saved_kb(path: PathLike, cfg: Dict[str, Any]) -> KnowledgeBase:
    """A saved pipe's KB file, named as ``cfg.json`` says. When the file's bytes are the ones cfg.json
    recorded at saving, it is read as this project's own file, fingerprint included (a third of the
    default's load time went to checking and hashing its 23k concepts again); else checked like any
    KB file."""
    recorded = cfg.get("kb_file")
    if isinstance(recorded, dict) and recorded.get("sha256") == file_sha256(path):
        return KnowledgeBase.from_own_jsonl(path, str(recorded.get("fingerprint")), name=cfg.get("kb_name"))
    return KnowledgeBase.from_jsonl(path, name=cfg.get("kb_name"))


def file_sha256(path: PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cfg_calibration(cfg: Dict[str, Any], path: PathLike) -> Optional[Calibration]:
    """The calibration a saved pipe's ``cfg.json`` holds, or None (scores stay cosines)."""
    data = cfg.get("calibration")
    return None if data is None else Calibration.from_dict(data, str(path))


__all__ = ["ANNOTATED_NAMES_FILE", "EXACT_NAMES_FILE", "cfg_calibration", "configured_annotated_names",
           "configured_exact_names", "save_table_file", "CFG_FILE", "ENCODER_DIR", "FORMAT_VERSION", "INDEX_DIR", "KB_FILE", "RERANKER_DIR",
           "configured_encoder", "configured_parts", "configured_reranking", "file_sha256", "part_writers", "read_parts", "read_cfg", "save_reranker", "saved_encoder",
           "saved_kb", "write_cfg"]
