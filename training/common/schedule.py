"""The optimiser and its learning-rate schedule: AdamW with transformers' warm-up schedules.

transformers' schedules are ``LambdaLR`` objects whose state (step counter, last rates) is
plain data, so a checkpoint stores it in JSON and a resumed run continues on the same curve.
"""
from __future__ import annotations

from typing import Any, Protocol

import torch


class OptimizerSettings(Protocol):
    """What the optimiser and its schedule read from a training config (every trainer's config has these)."""

    lr: float
    weight_decay: float
    warmup_steps: int
    schedule: str


def make_optimizer(model: torch.nn.Module, config: OptimizerSettings) -> torch.optim.Optimizer:
    """AdamW over the parameters that train (a frozen pooler is left out)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)


def make_scheduler(optimizer: torch.optim.Optimizer, config: OptimizerSettings, total_steps: int) -> Any:
    """Linear warm-up over ``warmup_steps`` from 0, then ``constant`` or ``linear`` decay to 0 at ``total_steps``."""
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    if config.schedule == "linear":
        return get_linear_schedule_with_warmup(optimizer, config.warmup_steps, total_steps)
    return get_constant_schedule_with_warmup(optimizer, config.warmup_steps)
