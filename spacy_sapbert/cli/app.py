"""The ``sapbert`` typer app: its command tree, its plugins and its entry point.

The linker package's own commands live in the sibling modules (kb, index, link, annotate) as
plain functions; this module only puts them in the tree. Packages that build on the linker
(``training``, ``demo``) add theirs through the ``sapbert.cli`` entry-point group, each entry a
``register(app)`` function, so this package never imports them.
"""
from __future__ import annotations

import logging
from importlib.metadata import entry_points

import typer

from spacy_sapbert.cli.annotate import annotate_command
from spacy_sapbert.cli.index import index_build
from spacy_sapbert.cli.kb import kb_add_names, kb_build, kb_exact_names, kb_stats
from spacy_sapbert.cli.link import link
from spacy_sapbert.errors import exit_on_input_error

logger = logging.getLogger(__name__)

app = typer.Typer(help="Biomedical entity linking with self-aligned embeddings.", no_args_is_help=True)
kb_app = typer.Typer(help="Build and inspect knowledge bases.", no_args_is_help=True)
index_app = typer.Typer(help="Build FAISS name indexes.", no_args_is_help=True)
app.add_typer(kb_app, name="kb")
app.add_typer(index_app, name="index")
kb_app.command("build")(kb_build)
kb_app.command("stats")(kb_stats)
kb_app.command("add-names")(kb_add_names)
kb_app.command("exact-names")(kb_exact_names)
index_app.command("build")(index_build)
app.command("link")(link)
app.command("annotate")(annotate_command)


def configure_logging() -> None:
    """INFO to stderr for every command-line entry point (``sapbert``, ``python -m spacy_sapbert.demo``)."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # faiss.loader reports at INFO each optimised build it could not load before it finds one
    logging.getLogger("faiss").setLevel(logging.WARNING)


def register_plugins(target: typer.Typer) -> None:
    """Add the commands of every installed ``sapbert.cli`` plugin; a plugin whose optional extra
    (train, demo) is missing is left out rather than breaking the whole command line."""
    for ep in entry_points(group="sapbert.cli"):
        try:
            register = ep.load()
        except ImportError as err:
            logger.debug("sapbert CLI plugin %s not available: %s", ep.name, err)
            continue
        register(target)


def main() -> None:
    """The ``sapbert`` console script (and ``python -m spacy_sapbert.cli``)."""
    configure_logging()
    register_plugins(app)
    with exit_on_input_error():  # also around what a command does outside its own guard (--show, plugins)
        app()
