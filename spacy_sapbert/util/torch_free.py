"""A process without torch: what ``sapbert annotate --onnx`` and the benchmark's ``onnx`` variant run in.

thinc (spaCy's machine-learning library) imports torch whenever it is installed, so ``import spacy`` alone costs
torch's ~220 MB of RSS even when every model runs on ONNX Runtime (:mod:`spacy_sapbert.encoding.onnx_bert`).
:func:`block_torch`, called before spaCy is imported, makes ``import torch`` fail in this process as it would in
an install without it: thinc then runs without torch, and the pipes' ``auto`` backends choose ``onnx``.
"""
from __future__ import annotations

import importlib.abc
import logging
import sys
from typing import Any, Optional, Sequence

from spacy_sapbert.errors import TorchBlocked

logger = logging.getLogger(__name__)

BLOCKED = "torch"


class _NoTorch(importlib.abc.MetaPathFinder):
    """Finds ``torch`` and its submodules first, to refuse them."""

    def find_spec(self, name: str, path: Optional[Sequence[str]] = None, target: Any = None) -> None:
        if name == BLOCKED or name.startswith(BLOCKED + "."):
            raise TorchBlocked(f"torch is not imported in this process (spacy_sapbert.util.torch_free): {name}",
                               name=name)
        return None


def block_torch() -> bool:
    """Make ``import torch`` fail from now on in this process; False (and a warning) when torch is imported
    already, since nothing is then saved, and when it is blocked already."""
    if torch_blocked():
        return False
    if BLOCKED in sys.modules:
        logger.warning("torch was imported before it could be blocked: its memory stays in this process")
        return False
    sys.meta_path.insert(0, _NoTorch())
    return True


def torch_blocked() -> bool:
    """Whether :func:`block_torch` ran in this process."""
    return any(isinstance(finder, _NoTorch) for finder in sys.meta_path)


__all__ = ["block_torch", "torch_blocked"]
