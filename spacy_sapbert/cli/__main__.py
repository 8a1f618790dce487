"""``python -m spacy_sapbert.cli``: the same as the ``sapbert`` console script."""
from .app import main

main()
