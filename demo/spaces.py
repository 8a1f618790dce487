"""An embedding space the demo searches (encoder + the index of a KB's names + the KB), and how
every view names a concept and shows a score, so the tabs agree with each other."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Protocol, Sequence, Tuple

import numpy as np

from spacy_sapbert.kb.knowledge_base import KnowledgeBase


class EncoderLike(Protocol):
    def encode(self, texts: Sequence[str], batch_size: Optional[int] = None,
               show_progress: bool = False) -> np.ndarray: ...


class IndexLike(Protocol):
    names: List[str]
    concept_ids: List[str]

    def search(self, vectors: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]: ...


@dataclass
class EmbeddingSpace:
    """An encoder, the index of the KB's names it built, and the KB: one space to search."""

    label: str
    encoder: EncoderLike
    index: IndexLike
    kb: KnowledgeBase


def canonical_name(kb: KnowledgeBase, concept_id: str) -> str:
    """The concept's canonical name ('' when the KB lacks it); equivalent and joined IDs are resolved."""
    concept = kb.get(concept_id) or kb.resolve(concept_id)
    return concept.canonical_name if concept is not None else ""


def score_text(score: float) -> str:
    """Scores as fixed three-decimal text, so a column of them lines up and 1.000 reads as a score."""
    return f"{score:.3f}"
