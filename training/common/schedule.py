"""The optimiser and its learning-rate schedule: AdamW with transformers' warm-up schedules.

transformers' schedules are ``LambdaLR`` objects whose state (step counter, last rates) is
plain data, so a checkpoint stores it in JSON and a resumed run continues on the same curve.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, Tuple

import torch


class OptimizerSettings(Protocol):
    """What the optimiser and its schedule read from a training config (every trainer's config has these)."""

    lr: float
    weight_decay: float
    warmup_steps: int
    schedule: str


def make_optimizer(model: torch.nn.Module, config: OptimizerSettings, *, exempt_norms: bool = True,
                   head_prefixes: Tuple[str, ...] = (), head_lr: Optional[float] = None,
                   fused: bool = False) -> torch.optim.Optimizer:
    """AdamW over the parameters that train (a frozen pooler is left out): every trainer's optimiser.

    ``exempt_norms``: biases and LayerNorm weights (the parameters with fewer than 2 dimensions) get
    no weight decay, BERT's fine-tuning recipe, in a second group; False keeps one group that decays
    everything, SapBERT's published recipe, which the self-alignment trainer reproduces.
    ``head_prefixes``: parameters named with one of these prefixes are new parts (a tagger's head)
    that learn from scratch, so a third group trains them at ``head_lr`` without decay.
    ``fused``: torch's fused kernel where it has one for the device (CPU included), else the plain
    loop: the optimiser step is a large part of a step of a small model.
    The groups' number and order are part of a checkpoint: a resumed run must build the same ones.
    """
    trainable = [(name, param) for name, param in model.named_parameters() if param.requires_grad]
    if not exempt_norms:
        if head_prefixes:
            raise ValueError("head_prefixes needs exempt_norms")
        return torch.optim.AdamW([p for _, p in trainable], lr=config.lr, weight_decay=config.weight_decay)
    decay: List[torch.nn.Parameter] = []
    no_decay: List[torch.nn.Parameter] = []
    new: List[torch.nn.Parameter] = []
    for name, param in trainable:
        if head_prefixes and name.startswith(head_prefixes):
            new.append(param)
        else:
            (no_decay if param.ndim < 2 else decay).append(param)
    groups: List[Dict[str, Any]] = [{"params": decay, "weight_decay": config.weight_decay},
                                    {"params": no_decay, "weight_decay": 0.0}]
    if head_prefixes:
        for group in groups:
            group["lr"] = config.lr
        groups.append({"params": new, "weight_decay": 0.0, "lr": config.lr if head_lr is None else head_lr})
    if fused:
        try:
            return torch.optim.AdamW(groups, lr=config.lr, fused=True)
        except (RuntimeError, TypeError):
            pass
    return torch.optim.AdamW(groups, lr=config.lr)


def make_scheduler(optimizer: torch.optim.Optimizer, config: OptimizerSettings, total_steps: int) -> Any:
    """Linear warm-up over ``warmup_steps`` from 0, then ``constant`` or ``linear`` decay to 0 at ``total_steps``."""
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    if config.schedule == "linear":
        return get_linear_schedule_with_warmup(optimizer, config.warmup_steps, total_steps)
    return get_constant_schedule_with_warmup(optimizer, config.warmup_steps)
