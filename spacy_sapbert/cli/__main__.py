"""``python -m spacy_sapbert.cli``: the same as the ``sapbert`` console script."""
from spacy_sapbert.cli.app import main

main()
