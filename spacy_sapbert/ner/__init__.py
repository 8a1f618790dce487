"""The transformer NER (``sapbert_ner`` pipe): a fine-tuned MiniLM tagging CHEMICAL/DISEASE tokens,
with knowledge-base names as features. Split as: tags (BIO scheme, decoding), gazetteer (KB-name
features), windows (word-piece windows), model (the torch module and its files), tagging (the
inference path), component (the spaCy pipe). Nothing is imported here, so importing the package
costs nothing."""
