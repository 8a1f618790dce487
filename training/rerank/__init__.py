"""Training the context re-ranker (:mod:`spacy_sapbert.linking.rerank.model`): data with the dense first stage's
candidates (``data``), the cross-encoder (``model``), the listwise loss (``loss``), the loop
(``trainer``), dev evaluation and calibration (``evaluate``) and the commands (``cli``)."""
