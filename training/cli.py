"""``sapbert`` sub-commands that need the training extra: registered through the
``sapbert.cli`` entry point (see spacy_sapbert.cli)."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the training commands to the ``sapbert`` app."""
    # TRAINING-COMMANDS
    # EVALUATION-COMMANDS
    # NER-COMMANDS
    return None
