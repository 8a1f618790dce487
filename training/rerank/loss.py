"""The listwise objective: softmax cross-entropy over a mention's candidates, the gold among them.

With several right candidates (a dictionary CUI that joins IDs, a mention with alternative gold
IDs) the loss is the negative log of their total probability, ``logsumexp(all) − logsumexp(right)``,
which is the usual cross-entropy when exactly one is right.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import torch


def listwise_loss(scores: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """Mean over mentions of ``−log Σ_right softmax(scores)``; ``scores`` [B, k] (−inf where a mention has
    fewer than k candidates), ``positive`` [B, k] bool with at least one True per row."""
    scores = scores.float()
    right = scores.masked_fill(~positive, float("-inf"))
    return (torch.logsumexp(scores, dim=1) - torch.logsumexp(right, dim=1)).mean()


def to_grid(scores: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    """Flat per-pair scores of mentions with ``counts`` candidates each → [B, max count], −inf padded."""
    width = max(counts)
    if all(c == width for c in counts):
        return scores.float().view(len(counts), width)
    positions = torch.tensor([row * width + col for row, c in enumerate(counts) for col in range(c)],
                             device=scores.device)
    grid = torch.full((len(counts) * width,), float("-inf"), device=scores.device)
    return grid.index_copy(0, positions, scores.float()).view(len(counts), width)


def batch_accuracy(grid: torch.Tensor, positive: torch.Tensor) -> Tuple[float, int]:
    """(share of mentions whose best-scored candidate is right, number of mentions)."""
    best = grid.detach().argmax(dim=1)
    return float(positive[torch.arange(len(best)), best].float().mean()), len(best)
