"""``python -m spacy_sapbert.demo``: serve the Gradio demo (the same command as ``sapbert demo``;
see ``python -m spacy_sapbert.demo --help``)."""
from .cli import main

main()
