"""``sapbert`` sub-commands that need the training extra: registered through the
``sapbert.cli`` entry point (see spacy_sapbert.cli), so the linker package never imports them."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the training, evaluation, NER and packaging commands to the ``sapbert`` app."""
    from .corpus_select import register as register_corpus_select
    from .evaluation.cli import register as register_evaluation
    from .generative.cli import register as register_generative
    from .kb_mentions import register as register_kb_mentions
    from .ner.cli import register as register_ner
    from .package.cli import register as register_package
    from .rerank.cli import register as register_rerank
    from .selfalign.cli import register as register_training

    for add in (register_training, register_evaluation, register_ner, register_package, register_rerank,
                register_generative, register_kb_mentions, register_corpus_select):
        add(app)
