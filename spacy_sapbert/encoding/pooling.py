"""Pooling: a batch of token states → one vector per name.

Training and inference must pool identically, or a model would be trained for one vector and
indexed with another; the trainer and the :class:`~spacy_sapbert.encoding.encoder.Encoder` both call
:func:`pool`.
"""
from __future__ import annotations

from typing import Any, Optional

from spacy_sapbert.errors import InputError

POOLINGS = ("cls", "mean")


def check_pooling(pooling: Optional[str]) -> str:
    """``pooling`` in lower case when it is one of :data:`POOLINGS`; an :class:`InputError` otherwise."""
    name = str(pooling).lower()
    if name not in POOLINGS:
        raise InputError(f"unknown pooling {pooling!r}: use one of {POOLINGS}", field="pooling")
    return name


def pool(last_hidden_state: Any, attention_mask: Any, pooling: str) -> Any:
    """[CLS] of the last layer (``cls``), or the mean over real, unpadded tokens (``mean``).

    Tensors of shape (batch, tokens, dim) and (batch, tokens); every row has at least its
    [CLS] token, so the clamp only guards an all-padding row from a division by zero."""
    if pooling == "cls":
        return last_hidden_state[:, 0]
    weights = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)
    return (last_hidden_state * weights).sum(1) / weights.sum(1).clamp(min=1.0)
