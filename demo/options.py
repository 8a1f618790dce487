"""What a user chooses when starting the demo, with its defaults: the one record that both the
command line (:mod:`demo.cli`) and Python callers (``serve(DemoOptions(...))``) fill in.

Kept free of Gradio and spaCy imports, so that ``sapbert --help`` can list the demo command
without loading either.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

DEFAULT_HOST = "127.0.0.1"
"""This machine only: the demo is reachable from elsewhere only when a user asks (``--host``)."""


@dataclass
class DemoOptions:
    """What to serve (``pipeline``; or ``model`` + ``kb``; or nothing: the embedded default
    pipeline) and how (``host``, ``port``, ``share``, ``device``)."""

    pipeline: Optional[str] = None
    model: Optional[str] = None
    kb: Optional[Path] = None
    index: Optional[Path] = None
    ner: Optional[Path] = None
    compare_model: Optional[str] = None
    compare_index: Optional[Path] = None
    host: str = DEFAULT_HOST
    port: Optional[int] = None
    share: bool = False
    device: str = "auto"
