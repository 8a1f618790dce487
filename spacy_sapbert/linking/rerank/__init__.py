"""The optional context re-ranker: the cross-encoder model, its inputs and the stage over the dense top k."""
