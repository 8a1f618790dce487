"""`sapbert ner-dictionary`: wordings annotators tag nearly everywhere become entity_ruler patterns."""
from __future__ import annotations

import json

import spacy

from spacy_sapbert.training.ner.dictionary import dictionary_patterns, write_patterns


def _pubtator(path, docs, ids=None):
    """docs: [(pmid, text, [(mention, type), ...])]; each mention's first free occurrence is annotated, with the ID
    ``ids`` gives its type (D000001 otherwise)."""
    lines = []
    for pmid, text, mentions in docs:
        lines += [f"{pmid}|t|{text}", f"{pmid}|a|"]
        taken = 0
        for mention, kind in mentions:
            start = text.index(mention, taken)
            taken = start + len(mention)
            lines.append(f"{pmid}\t{start}\t{taken}\t{mention}\t{kind}\t{(ids or {}).get(kind, 'D000001')}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_rates_count_free_occurrences_in_corpora_that_annotate_the_label(tmp_path):
    cdr = _pubtator(tmp_path / "cdr.txt", [
        ("1", "Oxygen was given. Oxygen helped. Lead was found in lead pipes.", [
            ("Oxygen", "Chemical"), ("Oxygen", "Chemical"), ("Lead", "Chemical")]),
        ("2", "Lead and lead again, with heart failure and oxygen.", [
            ("Lead", "Chemical"), ("heart failure", "Disease"), ("oxygen", "Chemical")]),
        ("3", "Acute heart failure was seen.", [("Acute heart failure", "Disease")]),
    ])
    # a disease-only corpus: its untagged "oxygen" says nothing about chemicals
    ncbi = _pubtator(tmp_path / "ncbi.txt", [
        ("4", "Oxygen and oxygen; heart failure.", [("heart failure", "SpecificDisease")])])
    nlp = spacy.blank("en")
    patterns, report = dictionary_patterns(nlp, [cdr, ncbi], min_rate=0.5, min_count=2)
    found = {" ".join(t["LOWER"] for t in p["pattern"]): p["label"] for p in patterns}
    # oxygen: 3 of 3 in CDR; lead: 2 tagged, 2 free (50%); heart failure: 2 of 2 free ones (inside
    # "Acute heart failure" counts neither way)
    assert found == {"oxygen": "CHEMICAL", "lead": "CHEMICAL", "heart failure": "DISEASE"}
    strict, _ = dictionary_patterns(nlp, [cdr, ncbi], min_rate=0.6, min_count=2)
    assert "lead" not in {" ".join(t["LOWER"] for t in p["pattern"]) for p in strict}
    assert report["patterns"] == 3 and report["per_label"] == {"CHEMICAL": 2, "DISEASE": 1}
    # the ruler reads the written file as token patterns: nothing runs before it when it loads
    write_patterns(tmp_path / "patterns.jsonl", patterns)
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([json.loads(line) for line in (tmp_path / "patterns.jsonl").open()])
    assert [(e.text, e.label_) for e in nlp("OXYGEN after heart failure").ents] == [
        ("OXYGEN", "CHEMICAL"), ("heart failure", "DISEASE")]


def test_exclusions_are_frequent_wordings_annotators_seldom_tag_with_a_label(tmp_path):
    from spacy_sapbert.training.ner.dictionary import annotator_exclusions

    # CDR: "acute" occurs 4 times, never tagged; "lead" is tagged as a chemical once in 4 (25%); "fever"
    # as a disease in 2 of 4 occurrences (NCBI's counts too). NCBI annotates no chemicals.
    cdr = _pubtator(tmp_path / "cdr.txt", [
        ("1", "Acute fever. Acute pain with lead. The acute phase; lead and lead.", [("lead", "Chemical")]),
        ("2", "An acute fever with lead in the fever clinic.", [("fever", "Disease")]),
    ])
    ncbi = _pubtator(tmp_path / "ncbi.txt", [("3", "Oxygen, oxygen and oxygen for the fever.", [("fever", "Disease")])])
    nlp = spacy.blank("en")
    patterns, report = annotator_exclusions(nlp, [cdr, ncbi], max_rate=0.1, min_seen=3)
    found = set(patterns)
    assert ("DISEASE", "acute") in found and ("CHEMICAL", "acute") in found
    assert ("CHEMICAL", "lead") not in found and ("DISEASE", "lead") in found  # tagged as a chemical only
    assert ("DISEASE", "fever") not in found and ("CHEMICAL", "fever") not in found  # 2 of 4; seen twice
    assert ("CHEMICAL", "oxygen") not in found  # NCBI annotates no chemicals: its oxygen says nothing
    assert ("DISEASE", "oxygen") in found
    # no stop word or punctuation at an edge, three characters at least, a letter
    assert not any(w.split(" ")[0] in nlp.Defaults.stop_words or w.endswith(";") or len(w.replace(" ", "")) < 3
                   for _, w in found)
    assert ("DISEASE", "acute fever") not in found  # seen once (the other overlaps a gold span)
    assert report["exclusions"] == len(patterns) and report["max_rate"] == 0.1


def test_grow_label_types_come_from_the_linker_or_else_its_factory_default(tmp_path):
    import pytest

    from spacy_sapbert.errors import InputError
    from spacy_sapbert.training.ner.dictionary import linker_label_types

    spacy.blank("en").to_disk(tmp_path / "no-linker")
    assert linker_label_types(tmp_path / "no-linker", ["DISEASE"]) == {"DISEASE": ["Disease", "Phenotype"]}
    with pytest.raises(InputError, match="GENE"):
        linker_label_types(tmp_path / "no-linker", ["GENE"])
