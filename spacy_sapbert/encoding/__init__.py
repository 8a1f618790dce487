"""Text to vectors: the encoder, its compact BERT, backends, pooling and model folders."""
