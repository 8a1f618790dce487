"""Gradio demo of spacy-sapbert: ``python -m spacy_sapbert.demo`` or ``sapbert demo`` (one command, cli.py).

options.py holds what a user chooses, server.py starts it all, resources.py loads a pipeline (or
builds one from a model and a KB); inputs.py checks what the page sends, logic.py (Link text),
neighbours.py (Neighbours, Compare) and projection.py (the PCA picture) compute every view as plain
data over spaces.py's embedding spaces, plots.py draws the figures, app.py lays out the page,
guard.py keeps tracebacks out of it and request_guard.py refuses uploads and oversized requests;
nothing in ``spacy_sapbert`` imports this package.
"""
