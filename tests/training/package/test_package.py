"""The embedded default: fp16 weights that match the index, the PQ index, the assembled
pipeline (tiny models), and the default pipeline that ships in the package."""
from __future__ import annotations

import json

import numpy as np
import pytest
import spacy
from safetensors import safe_open

import spacy_sapbert
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.training.package.build import agreement, build_default_pipeline

from tests.linker_fixtures import small_kb, write_small_kb


def test_rounded_weights_save_as_fp16_and_load_back_identical(tiny_bert, tmp_path):
    encoder = Encoder(tiny_bert, pooling="mean")
    with pytest.raises(InputError, match="not exactly representable in float16"):
        encoder.save(tmp_path / "fp16", weights_dtype="float16")
    encoder.round_weights("float16")
    folder = encoder.save(tmp_path / "fp16")
    with safe_open(str(folder / "model.safetensors"), "pt") as handle:
        dtypes = {str(handle.get_tensor(k).dtype) for k in handle.keys()}
    assert "torch.float16" in dtypes and "torch.float32" not in dtypes
    loaded = Encoder(folder)
    assert loaded.weights_dtype == "float16" and loaded.fingerprint == encoder.fingerprint
    texts = ["heart attack", "renal failure"]
    np.testing.assert_array_equal(loaded.encode(texts), encoder.encode(texts))
    again = loaded.save(tmp_path / "again")  # keeps float16 without being asked
    assert (again / "model.safetensors").stat().st_size == (folder / "model.safetensors").stat().st_size


def test_pq_conversion_agrees_with_exact_search(tiny_bert):
    encoder = Encoder(tiny_bert, pooling="mean")
    exact = NameIndex.build(small_kb(), encoder, show_progress=False)
    compact = exact.convert("pq", pq_m=8)
    assert compact.kind == "pq" and compact.names == exact.names and compact.manifest["params"]["pq_m"] == 8
    queries = encoder.encode(["heart attack", "kidney failure", "plaquenil"])
    report = agreement(exact, compact, queries, k=10)
    assert report["queries"] == 3 and 0.0 <= report["top1_agreement"] <= 1.0
    assert report["exact_top1_in_top10"] >= report["top1_agreement"]
    with pytest.raises(InputError, match="compressed codes"):
        compact.convert("flat")


def _blank_ner(folder):
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("ner")
    for label in ("CHEMICAL", "DISEASE"):
        ner.add_label(label)
    nlp.initialize()
    nlp.to_disk(folder)
    return folder


def test_build_default_pipeline_writes_a_loadable_fp16_pipeline(tiny_bert, tmp_path):
    kb_path = write_small_kb(tmp_path)
    report = build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, kb_path, tmp_path / "default",
                                    probe_mentions=["heart attack", "plaquenil"], pq_m=8)
    out = tmp_path / "default"
    assert report["pq_vs_exact"]["queries"] == 2 and report["index_params"]["pq_m"] == 8
    assert (out / "README.md").read_text().count("Licences") == 1
    assert json.loads((out / "build.json").read_text())["kb"] == "small"
    nlp = spacy.load(out)
    assert nlp.pipe_names == ["ner", "abbreviation_entities", "sapbert_linker"]
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.index.kind == "pq" and linker.encoder.weights_dtype == "float16"
    from spacy_sapbert.index.name_index import IndexMismatchError
    from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
    other = KnowledgeBase(list(small_kb()) + [Concept("D1", "extra name", [], [], None)], name="other")
    with pytest.raises(IndexMismatchError, match="KB"):
        linker.use(linker.encoder, other, linker.index)  # an index is only used with its own KB
    result = linker.linker.link(["heart attack"])[0]  # PQ over a tiny random model: approximate
    assert result and all(cid in linker.kb for cid, _ in result) and len(linker.index) == report["index_rows"]
    with pytest.raises(InputError, match="not a NER pipeline"):
        build_default_pipeline(_blank_tagger(tmp_path / "tagger"), tiny_bert, kb_path, tmp_path / "x")


def _blank_tagger(folder):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(folder)
    return folder


def test_embedded_default_links_offline():
    nlp = spacy_sapbert.load()
    doc = nlp("Hydroxychloroquine (HCQ) was given for lupus; HCQ retinopathy followed a myocardial infarction.")
    found = {(e.text, e.label_): e.kb_id_ for e in doc.ents}
    assert found[("Hydroxychloroquine", "CHEMICAL")].startswith("D006886")
    assert found[("HCQ", "CHEMICAL")].startswith("D006886")  # through the abbreviation's long form
    assert found[("myocardial infarction", "DISEASE")].startswith("D009203")
    # synonyms the KB spells differently: brand name, lay term, abbreviation
    mentions = ["Plaquenil", "heart attack", "T2DM", "high blood pressure"]
    linker = nlp.get_pipe("sapbert_linker").linker
    candidates = linker.candidates(mentions)  # raw cosines, no threshold
    assert [found[0][0].split("|")[0] for found in candidates] == ["D006886", "D009203", "D003924", "D006973"]
    # shipped calibrated, with a threshold: scores are probabilities, and an unsure link is refused
    assert linker.calibration is not None and 0 < linker.threshold < 1
    links = linker.link(mentions)
    assert all(score >= linker.threshold for found in links for _, score in found)
    assert links[2] == [] and [found[0][0] for found in links if found] == [found[0][0] for i, found in
                                                                            enumerate(candidates) if i != 2]
    blank = spacy.blank("en")
    linker = blank.add_pipe("sapbert_linker")  # no config: the embedded encoder, KB and index
    assert linker.index.kind == "pq" and linker.kb.name == "mesh-medic-chem-train"


def test_ner_labels_are_known_before_the_ner_runs(tmp_path):
    """A pipeline saved before its NER ran (``sapbert calibrate --output``) keeps its labels in meta.json."""
    nlp = spacy_sapbert.load()
    ner = nlp.get_pipe("sapbert_ner")
    assert ner.tagging is None and sorted(ner.labels) == ["CHEMICAL", "DISEASE"]
    assert sorted(nlp.meta["labels"]["sapbert_ner"]) == ["CHEMICAL", "DISEASE"]
    assert ner.tagging is None  # reading the labels did not load the model
    (tmp_path / "tagger.json").write_text("{not json")
    ner.folder = tmp_path
    assert ner.labels == ()


# -- replacing an output folder: only an earlier package, or anything with --overwrite -----------

def _marker(folder):
    return json.loads((folder / "build.json").read_text())["sapbert_package"]


def test_package_refuses_a_folder_that_is_not_an_earlier_package(tiny_bert, tmp_path):
    kb_path = write_small_kb(tmp_path)
    ner = _blank_ner(tmp_path / "ner")
    out = tmp_path / "mine"
    (out / "data").mkdir(parents=True)
    (out / "notes.txt").write_text("my notes\n")
    with pytest.raises(InputError) as refused:
        build_default_pipeline(ner, tiny_bert, kb_path, out, pq_m=8)
    message = str(refused.value)
    assert message.startswith(f"{out}: ") and "notes.txt" in message and "data/" in message
    assert "--overwrite" in message
    assert (out / "notes.txt").read_text() == "my notes\n" and (out / "data").is_dir()  # nothing removed
    # --overwrite: replaced (atomically), and the result is a marked package
    build_default_pipeline(ner, tiny_bert, kb_path, out, pq_m=8, overwrite=True)
    assert not (out / "notes.txt").exists() and _marker(out)["pipeline"] == "sapbert_default"
    # an earlier package output is replaced without --overwrite
    build_default_pipeline(ner, tiny_bert, kb_path, out, pq_m=8, version="0.2.0")
    assert spacy.load(out).meta["version"] == "0.2.0"
    (tmp_path / "made-by-mkdir").mkdir()  # the package is as readable as any new folder, not private
    assert out.stat().st_mode & 0o7777 == (tmp_path / "made-by-mkdir").stat().st_mode & 0o7777
    (tmp_path / "made-by-mkdir").rmdir()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary leftovers


def test_package_output_that_is_a_file_is_refused_even_with_overwrite(tiny_bert, tmp_path):
    out = tmp_path / "file"
    out.write_text("not a folder")
    with pytest.raises(InputError, match="not a folder"):
        build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, write_small_kb(tmp_path), out, pq_m=8,
                               overwrite=True)
    assert out.read_text() == "not a folder"


def test_earlier_packages_are_recognised_with_and_without_the_marker(tmp_path):
    from spacy_sapbert.training.package.build import is_package_output

    legacy = tmp_path / "legacy"  # written before build.json carried the marker (the shipped default)
    legacy.mkdir()
    (legacy / "meta.json").write_text(json.dumps({"name": "sapbert_default"}))
    (legacy / "build.json").write_text(json.dumps({"kb": "mesh-medic", "index_rows": 3, "size_mb": 1.0}))
    marked = tmp_path / "marked"
    marked.mkdir()
    (marked / "build.json").write_text(json.dumps({"sapbert_package": {"format": 1, "pipeline": "sapbert_default"}}))
    other = tmp_path / "other"
    other.mkdir()
    (other / "build.json").write_text("{\"something\": 1}")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "build.json").write_text("{\"sapbert_pack")
    assert is_package_output(legacy) and is_package_output(marked)
    assert not is_package_output(other) and not is_package_output(broken) and not is_package_output(tmp_path / "no")


def test_exact_index_folder_is_checked_before_the_build(tiny_bert, tmp_path):
    kb_path = write_small_kb(tmp_path)
    ner = _blank_ner(tmp_path / "ner")
    exact = tmp_path / "exact"
    exact.mkdir()
    (exact / "keep.me").write_text("x")
    with pytest.raises(InputError, match="keep.me") as refused:
        build_default_pipeline(ner, tiny_bert, kb_path, tmp_path / "default", pq_m=8, exact_index=exact)
    assert str(refused.value).startswith(f"{exact}: ")
    assert (exact / "keep.me").exists() and not (tmp_path / "default").exists()  # refused before writing anything
    (exact / "keep.me").unlink()  # an empty folder is fine; a saved index is replaced
    build_default_pipeline(ner, tiny_bert, kb_path, tmp_path / "default", pq_m=8, exact_index=exact)
    assert (exact / "manifest.json").is_file()
    build_default_pipeline(ner, tiny_bert, kb_path, tmp_path / "default", pq_m=8, exact_index=exact)
    assert NameIndex.load(exact).kind == "flat"


def test_cli_refusal_is_one_line_not_a_traceback(tiny_bert, tmp_path):
    import typer
    from typer.testing import CliRunner

    from spacy_sapbert.training.package.cli import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command, so typer keeps the sub-command name
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    args = ["package-default", "--ner", str(_blank_ner(tmp_path / "ner")), "--model", str(tiny_bert),
            "--kb", str(write_small_kb(tmp_path)), "--output", str(out), "--pq-m", "8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {out}: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output and (out / "notes.txt").exists()
    result = CliRunner().invoke(app, args + ["--overwrite"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["index_rows"] > 0 and not (out / "notes.txt").exists()
