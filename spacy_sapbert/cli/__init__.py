"""The ``sapbert`` command line (typer): ``app`` is the command tree, ``main`` the console script.

One module per job: app (the tree, plugins, logging), options (options several commands share),
kb, index, link and annotate (the commands), pipelines (loading the pipeline a command names).
"""
from spacy_sapbert.cli.app import app, main

__all__ = ["app", "main"]
