"""`sapbert ner-dictionary --branch-trees`: the KB names of MeSH branches the annotators leave untagged."""
from __future__ import annotations

import spacy

from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.training.ner.branch_exclusions import branch_exclusions, branches_of
from spacy_sapbert.training.ner.dictionary import annotated

from .test_dictionary import _pubtator


def test_names_lying_only_in_a_branch_the_annotators_leave_untagged_are_excluded(tmp_path):
    # Enzymes (D08.811): "nitric oxide synthase" 3 times untagged, "catalase" once tagged ("lactase" counts for no
    # branch: a record without tree numbers has the name too); insulin's branches: 2 of 3 tagged
    cdr = _pubtator(tmp_path / "cdr.txt", [
        ("1", "Nitric oxide synthase and insulin. Nitric oxide synthase rose; insulin fell; catalase.", [
            ("insulin", "Chemical"), ("catalase", "Chemical")]),
        ("2", "Lactase, nitric oxide synthase and insulin in fever; lactase again.", [
            ("insulin", "Chemical"), ("fever", "Disease")]),
    ])
    kb = KnowledgeBase([
        Concept("D1", "Acetylglucosaminidase", ["N-acetyl-beta-D-glucosaminidase"], types=["Chemical"]),
        Concept("D2", "Nitric Oxide Synthase", types=["Chemical"]),
        Concept("D3", "Insulin", types=["Chemical"]),
        Concept("D4", "Lactase", types=["Chemical"]),
        Concept("C1", "lactase", types=["Chemical"]),  # a supplementary record: no tree numbers
        Concept("D5", "Catalase", types=["Chemical"]),
        Concept("D6", "Fever", types=["Disease"]),
    ])
    trees = {"D1": ["D08.811.277"], "D2": ["D08.811.682"], "D3": ["D06.472.699", "D12.644.548"],
             "D4": ["D08.811.277.450"], "D5": ["D08.811.682.130"], "D6": ["C23.888.119"]}
    nlp = spacy.blank("en")
    excluded, report = branch_exclusions(annotated(nlp, [cdr]), kb, trees, {"CHEMICAL": ["Chemical"]},
                                         nlp.make_doc, depth=2, min_seen=3, max_rate=0.3)
    words = lambda text: " ".join(t.lower_ for t in nlp.make_doc(text))  # noqa: E731
    # the enzyme branch: 1 tagged of 4 occurrences (25% < 30%); a name never seen in training is excluded too
    assert report["branches_left_out"] == {"CHEMICAL D08.811": [1, 4]}
    assert ("CHEMICAL", words("N-acetyl-beta-D-glucosaminidase")) in excluded
    assert ("CHEMICAL", "nitric oxide synthase") in excluded and ("CHEMICAL", "acetylglucosaminidase") in excluded
    assert ("CHEMICAL", "insulin") not in excluded  # its branches are tagged at 2 of 3
    assert ("CHEMICAL", "catalase") not in excluded  # tagged at 1 of its 1 occurrence itself
    assert ("CHEMICAL", "lactase") not in excluded  # a record without tree numbers has the name too
    assert not any(label != "CHEMICAL" for label, _ in excluded)  # only the labels asked for
    assert report["exclusions"] == len(excluded) == 3
    assert branches_of(["D08.811.277", "D12.644"], 2) == {"D08.811", "D12.644"}


def test_ner_dictionary_adds_the_branch_exclusions_and_refuses_them_without_a_kb(tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.pipes.dictionary import read_exclusions
    from spacy_sapbert.training.cli import register

    register(app)
    train = _pubtator(tmp_path / "train.txt", [
        ("1", "Nitric oxide synthase rose and nitric oxide synthase fell; insulin.", [("insulin", "Chemical")]),
        ("2", "Nitric oxide synthase with insulin in fever.", [("insulin", "Chemical"), ("fever", "Disease")])])
    kb = tmp_path / "kb.jsonl"
    KnowledgeBase([Concept("D000118", "Acetylglucosaminidase", ["N-acetyl-beta-D-glucosaminidase"], types=["Chemical"]),
                   Concept("D009239", "Nitric Oxide Synthase", types=["Chemical"]),
                   Concept("D007328", "Insulin", types=["Chemical"])]).to_jsonl(kb)
    trees = tmp_path / "trees.tsv"
    trees.write_text("DescriptorUI\tTreeNumber\nD000118\tD08.811.277.450\nD009239\tD08.811.682.608\n"
                     "D007328\tD06.472.699.587\n", encoding="utf-8")
    refused = CliRunner().invoke(app, ["ner-dictionary", str(train), "-o", str(tmp_path / "p.jsonl"),
                                       "--branch-trees", str(trees)])
    assert refused.exit_code == 2 and "--branch-trees" in refused.output and not (tmp_path / "p.jsonl").exists()
    exclusions = tmp_path / "exclusions.tsv"
    done = CliRunner().invoke(app, ["ner-dictionary", str(train), "-o", str(tmp_path / "p.jsonl"), "--exclusions",
                                    str(exclusions), "--kb", str(kb), "--branch-trees", str(trees),
                                    "--branch-min-seen", "3"])
    assert done.exit_code == 0, done.output
    written = set(read_exclusions(exclusions))
    assert ("CHEMICAL", "acetylglucosaminidase") in written and ("CHEMICAL", "nitric oxide synthase") in written
    assert ("CHEMICAL", "insulin") not in written
    import json

    report = json.loads(done.stdout)
    assert report["branch_exclusions"]["branches_left_out"] == {"CHEMICAL D08.811": [0, 3]}
    assert report["exclusions"]["exclusions"] == len(written)
