"""What the native BERT's weights are called and which ``config.json`` it computes, without torch.

The torch model (:mod:`spacy_sapbert.encoding.bert`) and the ONNX Runtime one (:mod:`spacy_sapbert.encoding.onnx_bert`)
read the same folders: the names, the settings and the check of what qualifies live here, so that choosing a
backend and reading a folder's tensors imports no torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from spacy_sapbert.encoding.fast_tokenizer import TOKENIZER_FILE

WEIGHTS_FILE = "model.safetensors"
_PREFIXES = ("bert.", "model.")
IGNORED_TENSORS = ("embeddings.position_ids",)


def state_name(name: str) -> str:
    """A weight file's tensor name as this module's state dict names it (without ``bert.`` / ``model.``)."""
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


@dataclass(frozen=True)
class BertSettings:
    """The fields of a BERT ``config.json`` the forward pass needs."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    pad_token_id: Optional[int]

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "BertSettings":
        return cls(
            vocab_size=int(config["vocab_size"]), hidden_size=int(config["hidden_size"]),
            num_hidden_layers=int(config["num_hidden_layers"]),
            num_attention_heads=int(config["num_attention_heads"]),
            intermediate_size=int(config["intermediate_size"]),
            max_position_embeddings=int(config["max_position_embeddings"]),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
            pad_token_id=config.get("pad_token_id"),
        )


def supports(folder: Path, config: Dict[str, Any]) -> Tuple[bool, str]:
    """(True, "") when ``folder`` holds a BERT encoder the native backends (torch: :mod:`.bert`; ONNX Runtime:
    :mod:`.onnx_bert`) compute exactly, else (False, why)."""
    if config.get("model_type") != "bert":
        return False, f"model_type {config.get('model_type')!r} is not 'bert'"
    if config.get("position_embedding_type", "absolute") != "absolute":
        return False, f"position_embedding_type {config.get('position_embedding_type')!r}"
    if config.get("hidden_act", "gelu") != "gelu":
        return False, f"hidden_act {config.get('hidden_act')!r}"
    if config.get("is_decoder") or config.get("add_cross_attention"):
        return False, "a decoder / cross-attention model"
    if config.get("hidden_size", 0) % max(1, config.get("num_attention_heads", 1)):
        return False, "hidden_size not divisible by num_attention_heads"
    for name in (WEIGHTS_FILE, TOKENIZER_FILE):
        if not (folder / name).is_file():
            return False, f"no {name}"
    missing = [k for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                           "intermediate_size", "max_position_embeddings") if k not in config]
    if missing:
        return False, f"config.json lacks {missing}"
    return True, ""


WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
"""The word-piece table's state-dict name in a BERT encoder. An inference model keeps it in the half
precision its file stores it in (30,522 × 384: 47 MB in float32, 23 MB as stored), frozen: the rows a batch
looks up are widened to the other weights' precision in the forward pass, so every output is the same to
the bit (half → float32 is exact); a model that is trained is loaded without this
(:meth:`~spacy_sapbert.encoding.bert.BertEncoder.from_folder`'s ``table_dtype``)."""


def read_table(encoder_folder: Union[str, Path]) -> np.ndarray:
    """The word-piece table of a saved encoder folder (``model.safetensors``), read alone, as stored."""
    from safetensors import safe_open

    path = Path(encoder_folder) / WEIGHTS_FILE
    with safe_open(str(path), framework="np") as weights:
        names = [name for name in weights.keys() if name.endswith(WORD_EMBEDDINGS)]
        if not names:
            raise ValueError(f"{path}: no {WORD_EMBEDDINGS} tensor")
        return weights.get_tensor(names[0])


class ConfigView:
    """What the encoder reads from ``model.config`` (``hidden_size``, ``max_position_embeddings``)."""

    def __init__(self, config: Dict[str, Any], settings: BertSettings) -> None:
        self._config = dict(config)
        self.hidden_size = settings.hidden_size
        self.max_position_embeddings = settings.max_position_embeddings

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._config)
