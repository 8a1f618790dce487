"""``sapbert demo``: registered through the ``sapbert.cli`` entry point."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    # DEMO-COMMANDS
    return None
