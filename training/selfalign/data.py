"""A pairs file as the trainer consumes it: the pairs, a concept label per pair, and its provenance.

The label of a name is its pair's concept, numbered in order of first appearance, so that
the loss can tell positives (same label) from negatives within a batch; the header and the
fingerprint go into checkpoints and the model's ``sapbert.json``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union

import torch

from ..common.fingerprint import file_fingerprint
from .pairs import Pair, read_header, read_pairs


@dataclass
class TrainingPairs:
    """The pairs of one file with their concept labels; :meth:`batch` gives what a forward pass needs."""

    path: Path
    pairs: List[Pair]
    labels: torch.Tensor
    """Concept number of each pair."""
    n_concepts: int
    header: Dict[str, str]
    fingerprint: str

    @classmethod
    def load(cls, path: Union[str, Path]) -> "TrainingPairs":
        path = Path(path)
        pairs = read_pairs(path)
        header = read_header(path)
        fingerprint = file_fingerprint(path)
        concept_index: Dict[str, int] = {}
        labels = torch.tensor([concept_index.setdefault(p.concept_id, len(concept_index)) for p in pairs])
        return cls(path, pairs, labels, len(concept_index), header, fingerprint)

    def __len__(self) -> int:
        return len(self.pairs)

    def batch(self, indices: Sequence[int]) -> Tuple[List[str], torch.Tensor]:
        """(names, labels) of a micro-batch: both sides of every pair (all first names, then all
        second names, encoded in one forward pass), and the pairs' labels twice in that order."""
        if not indices:
            raise ValueError("empty batch: no pairs")
        pairs = [self.pairs[i] for i in indices]
        labels = self.labels[list(indices)]
        return [p.name_a for p in pairs] + [p.name_b for p in pairs], torch.cat([labels, labels])
