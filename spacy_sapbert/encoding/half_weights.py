"""Inference weights kept in half precision: the word-piece table as its file stores it, the linear layers in
the precision autocast computes them in. Each keeps every output the same to the bit and frees memory (the
names below say how); the loaders read them straight into that precision, and a model that is trained is
loaded without them.
"""
from __future__ import annotations

from typing import Dict, Optional

import torch
from torch import nn

from spacy_sapbert.encoding.bert_settings import WORD_EMBEDDINGS


def half_linear_weights(model: nn.Module, dtype: Optional[str]) -> Dict[str, torch.dtype]:
    """The state-dict names of ``model``'s ``nn.Linear`` weights, each to be kept in ``dtype``
    (``bfloat16`` or ``float16``, the precision autocast computes them in); none for other precisions.

    For an inference model run under autocast of ``dtype`` only, never trained. Autocast casts a
    float32 weight to that precision at every call, with the same rounding as a weight read straight
    into it, so the outputs are the same to the bit; the cast per batch is gone and the layers take
    half the memory (14 MB less for the embedded default's NER, and no float32 copy while it loads).
    Biases, LayerNorm and embeddings stay float32. The model's files keep the float weights (the NER
    pipe's ``to_disk`` reads them again: :func:`has_half_linears`)."""
    if dtype not in ("bfloat16", "float16"):
        return {}
    target = getattr(torch, dtype)
    return {f"{name}.weight": target for name, module in model.named_modules() if isinstance(module, nn.Linear)}


def read_as(tensor: torch.Tensor, half: Optional[torch.dtype] = None) -> torch.Tensor:
    """A weight file's tensor in the precision a loaded model keeps it: ``half`` for a linear layer's weight
    that :func:`half_linear_weights` names, float32 for any other floating tensor, integers as stored."""
    if half is not None:
        return tensor.to(half)
    return tensor.float() if tensor.is_floating_point() else tensor


def has_half_linears(model: nn.Module) -> bool:
    """Whether some linear layer of ``model`` holds half-precision weights (:func:`half_linear_weights`)."""
    return any(isinstance(m, nn.Linear) and m.weight.dtype in (torch.bfloat16, torch.float16) for m in model.modules())


__all__ = ["WORD_EMBEDDINGS", "half_linear_weights", "has_half_linears", "read_as"]
