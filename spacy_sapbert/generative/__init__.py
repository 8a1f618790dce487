"""Generative linking (GenBioEL, Yuan et al. 2022): a seq2seq model writes ``mention is name``
for a marked mention in its context, its decoding held to the KB's names by a prefix tree.

:mod:`.trie` is the prefix tree over the token ids of every KB name; :mod:`.seq2seq` the
encoder-decoder (warm-started from a BERT folder on both sides), its inputs, constrained
beam search with transformers' ``generate`` and teacher-forced scoring of given names.
Training lives in ``spacy_sapbert.training.generative``.
"""

CONTEXT_CHARS = 160
"""Characters of the abstract kept on each side of a mention (the encoder then keeps ``max_context`` tokens):
one rule for training samples, evaluation and both generative pipes. Here, not in :mod:`.seq2seq`, so that
registering a pipe or stage does not import torch."""
