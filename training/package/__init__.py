"""Packaging the embedded default pipeline and swapping its KB or NER."""
