"""Pooling: a batch of token states → one vector per name.

Training and inference must pool identically, or a model would be trained for one vector and
indexed with another; the trainer and the :class:`~spacy_sapbert.encoding.encoder.Encoder` both call
:func:`pool`.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

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


def pool_packed(states: Any, lengths: Sequence[int], pooling: str) -> Any:
    """:func:`pool` of texts whose states lie end to end, ``lengths`` rows each, without padding
    (:mod:`~spacy_sapbert.encoding.packed`)."""
    import torch

    counts = torch.as_tensor(lengths, device=states.device)
    if pooling == "cls":
        return states[torch.cumsum(counts, 0) - counts]
    segments = torch.repeat_interleave(torch.arange(len(counts), device=states.device), counts)
    sums = torch.zeros(len(counts), states.shape[1], dtype=states.dtype, device=states.device)
    return sums.index_add_(0, segments, states) / counts[:, None].to(states.dtype)
