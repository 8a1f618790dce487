"""`sapbert ner-dictionary --gene-corpus`: another corpus's gene wordings as exclusions of a label."""
from __future__ import annotations

import json

import spacy

from spacy_sapbert.training.ner.dictionary import annotated
from spacy_sapbert.training.ner.gene_exclusions import gene_exclusions, gene_wordings

from .test_dictionary import _pubtator


def _gene_corpus(path, docs):
    """BioRED-style: genes carry NCBI Gene numbers as IDs, which the gene rule does not parse."""
    return _pubtator(path, docs, ids={"GeneOrGeneProduct": "3630"})


def test_gene_wordings_need_the_count_and_share_and_skip_held_out_documents(tmp_path):
    genes = _gene_corpus(tmp_path / "biored.txt", [
        ("1", "Insulin and glucagon; angiotensin II and heparin.", [
            ("Insulin", "GeneOrGeneProduct"), ("glucagon", "GeneOrGeneProduct"),
            ("angiotensin II", "GeneOrGeneProduct"), ("heparin", "ChemicalEntity")]),
        ("2", "insulin, heparin and Glucagon.", [
            ("insulin", "GeneOrGeneProduct"), ("heparin", "GeneOrGeneProduct"), ("Glucagon", "GeneOrGeneProduct")]),
        ("3", "Adiponectin and adiponectin.", [
            ("Adiponectin", "GeneOrGeneProduct"), ("adiponectin", "GeneOrGeneProduct")]),
    ])
    held_out = _pubtator(tmp_path / "dev.txt", [("3", "Adiponectin.", [])])
    nlp = spacy.blank("en")
    found, counts = gene_wordings([genes], "GeneOrGeneProduct", nlp.make_doc, [held_out], min_count=2, min_share=0.8)
    # insulin and glucagon twice each, in any case; heparin a gene at 1 of 2 (50%); angiotensin II once;
    # adiponectin only in a held-out document
    assert found == [("glucagon",), ("insulin",)]
    assert counts == {"documents": 2, "documents_dropped_held_out": 1, "wordings": 4, "gene_wordings": 2}
    found, _ = gene_wordings([genes], "GeneOrGeneProduct", nlp.make_doc, min_count=1, min_share=0.5)
    assert ("heparin",) in found and ("angiotensin", "ii") in found and ("adiponectin",) in found


def test_gene_wordings_the_annotators_tag_stay(tmp_path):
    cdr = _pubtator(tmp_path / "cdr.txt", [
        ("1", "Angiotensin raised pressure; angiotensin again; insulin was given.", [("Angiotensin", "Chemical")]),
        ("2", "Fever after insulin.", [("Fever", "Disease")]),
    ])
    nlp = spacy.blank("en")
    genes = [("angiotensin",), ("insulin",), ("glucagon",), ("il",), ("-", "2")]
    excluded, report = gene_exclusions(annotated(nlp, [cdr]), genes, "CHEMICAL", max_rate=0.3)
    # angiotensin: 1 of 2 tagged (50%) stays; insulin 0 of 2 and glucagon never seen are excluded;
    # "il" is shorter than a wording the dictionary counts, "- 2" has no letter
    assert excluded == [("CHEMICAL", "glucagon"), ("CHEMICAL", "insulin")]
    assert report["tagged_by_annotators"] == ["angiotensin"] and report["exclusions"] == 2
    assert report["gene_wordings"] == 5


def test_ner_dictionary_adds_the_gene_exclusions_and_refuses_them_without_an_exclusions_file(tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.pipes.dictionary import read_exclusions
    from spacy_sapbert.training.cli import register

    register(app)
    train = _pubtator(tmp_path / "train.txt", [
        ("1", "Calcitonin and calcitonin with insulin in fever.", [("Calcitonin", "Chemical"), ("calcitonin", "Chemical"),
                                                                     ("fever", "Disease")])])
    genes = _gene_corpus(tmp_path / "biored.txt", [
        ("7", "Insulin, calcitonin and glucagon.", [("Insulin", "GeneOrGeneProduct"), ("calcitonin", "GeneOrGeneProduct"),
                                                   ("glucagon", "GeneOrGeneProduct")]),
        ("8", "insulin, calcitonin and Glucagon.", [("insulin", "GeneOrGeneProduct"), ("calcitonin", "GeneOrGeneProduct"),
                                                   ("Glucagon", "GeneOrGeneProduct")]),
        ("9", "Insulin and glucagon.", [("Insulin", "GeneOrGeneProduct"), ("glucagon", "GeneOrGeneProduct")]),
    ])
    dev = _pubtator(tmp_path / "dev.txt", [("9", "Insulin.", [])])
    patterns = tmp_path / "p.jsonl"
    refused = CliRunner().invoke(app, ["ner-dictionary", str(train), "-o", str(patterns), "--gene-corpus", str(genes)])
    assert refused.exit_code == 2 and "--gene-corpus" in refused.output and not patterns.exists()
    refused = CliRunner().invoke(app, ["ner-dictionary", str(train), "-o", str(patterns), "--exclusions",
                                       str(tmp_path / "x.tsv"), "--gene-corpus", str(genes), "--gene-min-share", "0"])
    assert refused.exit_code == 2 and "--gene-min-share" in refused.output and not patterns.exists()
    exclusions = tmp_path / "exclusions.tsv"
    done = CliRunner().invoke(app, ["ner-dictionary", str(train), "-o", str(patterns), "--exclusions", str(exclusions),
                                    "--gene-corpus", str(genes), "--drop-pmids-of", str(dev)])
    assert done.exit_code == 0, done.output
    written = set(read_exclusions(exclusions))
    # calcitonin is a gene in the gene corpus but a chemical in training: it stays
    assert ("CHEMICAL", "insulin") in written and ("CHEMICAL", "glucagon") in written
    assert ("CHEMICAL", "calcitonin") not in written
    report = json.loads(done.stdout)["gene_exclusions"]
    assert report["documents_dropped_held_out"] == 1 and report["tagged_by_annotators"] == ["calcitonin"]
    assert json.loads(done.stdout)["exclusions"]["exclusions"] == len(written)
