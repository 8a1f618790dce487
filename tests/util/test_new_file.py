"""`check_new_file` and the commands that write one file: nothing a user has is replaced unasked, and an input
is never the output."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.util.atomic import check_new_file


def test_check_new_file(tmp_path: Path) -> None:
    out, given = tmp_path / "out.tsv", tmp_path / "in.tsv"
    given.write_text("x\n")
    check_new_file(out, overwrite=False, inputs=[given])  # new: fine
    out.write_text("mine\n")
    with pytest.raises(InputError, match="exists") as error:
        check_new_file(out, overwrite=False)
    assert error.value.field == "--output"
    check_new_file(out, overwrite=True)
    with pytest.raises(InputError, match="files read"):  # not even with overwrite
        check_new_file(tmp_path / "." / "in.tsv", overwrite=True, inputs=[given], option="--report")
    with pytest.raises(InputError, match="folder"):
        check_new_file(tmp_path, overwrite=True)


def test_pairs_commands_refuse_an_existing_output_and_their_inputs(tmp_path: Path) -> None:
    from tests.output_guard import sapbert_app

    app = sapbert_app()
    kb = tmp_path / "kb.jsonl"
    KnowledgeBase([Concept("D1", "Heart attack", ["Myocardial infarction", "MI"], ["Disease"]),
                   Concept("D2", "Headache", ["Cephalalgia"], ["Disease"])]).to_jsonl(kb)
    kept = kb.read_bytes()
    runner = CliRunner()
    into_input = runner.invoke(app, ["pairs", "kb", str(kb), "-o", str(kb), "--overwrite"])
    assert into_input.exit_code == 2 and "files read" in into_input.output and kb.read_bytes() == kept
    out = tmp_path / "pairs.tsv"
    assert runner.invoke(app, ["pairs", "kb", str(kb), "-o", str(out)]).exit_code == 0
    written = out.read_bytes()
    again = runner.invoke(app, ["pairs", "kb", str(kb), "-o", str(out), "--seed", "7"])
    assert again.exit_code == 2 and "exists" in again.output and out.read_bytes() == written
    mixed = runner.invoke(app, ["pairs", "mix", f"{out}:1", "-o", str(out), "--overwrite"])
    assert mixed.exit_code == 2 and "files read" in mixed.output and out.read_bytes() == written
    assert runner.invoke(app, ["pairs", "mix", str(out), "-o", str(tmp_path / "mix.tsv")]).exit_code == 0


def test_training_commands_check_every_output_before_they_read_anything(tmp_path: Path) -> None:
    from tests.output_guard import sapbert_app

    app, runner = sapbert_app(), CliRunner()
    corpus, kb = tmp_path / "train.PubTator", tmp_path / "kb.jsonl"
    corpus.write_text("1|t|Heart attack.\n1|a|x\n1\t0\t12\tHeart attack\tDisease\tD1\n\n")
    KnowledgeBase([Concept("D1", "Heart attack", ["Myocardial infarction"], ["Disease"])]).to_jsonl(kb)
    # ner-data writes into a folder: one holding something else is refused, an earlier output is not
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    refused = runner.invoke(app, ["ner-data", str(tmp_path / "no-corpora"), str(mine)])
    assert refused.exit_code == 2 and "ner-data output" in refused.output and (mine / "notes.txt").read_text() == "keep"
    # ner-vectors: an existing OUTPUT, or a corpus as OUTPUT, is refused before any model loads
    vectors = tmp_path / "v.txt"
    vectors.write_text("mine\n")
    for target in (vectors, corpus):
        result = runner.invoke(app, ["ner-vectors", str(target), "--corpus", str(corpus), "--model", "no-such-model"])
        assert result.exit_code == 2 and ("exists" in result.output or "files read" in result.output)
    assert vectors.read_text() == "mine\n"
    # pairs corpus: its OUTPUT.stats.json is an output too
    pairs = tmp_path / "p.tsv"
    (tmp_path / "p.tsv.stats.json").write_text("{}")
    result = runner.invoke(app, ["pairs", "corpus", str(corpus), "--kb", str(kb), "-o", str(pairs)])
    assert result.exit_code == 2 and "stats.json" in result.output and not pairs.exists()
    # kb-add-mentions: --report is checked like --output, before the corpora are read
    report = tmp_path / "report.json"
    report.write_text("{}")
    result = runner.invoke(app, ["kb-add-mentions", str(kb), str(corpus), "-o", str(tmp_path / "out.jsonl"),
                                 "--report", str(report)])
    assert result.exit_code == 2 and "--report" in result.output and not (tmp_path / "out.jsonl").exists()
    assert report.read_text() == "{}"
