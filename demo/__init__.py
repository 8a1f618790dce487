"""Gradio demo of spacy-sapbert: ``python -m demo`` or ``sapbert demo``.

resources.py loads a pipeline (or builds one from a model and a KB), logic.py computes every
view as plain data, plots.py draws the figures, app.py lays out the page; nothing in
``spacy_sapbert`` imports this package.
"""
