"""One optimiser step with gradient accumulation: the loop both trainers (self-alignment, re-ranker) run.

Micro-batches but the last skip DDP's gradient sync (``no_sync``); the loss is scaled by the
number of micro-batches so the step equals one big batch's; the scheduler advances only when the
optimiser really stepped (a skipped fp16 step must not move the learning rate).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, Sequence, Tuple

import torch


def accumulated_step(accelerator: Any, model: torch.nn.Module, optimizer: Any, scheduler: Any,
                     micro_batches: Sequence[Sequence[int]],
                     batch_loss: Callable[[Sequence[int]], Tuple[torch.Tensor, float]],
                     max_grad_norm: float) -> Tuple[float, float]:
    """Train on ``micro_batches`` (index lists) and step once: (mean loss, mean of the statistic
    ``batch_loss`` returns beside its loss)."""
    model.train()
    loss_sum, stat_sum = 0.0, 0.0
    for number, indices in enumerate(micro_batches):
        last = number == len(micro_batches) - 1
        with accelerator.no_sync(model) if not last else nullcontext():
            with accelerator.autocast():
                loss, stat = batch_loss(indices)
            accelerator.backward(loss / len(micro_batches))
        loss_sum += float(loss.detach())
        stat_sum += stat
    if max_grad_norm > 0:
        accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    if not accelerator.optimizer_step_was_skipped:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_sum / len(micro_batches), stat_sum / len(micro_batches)
