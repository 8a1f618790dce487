"""``sapbert`` sub-commands that need the training extra: registered through the
``sapbert.cli`` entry point (see spacy_sapbert.cli)."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the training commands to the ``sapbert`` app."""
    # TRAINING-COMMANDS
    from .train_cli import register as register_training

    register_training(app)
    # EVALUATION-COMMANDS
    from .eval_cli import register as register_evaluation

    register_evaluation(app)
    # NER-COMMANDS
    from training.ner_cli import register as register_ner

    register_ner(app)
    # PACKAGE-COMMANDS
    from training.package_cli import register as register_package

    register_package(app)
    return None
