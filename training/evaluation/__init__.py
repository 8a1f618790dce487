"""Evaluation: BioSyn-format and PubTator queries, Acc@k as SapBERT scores it, baselines, reports."""
