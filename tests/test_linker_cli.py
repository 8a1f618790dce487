"""`sapbert index build` and `sapbert link` through typer's CliRunner (tiny random BERT)."""
from __future__ import annotations

import json

import spacy
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.encoder import Encoder
from spacy_sapbert.index import NameIndex
from spacy_sapbert.kb import KnowledgeBase

from linker_fixtures import write_small_kb

runner = CliRunner()


def _mean_model(tiny_bert, tmp_path):
    """The tiny BERT with mean pooling recorded in sapbert.json (its [CLS] vectors are all alike)."""
    return Encoder(tiny_bert, pooling="mean").save(tmp_path / "model")


def test_index_build_then_link_with_the_index(tiny_bert, tmp_path):
    model, kb = _mean_model(tiny_bert, tmp_path), write_small_kb(tmp_path)
    out = runner.invoke(app, ["index", "build", "--kb", str(kb), "--model", str(model), "-o", str(tmp_path / "idx"),
                              "--kind", "hnsw", "--batch-size", "4", "--device", "cpu"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["kind"] == "hnsw" and summary["rows"] == 28 and summary["concepts"] == 9
    assert summary["names_per_second"] > 0
    index = NameIndex.load(tmp_path / "idx", Encoder(model), KnowledgeBase.from_jsonl(kb))
    assert index.kind == "hnsw"

    out = runner.invoke(app, ["link", "Heart attack", "plaquenil", "...", "--kb", str(kb), "--model", str(model),
                              "--index", str(tmp_path / "idx"), "--top", "2", "--json"])
    assert out.exit_code == 0, out.output
    records = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert [r["mention"] for r in records] == ["Heart attack", "plaquenil", "..."]
    assert records[0]["candidates"][0] == {"concept_id": "D009203", "score": 1.0, "name": "Myocardial Infarction"}
    assert records[1]["candidates"][0]["concept_id"] == "D006886" and len(records[1]["candidates"]) == 2
    assert records[2]["candidates"] == []


def test_link_reads_stdin_and_prints_a_table(tiny_bert, tmp_path):
    model, kb = _mean_model(tiny_bert, tmp_path), write_small_kb(tmp_path)
    out = runner.invoke(app, ["link", "-", "--kb", str(kb), "--model", str(model), "--top", "1"],
                        input="renal failure\nMS\n")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == "renal failure" and "D051437" in lines[1] and "Renal Insufficiency" in lines[1]
    assert lines[2] == "MS" and lines[3].split()[1] in {"D009103", "D009081"}


def test_link_texts_with_a_saved_pipeline(tiny_bert, tmp_path):
    model, kb = _mean_model(tiny_bert, tmp_path), write_small_kb(tmp_path)
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "ENT", "pattern": "heart attack"}])
    nlp.add_pipe("sapbert_linker", config={"model": str(model), "kb": str(kb)})
    nlp.to_disk(tmp_path / "pipeline")
    out = runner.invoke(app, ["link", "After a heart attack.", "Nothing.", "--pipeline", str(tmp_path / "pipeline"),
                              "--json"])
    assert out.exit_code == 0, out.output
    (record,) = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert record["text"] == "After a heart attack." and record["mention"] == "heart attack"
    assert record["candidates"][0]["concept_id"] == "D009203"


def test_errors_are_one_line_and_exit_2(tiny_bert, tmp_path):
    model = _mean_model(tiny_bert, tmp_path)
    out = runner.invoke(app, ["link", "x", "--kb", str(tmp_path / "nope.jsonl"), "--model", str(model)])
    assert out.exit_code == 2 and "nope.jsonl: knowledge base file not found" in out.output
    out = runner.invoke(app, ["index", "build", "--kb", str(write_small_kb(tmp_path)), "--model",
                              str(tmp_path / "no-model"), "-o", str(tmp_path / "idx")])
    assert out.exit_code == 2 and "model folder not found" in out.output
    out = runner.invoke(app, ["link", "x", "--model", str(model)])
    assert out.exit_code == 2 and "--kb" in out.output
    out = runner.invoke(app, ["index", "build", "--kb", str(write_small_kb(tmp_path)), "--model", str(model),
                              "-o", str(tmp_path / "idx"), "--kind", "pq", "--param", "rerank"])
    assert out.exit_code == 2 and "--param takes KEY=INTEGER, got 'rerank'" in out.output


def test_index_build_with_parameters_and_precision(tiny_bert, tmp_path):
    model, kb = _mean_model(tiny_bert, tmp_path), write_small_kb(tmp_path)
    out = runner.invoke(app, ["index", "build", "--kb", str(kb), "--model", str(model), "-o", str(tmp_path / "idx"),
                              "--kind", "pq", "--param", "pq_m=8", "--param", "rerank=40", "--precision", "float32",
                              "--device", "cpu"])
    assert out.exit_code == 0, out.output
    index = NameIndex.load(tmp_path / "idx")
    assert index.manifest["params"]["pq_m"] == 8 and index.manifest["params"]["rerank"] == 40
    assert index.manifest["build"]["dtype"] == "float32" and (tmp_path / "idx" / "vectors.npy").is_file()
