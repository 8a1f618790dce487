"""Corpus and query formats, read in one place: PubTator documents and BioSyn's data."""
