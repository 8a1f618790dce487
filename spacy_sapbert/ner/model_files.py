"""What a saved NER model folder holds, read without torch: its settings file and its word-piece table.

:mod:`spacy_sapbert.ner.model` (the torch model) and :mod:`spacy_sapbert.ner.onnx_tagger` (the same model on
ONNX Runtime) read the same folders; the pipe asks these questions before it knows which of the two runs.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Union

import numpy as np

from spacy_sapbert.encoding.bert_settings import read_table

PathLike = Union[str, Path]
SETTINGS_FILE = "tagger.json"
FORMAT = 1
SHARED_KEY = "word_embeddings"
"""tagger.json entry of a model saved without its word-piece table: ``{"from": PIPE, "sha256": …}``."""


def read_settings(folder: PathLike) -> Dict[str, Any]:
    """``tagger.json`` of a model folder, its format checked."""
    path = Path(folder) / SETTINGS_FILE
    settings = json.loads(path.read_text(encoding="utf-8"))
    if settings.get("format") != FORMAT:
        raise ValueError(f"{path}: format {settings.get('format')!r}, expected {FORMAT}")
    return settings


def table_digest(weight: Any) -> str:
    """sha256 of a word-piece table (a torch tensor or a numpy array) as float16, the precision both shipped
    models store."""
    if not isinstance(weight, np.ndarray):
        weight = weight.detach().cpu().half().contiguous().numpy()
    return hashlib.sha256(np.ascontiguousarray(weight, dtype=np.float16).tobytes()).hexdigest()


def word_table(model: Any) -> Any:
    """The word-piece table a loaded model computes with: an ONNX Runtime model's numpy array, or the tensor of a
    torch :class:`~spacy_sapbert.encoding.bert.BertEncoder` or of a tagger holding one (``.encoder``)."""
    table = getattr(model, "word_embeddings", None)
    if isinstance(table, np.ndarray):
        return table
    encoder = model if hasattr(model, "embeddings") else model.encoder
    return encoder.embeddings.word_embeddings.weight


def as_backend(table: Any, backend: str) -> Any:
    """``table`` as ``backend`` reads it (``onnx``: a numpy array; ``torch``: a tensor), the same memory where it can."""
    if backend == "onnx":
        return table if isinstance(table, np.ndarray) else table.detach().cpu().numpy()
    if isinstance(table, np.ndarray):
        import torch

        return torch.from_numpy(table)
    return table


__all__ = ["FORMAT", "SETTINGS_FILE", "SHARED_KEY", "as_backend", "read_settings", "read_table", "table_digest",
           "word_table"]
