"""The dense linker as an evaluated system: the code path users run.

Encoder → NameIndex (flat, exact) → :class:`spacy_sapbert.linking.linker.Linker` (best name per
concept), with an encoder that remembers its vectors, since the dictionaries of one run
share most names.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.encoding.modelfiles import MINILM_ALIASES

from .systems import LinkingSystem, Ranked


class CachingEncoder(Encoder):
    """An :class:`Encoder` that remembers every vector it made.

    The dictionaries of one evaluation run share most names (the KB; KB plus training
    mentions), so each name is encoded once per run instead of once per index.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._vectors: Dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], batch_size: Optional[int] = None,
               show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            vectors = super().encode(missing, batch_size=batch_size, show_progress=show_progress)
            self._vectors.update(zip(missing, vectors))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])


class DenseLinker(LinkingSystem):
    """The product's own path: Encoder → NameIndex (flat, exact) → Linker (best name per concept)."""

    kind = "dense"

    def __init__(self, model: Union[str, Path], pooling: Optional[str] = None, device: str = "auto",
                 batch_size: int = 256, label: Optional[str] = None, max_k: int = 5,
                 precision: str = "float32") -> None:
        super().__init__()
        self.model = str(model)
        self.encoder = CachingEncoder(model, pooling=pooling, device=device, batch_size=batch_size, dtype=precision)
        self.max_k = max_k
        self.name = label or f"{_model_label(self.model)} ({self.encoder.pooling} pooling)"

    def _fit(self, dictionary: KnowledgeBase) -> None:
        from spacy_sapbert.linking.linker import Linker

        self._linker = Linker(self.encoder, dictionary, max_entities_per_mention=self.max_k, show_progress=True)

    @property
    def linker(self) -> Any:
        """The :class:`spacy_sapbert.linking.linker.Linker` over the prepared dictionary (second stages read its candidates)."""
        if not hasattr(self, "_linker"):
            raise RuntimeError(f"{self.name}: call prepare(dictionary) first")
        return self._linker

    def _rank(self, queries: List[str], k: int) -> Ranked:
        if k > self.max_k:
            raise InputError(f"this system was set up for k <= {self.max_k}, got {k}", field="k")
        return [[cid for cid, _ in found[:k]] for found in self._linker.link(queries)]

    def describe(self) -> Dict[str, Any]:
        return dict(super().describe(), model=self.model, pooling=self.encoder.pooling,
                    max_length=self.encoder.max_length, fingerprint=self.encoder.fingerprint,
                    device=self.encoder.device, precision=self.encoder.dtype,
                    linker_k=self._linker.k if hasattr(self, "_linker") else None)


def _model_label(model: str) -> str:
    """A short system name for the results table: the folder's name, or the MiniLM model's usual name."""
    text = model.rstrip("/")
    if text.lower() in MINILM_ALIASES:
        return "all-MiniLM-L6-v2"
    return Path(text).name or text

