"""The ``sapbert`` command line (typer).

Commands of the linker package live here; packages that build on it (``training``,
``demo``) add theirs through the ``sapbert.cli`` entry-point group, each entry a
``register(app)`` function, so this package never imports them.
"""
from __future__ import annotations

import logging
from importlib.metadata import entry_points

import typer

app = typer.Typer(help="Biomedical entity linking with self-aligned embeddings.", no_args_is_help=True)
kb_app = typer.Typer(help="Build and inspect knowledge bases.", no_args_is_help=True)
index_app = typer.Typer(help="Build FAISS name indexes.", no_args_is_help=True)
app.add_typer(kb_app, name="kb")
app.add_typer(index_app, name="index")

logger = logging.getLogger(__name__)


# --- kb commands (spacy_sapbert.sources) ------------------------------------------
# KB-COMMANDS


# --- index and link commands (spacy_sapbert.index / linker) -----------------------
# LINK-COMMANDS


def _register_plugins() -> None:
    for ep in entry_points(group="sapbert.cli"):
        try:
            register = ep.load()
        except ImportError as err:  # an optional extra (train, demo) is not installed
            logger.debug("sapbert CLI plugin %s not available: %s", ep.name, err)
            continue
        register(app)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    _register_plugins()
    app()


if __name__ == "__main__":
    main()
