"""The training loop parts that self-alignment, rerank, generative and NER training share."""
