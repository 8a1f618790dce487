"""sentence-transformers' module files in our model folders, so that ``SentenceTransformer(folder)`` gives our vectors.

A model folder we write (the trainer's output, :meth:`Encoder.save <spacy_sapbert.encoding.encoder.Encoder.save>`)
is a Hugging Face folder, which SapBERT-style code loads with ``AutoModel``/``AutoTokenizer``, plus
``sapbert.json``. sentence-transformers does not read ``sapbert.json``; it reads its own files:

* ``modules.json``: the pipeline, the transformer at the folder itself (path ``""``), then
  ``1_Pooling`` and ``2_Normalize``;
* ``1_Pooling/config.json``: the pooling (``pooling_mode_cls_token`` / ``pooling_mode_mean_tokens``);
* ``2_Normalize/config.json``: L2 normalisation of the pooled vector (no weights);
* ``sentence_bert_config.json``: truncation (``max_seq_length``, our ``max_length``).

With them ``SentenceTransformer(str(folder)).encode(texts)`` returns the unit vectors that
``Encoder(folder).encode(texts)`` returns. They are written in the format every sentence-transformers
release from 2.x on reads (the ``sentence_transformers.models.*`` names and the boolean pooling
flags; 6.x maps both to its own). They change nothing we read: ``sapbert.json`` still decides pooling
and max length, and the encoder fingerprint hashes settings, vocabulary and weights, not files.

This module is also the one place that maps our pooling names to sentence-transformers' pooling
configuration, in both directions: :func:`pooling_config` writes it, :func:`pooling_from_config` reads it
(for a folder without ``sapbert.json``, such as the MiniLM base model).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from spacy_sapbert.encoding.pooling import POOLINGS, check_pooling

logger = logging.getLogger(__name__)

MODULES_FILE = "modules.json"
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
MODULE_CONFIG_FILE = "config.json"
"""The name of a module's configuration inside its folder (``1_Pooling/config.json``)."""
TRANSFORMER_CONFIG_FILE = "sentence_bert_config.json"
FILES = (MODULES_FILE, TRANSFORMER_CONFIG_FILE, f"{POOLING_DIR}/{MODULE_CONFIG_FILE}",
         f"{NORMALIZE_DIR}/{MODULE_CONFIG_FILE}")
"""What :func:`write_sentence_transformers_files` writes, relative to the model folder."""

POOLING_FLAGS: Dict[str, str] = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens"}
"""Our pooling name → the sentence-transformers flag that selects the same pooling."""
_OTHER_FLAGS = ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
"""Flags we write as false, so that every release reads an explicit, single mode (as the hub's MiniLM has them)."""
_ALL_FLAGS: Dict[str, str] = {  # every flag sentence-transformers knows → its mode name in 6.x
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
assert set(POOLING_FLAGS) == set(POOLINGS) and all(_ALL_FLAGS[POOLING_FLAGS[p]] == p for p in POOLINGS)

_MODULES = ((0, "", "sentence_transformers.models.Transformer"),
            (1, POOLING_DIR, "sentence_transformers.models.Pooling"),
            (2, NORMALIZE_DIR, "sentence_transformers.models.Normalize"))
_NORMALIZE_CONFIG = {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"}
"""Normalize's settings as sentence-transformers 6 saves them (its defaults); earlier releases ignore the file."""


def pooling_config(pooling: str, dim: int) -> Dict[str, Any]:
    """``1_Pooling/config.json`` for our ``pooling`` over ``dim``-wide token vectors."""
    pooling = check_pooling(pooling)
    config: Dict[str, Any] = {"word_embedding_dimension": int(dim)}
    config.update({flag: name == pooling for name, flag in POOLING_FLAGS.items()})
    config.update(dict.fromkeys(_OTHER_FLAGS, False))
    return config


def pooling_from_config(config: Mapping[str, Any]) -> Optional[str]:
    """Our pooling name for a sentence-transformers pooling config (legacy flags, or 6.x's ``pooling_mode``);
    None when it selects no mode, or one we do not compute (max, a concatenation of modes, ...)."""
    mode = config.get("pooling_mode")
    if isinstance(mode, (list, tuple)) and len(mode) == 1:
        mode = mode[0]
    if mode is None:
        modes = [name for flag, name in _ALL_FLAGS.items() if config.get(flag)]
        if not modes:
            return None
        mode = modes[0] if len(modes) == 1 else "+".join(modes)
    if isinstance(mode, str) and mode.lower() in POOLINGS:
        return mode.lower()
    logger.warning("sentence-transformers pooling %r is not one the encoder computes (%s); ignored",
                   mode, ", ".join(POOLINGS))
    return None


def read_pooling(folder: Path) -> Optional[str]:
    """The pooling a folder's ``1_Pooling/config.json`` selects, or None (no file, unreadable, or not ours)."""
    path = folder / POOLING_DIR / MODULE_CONFIG_FILE
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return pooling_from_config(config) if isinstance(config, dict) else None


def write_sentence_transformers_files(folder: Union[str, Path], pooling: str, max_length: int, dim: int) -> Path:
    """Write sentence-transformers' module files into ``folder`` (a model folder being written, already
    holding or about to hold the weights and tokenizer): Transformer → Pooling(``pooling``) → Normalize."""
    folder = Path(folder)
    files = {
        MODULES_FILE: [{"idx": idx, "name": str(idx), "path": path, "type": kind} for idx, path, kind in _MODULES],
        TRANSFORMER_CONFIG_FILE: {"max_seq_length": int(max_length), "do_lower_case": False},
        f"{POOLING_DIR}/{MODULE_CONFIG_FILE}": pooling_config(pooling, dim),
        f"{NORMALIZE_DIR}/{MODULE_CONFIG_FILE}": _NORMALIZE_CONFIG,
    }
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    return folder


__all__ = ["FILES", "MODULES_FILE", "NORMALIZE_DIR", "POOLING_DIR", "POOLING_FLAGS", "TRANSFORMER_CONFIG_FILE",
           "pooling_config", "pooling_from_config", "read_pooling", "write_sentence_transformers_files"]
