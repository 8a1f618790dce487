"""The FAISS name index: its kinds, its files, exact re-scoring and the sparse character n-grams."""
