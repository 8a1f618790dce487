"""The NER's loss terms, in torch alone: the CPU trainer and the GPU distillation share them.

``training/ner/tagger/trainer.py`` (spaCy in the process) and ``training/ner/teacher/distil.py``
(a GPU machine with torch and transformers only) must optimise the same objective, so the terms
live here, away from spaCy.
"""
from __future__ import annotations

import torch

IGNORE = -100
"""Gold of a token with missing annotation: ``spacy_sapbert.ner.tags.IGNORE`` (that module needs spaCy)."""

PARTIAL_O = -1
"""Gold of a token a corpus leaves unlabelled while it does not annotate every label: ``O`` or any tag
of a label the corpus does not know (its *open tags*)."""

NEW_PARTS = ("head.", "gazetteer_embed.")
"""Parameters the tagger adds to the encoder: they learn from scratch, at the head's learning rate."""


def partial_label_loss(logits: torch.Tensor, gold: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Mean over scored tokens of ``-log P(tag in allowed)``: cross-entropy where a tag is known,
    the summed probability of every tag the corpus leaves open where it is not.

    ``logits``: tokens × tags; ``gold``: tag ids (IGNORE to skip); ``allowed``: tokens × tags bool.
    """
    kept = gold != IGNORE
    if not bool(kept.any()):
        return logits.sum() * 0.0
    logits, allowed = logits[kept], allowed[kept]
    total = torch.logsumexp(logits, dim=-1)
    inside = torch.logsumexp(logits.masked_fill(~allowed, float("-inf")), dim=-1)
    return (total - inside).mean()


def allowed_tags(gold: torch.Tensor, open_tags: torch.Tensor) -> torch.Tensor:
    """tokens × tags bool for :func:`partial_label_loss`: the gold tag where it is known, the token's
    open tags (``open_tags``: tokens × tags bool, the tags its corpus leaves open) at a :data:`PARTIAL_O`."""
    allowed = torch.zeros_like(open_tags, dtype=torch.bool)
    certain = gold >= 0
    allowed[certain.nonzero(as_tuple=True)[0], gold[certain]] = True
    return allowed | (open_tags & (gold == PARTIAL_O)[:, None])


def distillation_loss(logits: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
    """Mean over tokens of the cross-entropy against a teacher's probabilities ``soft`` (tokens × tags)."""
    return -(soft * logits.log_softmax(-1)).sum(-1).mean()


def gold_loss(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on the tokens with a gold tag; zero (with a graph) where none has one, as on
    text only the teacher labels."""
    if bool((gold != IGNORE).any()):
        return torch.nn.functional.cross_entropy(logits, gold, ignore_index=IGNORE)
    return logits.sum() * 0.0


def with_teacher(loss: torch.Tensor, logits: torch.Tensor, soft: torch.Tensor, weight: float) -> torch.Tensor:
    """``weight`` × the distillation term + the rest × the gold term ``loss``."""
    return weight * distillation_loss(logits, soft) + (1.0 - weight) * loss
