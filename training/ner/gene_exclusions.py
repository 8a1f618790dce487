"""Exclusions from another corpus's genes: wordings a gene-annotating corpus calls a gene or gene product.

BC5CDR's annotators leave most proteins and peptide hormones untagged ("insulin" is a gold chemical at none of
its 9 occurrences in BC5CDR dev), but these wordings are too rare in its training set for
:func:`~.dictionary.annotator_exclusions` to learn that ("glucagon", "adiponectin", "apoe" never occur there;
"insulin" twice), and the teacher's soft labels taught the NER to tag some of them. BioRED annotates genes and
gene products beside chemicals, in PubMed abstracts like BC5CDR's: "insulin", "glucagon", "adiponectin",
"nos", "apoe" are ``GeneOrGeneProduct`` there.

A wording (a mention's text as the pipeline's lower-case tokens) that the gene corpus tags with the gene type
at ``min_count`` or more of its mentions, and at ``min_share`` or more of all its mentions of any type there,
becomes an exclusion of ``label``, unless it is a gold mention at ``max_rate`` or more of its occurrences in the
training corpora that annotate ``label`` (:func:`~.dictionary.annotation_rates`: "angiotensin" and "calcitonin",
genes in BioRED, are chemicals in BC5CDR train and stay). The gene corpus's documents whose
PMIDs are in a held-out file are not read (BioRED shares 61 abstracts with BC5CDR dev).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from ..corpora import pmids, read_pubtator
from .dictionary import MIN_CHARACTERS, Annotated, annotation_rates

Wording = Tuple[str, ...]


def gene_wordings(corpora: Sequence[Path], gene_type: str, tokenize: Any, held_out: Sequence[Path] = (),
                  min_count: int = 2, min_share: float = 0.8) -> Tuple[List[Wording], Dict[str, int]]:
    """The wordings ``corpora`` (PubTator) tag as ``gene_type`` at ``min_count`` or more of their mentions and
    at ``min_share`` or more of all their mentions, and counts of what was read; documents whose PMIDs are in
    ``held_out`` are left out. IDs are not read (BioRED's genes carry NCBI Gene numbers)."""
    drop = pmids(held_out)
    types: Dict[Wording, Counter] = defaultdict(Counter)
    documents = dropped = 0
    for path in corpora:
        for document in read_pubtator(path, parse_ids=False):
            if document.pmid in drop:
                dropped += 1
                continue
            documents += 1
            for mention in document.mentions:
                tokens = tuple(t.lower_ for t in tokenize(mention.text) if not t.is_space)
                if tokens:
                    types[tokens][mention.type] += 1
    genes = sorted(tokens for tokens, counts in types.items()
                   if counts[gene_type] >= min_count and counts[gene_type] >= min_share * sum(counts.values()))
    return genes, {"documents": documents, "documents_dropped_held_out": dropped, "wordings": len(types),
                   "gene_wordings": len(genes)}


def gene_exclusions(read: Annotated, genes: Sequence[Wording], label: str, max_rate: float = 0.1
                    ) -> Tuple[List[Tuple[str, str]], Dict[str, object]]:
    """(label, wording) exclusions of the gene wordings (:func:`gene_wordings`) that the training corpora
    (``read``: :func:`~.dictionary.annotated`) that annotate ``label`` have as a gold mention at under ``max_rate``
    of their occurrences, and
    a report naming the gene wordings kept because the annotators do tag them."""
    docs, _ = read
    plausible = [tokens for tokens in genes
                 if len("".join(tokens)) >= MIN_CHARACTERS and any(ch.isalpha() for ch in "".join(tokens))]
    wording = {tokens: f"{label}\t{' '.join(tokens)}" for tokens in plausible}
    rates = annotation_rates(docs, {wording[tokens]: (label, tokens) for tokens in plausible})
    excluded, tagged = [], []
    for tokens in plausible:
        hits, occurrences = rates[wording[tokens]]
        if hits < max_rate * max(occurrences, 1):
            excluded.append((label, " ".join(tokens)))
        else:
            tagged.append(" ".join(tokens))
    report = {"label": label, "max_rate": max_rate, "gene_wordings": len(genes), "exclusions": len(excluded),
              "tagged_by_annotators": sorted(tagged)}
    return sorted(excluded), report


__all__ = ["gene_wordings", "gene_exclusions"]
