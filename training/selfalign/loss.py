"""SapBERT's self-alignment objective: online triplet mining + Multi-Similarity loss.

Exactly the objects of SapBERT's reference code (``src/metric_learning.py``):
``TripletMarginMiner(margin=0.2, type_of_triplets="all")`` on its default normalised-L2
distance, ``MultiSimilarityLoss(alpha=1, beta=60, base=0.5)`` on cosine; the label of an
embedding is its pair's concept.
"""
from __future__ import annotations

from typing import Tuple

import torch

from .config import TrainConfig


class SelfAlignmentLoss(torch.nn.Module):
    """Online triplet mining + Multi-Similarity loss over the 2 × B embeddings of a batch."""

    def __init__(self, config: TrainConfig) -> None:
        super().__init__()
        from pytorch_metric_learning import losses, miners

        self.miner = (miners.TripletMarginMiner(margin=config.miner_margin, type_of_triplets=config.type_of_triplets)
                      if config.use_miner else None)
        self.loss = losses.MultiSimilarityLoss(alpha=config.ms_alpha, beta=config.ms_beta, base=config.ms_base)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> Tuple[torch.Tensor, float]:
        """(loss, fraction of the batch's valid triplets that the miner kept)."""
        if embeddings.shape[0] == 0:
            raise ValueError("empty batch: no embeddings to align")
        embeddings = embeddings.float()
        if self.miner is None:
            return self.loss(embeddings, labels), 1.0
        mined = self.miner(embeddings, labels)
        total = valid_triplets(labels)
        return self.loss(embeddings, labels, mined), (len(mined[0]) / total if total else 0.0)


def valid_triplets(labels: torch.Tensor) -> int:
    """Number of (anchor, positive, negative) index triplets a batch with these labels has."""
    _, counts = torch.unique(labels, return_counts=True)
    n = labels.numel()
    return int(((counts * (counts - 1)) * (n - counts)).sum())
