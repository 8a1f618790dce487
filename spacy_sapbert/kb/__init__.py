"""Knowledge bases: the concept record, the KB and its files, name normalisation, IDs, the gold rule."""
