"""The NER model: corpora → DocBin, static vectors, NER and end-to-end scores."""
