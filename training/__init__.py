"""Training, evaluation, NER and packaging; installed as ``spacy_sapbert.training``."""
