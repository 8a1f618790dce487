"""``sapbert ner-dictionary``: what the training corpora's annotators tag nearly everywhere, and what they leave out.

It writes the ``dictionary_entities`` pipe's files: the patterns (:mod:`.dictionary`), the exclusions (the
wordings annotators seldom tag; by MeSH branch, :mod:`.branch_exclusions`; from another corpus's genes,
:mod:`.gene_exclusions`) and the KB names a DISEASE entity grows to.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from spacy_sapbert.errors import InputError, exit_on_input_error


def check_exclusion_sources(exclusions: Optional[Path], kb: Optional[Path], max_rate: float,
                            branch_trees: Optional[Path], branch_depth: int, gene_corpus: List[Path],
                            gene_min_count: int, gene_min_share: float) -> None:
    """Refuse an exclusion source without what it needs, before any corpus is read."""
    if exclusions is None:
        for given, flag in ((branch_trees, "--branch-trees"), (gene_corpus, "--gene-corpus")):
            if given:
                raise InputError("needs --exclusions, the file its exclusions go to", field=flag)
        return
    if not 0 < max_rate < 1:
        raise InputError(f"must be between 0 and 1, got {max_rate}", field="--max-rate")
    if branch_trees is not None:
        if kb is None or not kb.is_file():
            raise InputError("needs --exclusions and the linker's KB file (--kb)", field="--branch-trees")
        if not branch_trees.is_file():
            raise InputError("not a file", branch_trees, field="--branch-trees")
        if branch_depth < 1:
            raise InputError(f"must be 1 or more, got {branch_depth}", field="--branch-depth")
    if gene_corpus and gene_min_count < 1:
        raise InputError(f"must be 1 or more, got {gene_min_count}", field="--gene-min-count")
    if gene_corpus and not 0 < gene_min_share <= 1:
        raise InputError(f"must be above 0 and at most 1, got {gene_min_share}", field="--gene-min-share")


def ner_dictionary(
    corpora: List[Path] = typer.Argument(..., help="PubTator training files (never the files you evaluate on)."),
    output: Path = typer.Option(..., "--output", "-o", help="Patterns to write (JSONL, entity_ruler's token patterns; new unless --overwrite)."),
    pipeline: Path = typer.Option(None, help="Pipeline whose tokenizer counts the occurrences (default: the embedded one)."),
    min_rate: float = typer.Option(0.5, help="Keep a wording tagged at least this share of its free occurrences."),
    min_count: int = typer.Option(1, help="... and tagged at least this many times with one label (1 and 2 "
                                   "measured in docs/ner.md)."),
    exclusions: Optional[Path] = typer.Option(None, "--exclusions", help="Also write the wordings annotators "
                                              "seldom tag (the pipe removes NER entities that are exactly one) "
                                              "here (LABEL<TAB>wording lines; new unless --overwrite)."),
    max_rate: float = typer.Option(0.1, help="With --exclusions: a wording tagged with a label at under this "
                                   "share of its occurrences ..."),
    min_seen: int = typer.Option(3, help="... seen at least this many times (tagged or free)."),
    grow_names: Optional[Path] = typer.Option(None, "--grow-names", help="Also write the KB names of --grow-label "
                                              "that a NER entity inside one grows to (LABEL<TAB>tokens lines, gzip; new "
                                              "unless --overwrite); needs --kb."),
    kb: Optional[Path] = typer.Option(None, "--kb", help="With --grow-names or --branch-trees: the linker's KB (JSONL or JSONL.gz)."),
    grow_label: List[str] = typer.Option(["DISEASE"], "--grow-label", help="With --grow-names: a label whose "
                                         "entities grow (repeatable; its KB types from the pipeline's linker)."),
    branch_trees: Optional[Path] = typer.Option(None, "--branch-trees", help="With --exclusions and --kb: MeSH "
                                                "tree numbers (DescriptorUI<TAB>TreeNumber, .tsv or .tsv.gz); also "
                                                "exclude the KB names of --branch-label concepts that lie only in "
                                                "branches the annotators seldom tag (enzymes in BC5CDR)."),
    branch_label: List[str] = typer.Option(["CHEMICAL"], "--branch-label", help="With --branch-trees: a label "
                                           "whose KB names may be excluded by branch (repeatable; its KB types "
                                           "from the pipeline's linker)."),
    branch_min_seen: int = typer.Option(10, help="With --branch-trees: a branch whose names occur at least this "
                                        "often, tagged at under --max-rate of them."),
    branch_depth: int = typer.Option(2, help="With --branch-trees: a branch is a tree number cut to this many "
                                     "parts (D08.811: 2)."),
    gene_corpus: List[Path] = typer.Option([], "--gene-corpus", help="With --exclusions: a PubTator corpus that "
                                           "annotates genes (BioRED's files; repeatable); its gene wordings the "
                                           "training corpora seldom have as a gold mention become --gene-label "
                                           "exclusions."),
    gene_type: str = typer.Option("GeneOrGeneProduct", help="With --gene-corpus: its mention type for genes."),
    gene_label: str = typer.Option("CHEMICAL", help="With --gene-corpus: the label the gene wordings are excluded from."),
    gene_min_count: int = typer.Option(2, help="With --gene-corpus: a wording tagged as a gene at least this often ..."),
    gene_min_share: float = typer.Option(0.8, help="... and at least this share of its mentions there."),
    drop_pmids_of: List[Path] = typer.Option([], "--drop-pmids-of", help="With --gene-corpus: leave out its "
                                             "documents whose PMIDs are in this PubTator file (repeat: every dev "
                                             "and test file you report)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output (and --exclusions, --grow-names) "
                                   "when it exists."),
) -> None:
    """Wordings the annotators tag nearly everywhere, as patterns for the dictionary_entities pipe after the NER
    (with --exclusions, those they seldom tag, with --branch-trees the KB names of the MeSH branches they seldom
    tag, and with --gene-corpus another corpus's gene wordings; with --grow-names, the KB names entities grow to)."""
    import spacy

    from spacy_sapbert.default import DEFAULT_PIPELINE
    from spacy_sapbert.util.atomic import check_new_file

    from ..corpora import check_corpora_and_output
    from .dictionary import (annotated, annotator_exclusions, dictionary_patterns, linker_label_types,
                             write_exclusions, write_kb_grow_names, write_patterns)

    with exit_on_input_error():
        read = [kb, branch_trees, *gene_corpus, *drop_pmids_of]
        check_corpora_and_output(corpora, output, overwrite, read)
        written = [output]
        for extra, flag in ((exclusions, "--exclusions"), (grow_names, "--grow-names")):
            if extra is not None:
                check_new_file(extra, overwrite, [*corpora, *(p for p in read if p is not None), *written], option=flag)
                written.append(extra)
        if grow_names is not None and (kb is None or not kb.is_file()):
            raise InputError("--grow-names needs the linker's KB file", kb, field="--kb")
        check_exclusion_sources(exclusions, kb, max_rate, branch_trees, branch_depth, gene_corpus, gene_min_count,
                                gene_min_share)
        source = pipeline or DEFAULT_PIPELINE
        label_types = linker_label_types(Path(source), grow_label) if grow_names is not None else {}
        branch_types = linker_label_types(Path(source), branch_label, "--branch-label") if branch_trees else {}
        nlp = spacy.load(source, exclude=spacy.util.load_config(Path(source) / "config.cfg")["nlp"]["pipeline"])
        read = annotated(nlp, corpora)  # tokenised once for every list
        patterns, report = dictionary_patterns(nlp, corpora, min_rate=min_rate, min_count=min_count, read=read)
        write_patterns(output, patterns)
        if exclusions is not None:
            excluded, report["exclusions"] = annotator_exclusions(nlp, corpora, max_rate=max_rate,
                                                                  min_seen=min_seen, read=read)
            if branch_trees is not None:
                from spacy_sapbert.kb.knowledge_base import KnowledgeBase
                from spacy_sapbert.kb.sources.mesh import read_mesh_trees

                from .branch_exclusions import branch_exclusions

                by_branch, report["branch_exclusions"] = branch_exclusions(
                    read, KnowledgeBase.from_jsonl(kb), read_mesh_trees(branch_trees), branch_types, nlp.make_doc,
                    depth=branch_depth, min_seen=branch_min_seen, max_rate=max_rate)
                excluded = sorted(set(excluded) | set(by_branch))
            if gene_corpus:
                from .gene_exclusions import gene_exclusions, gene_wordings

                genes, counts = gene_wordings(gene_corpus, gene_type, nlp.make_doc, drop_pmids_of,
                                              min_count=gene_min_count, min_share=gene_min_share)
                by_gene, report["gene_exclusions"] = gene_exclusions(read, genes, gene_label, max_rate=max_rate)
                report["gene_exclusions"].update(counts)
                excluded = sorted(set(excluded) | set(by_gene))
            report["exclusions"]["exclusions"] = len(excluded)
            write_exclusions(exclusions, excluded)
        if grow_names is not None:
            report["grow_names"] = write_kb_grow_names(grow_names, kb, label_types, nlp.make_doc)
    typer.echo(json.dumps(report, indent=1))


def register(app: typer.Typer) -> None:
    """Add ``ner-dictionary`` to the ``sapbert`` app."""
    app.command("ner-dictionary")(ner_dictionary)


__all__ = ["check_exclusion_sources", "ner_dictionary", "register"]
