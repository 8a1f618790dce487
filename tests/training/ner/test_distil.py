"""The GPU route of the student (training/ner/teacher/distil.py), run here on the CPU: it reads the
windows ner-train builds, learns what the teacher knows, and its export is a pipeline that tags."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import spacy
from spacy.tokens import DocBin, Span

from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.files import write_jsonl
from spacy_sapbert.ner.tags import IGNORE, TagScheme
from spacy_sapbert.training.ner import objective
from spacy_sapbert.training.ner.teacher import distil, fit
from spacy_sapbert.training.ner.teacher.inputs import TOKENIZER_CONFIG, write_teacher_inputs
from spacy_sapbert.training.package.swap_ner import ner_teacher

SCHEME = TagScheme(["CHEMICAL", "DISEASE"])


def _docs(nlp, n, annotate):
    docs = []
    for i in range(n):
        doc = nlp(f"Acid {i} caused kidney failure .")
        if annotate:
            doc.set_ents([Span(doc, 3, 5, "DISEASE")] + ([Span(doc, 0, 1, "CHEMICAL")] if annotate == "all" else []),
                         default="outside")
        docs.append(doc)
    return docs


@pytest.fixture()
def corpus(tmp_path, tiny_bert):
    """train (gold without chemicals), unlabelled text, dev (full gold); inputs cut with the student's
    tokenizer; a teacher sure of both labels everywhere."""
    nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
    folder = tmp_path / "corpus"
    folder.mkdir()
    files = {"train.spacy": _docs(nlp, 4, "disease"), "text.spacy": _docs(nlp, 28, None),
             "dev.spacy": _docs(nlp, 4, "all")}
    for name, docs in files.items():
        DocBin(docs=docs).to_disk(folder / name)
    kb = write_jsonl([Concept("D1", "kidney failure", [], ["Disease"]), Concept("C1", "acid", [], ["Chemical"])],
                     tmp_path / "kb.jsonl.gz")
    parts = ["train:train=train.spacy", "unlabelled:text=text.spacy", "dev:dev=dev.spacy"]
    inputs, soft = _inputs_and_teacher(tmp_path, folder, tiny_bert, kb, parts, {"train": 4, "text": 28, "dev": 4})
    return {"folder": folder, "kb": kb, "inputs": inputs, "soft": soft, "nlp": nlp}


def _inputs_and_teacher(tmp_path, folder, tiny_bert, kb, parts, sizes):
    """The inputs cut from ``folder``'s ``parts`` (``sizes`` documents each) and a teacher sure of both
    labels on every token (``soft.safetensors``)."""
    from safetensors.numpy import save_file

    nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
    inputs = tmp_path / "inputs.safetensors"
    data = write_teacher_inputs(folder, parts, tiny_bert, [kb], inputs, max_pieces=32, overlap=8)["data"]
    tensors = {}
    for name, n in sizes.items():
        tags = [t for doc in _docs(nlp, n, "all") for t in SCHEME.gold(doc)]
        probs = np.zeros((len(tags), len(SCHEME)), dtype=np.float16)
        probs[np.arange(len(tags)), tags] = 1.0
        tensors.update({f"{name}/probs": probs, f"{name}/doc_offsets": np.arange(0, 6 * n + 1, 6, dtype=np.int64)})
    roles = [{"name": p.split(":")[1].split("=")[0], "role": p.split(":")[0], "file": p.split("=")[1]} for p in parts]
    save_file(tensors, str(tmp_path / "soft.safetensors"),
              metadata={"format": "1", "tags": json.dumps(list(SCHEME.tags)), "parts": json.dumps(roles), "data": data,
                        "teacher": "tiny-teacher", "training": json.dumps({"seeds": 2})})
    return inputs, tmp_path / "soft.safetensors"


def test_the_inputs_hold_the_windows_and_gold_ner_train_builds(corpus, tiny_bert, tmp_path):
    from spacy_sapbert.training.ner.tagger.config import NerConfig
    from spacy_sapbert.training.ner.tagger.trainer import NerTrainer

    config = NerConfig(base_model=str(tiny_bert), max_pieces=32, overlap=8, device="cpu", amp="no",
                       teacher=str(corpus["soft"]), teacher_text=["text"])
    trainer = NerTrainer(config, corpus["folder"] / "train.spacy", corpus["folder"] / "dev.spacy", [corpus["kb"]],
                         tmp_path / "out", tmp_path / "run")
    read = distil.Corpus(fit.Inputs(corpus["inputs"]), distil.SoftLabels(corpus["soft"]))
    items = read.items("train", "unlabelled")
    assert len(items) == len(trainer.examples) == 32
    for item, example in zip(items, trainer.examples):
        ids, feats, _, scored = read.inputs.batch([item], fit.torch.device("cpu"))
        assert ids[0].tolist() == list(example.window.input_ids)
        assert feats[0].tolist() == list(example.window.features)
        assert scored[0][0].tolist() == list(example.window.positions)
        gold, soft, _ = read.targets([item], scored, "cpu")
        assert gold.tolist() == list(example.gold)
        assert np.array_equal(soft.numpy(), example.soft)
    assert objective.IGNORE == IGNORE == fit.IGNORE


def test_distil_learns_the_teachers_chemicals_and_exports_a_pipeline(corpus, tiny_bert, tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.training.cli import register

    register(app)
    out = tmp_path / "student"
    args = ["--encoder", str(tiny_bert), "--inputs", str(corpus["inputs"]), "--soft-labels", str(corpus["soft"]),
            "--output", str(out), "--layers", "0", "--epochs", "6", "--batch-size", "8", "--lr", "1e-3",
            "--head-lr", "1e-2", "--warmup-steps", "0", "--distil-weight", "1.0", "--device", "cpu"]
    distil.main(args)
    record = json.loads((out / distil.LOG_FILE).read_text())
    assert record["best"]["dev"]["dev"]["f"] > 90  # "Acid" is CHEMICAL only in the teacher's rows
    assert [h["epoch"] for h in record["history"]] == list(range(1, 7))
    with pytest.raises(SystemExit, match="never overwritten"):
        distil.main(args)

    pipeline = tmp_path / "pipeline"
    result = CliRunner().invoke(app, ["ner-student-export", str(out / distil.MODEL_DIR), "--kb", str(corpus["kb"]),
                                      "--output", str(pipeline), "--encoder", str(tiny_bert)])
    assert result.exit_code == 0, result.output
    for into in (out / distil.MODEL_DIR, out):  # the model it reads is never the output, nor inside it
        refused = CliRunner().invoke(app, ["ner-student-export", str(out / distil.MODEL_DIR), "--kb", str(corpus["kb"]),
                                           "--output", str(into), "--encoder", str(tiny_bert), "--overwrite"])
        assert refused.exit_code == 2 and "holds MODEL" in refused.output
    assert (out / distil.MODEL_DIR).is_dir()
    whole = tmp_path / "whole"  # a whole pipeline holds the NER's files too, but is no earlier export to replace
    shutil.copytree(pipeline, whole)
    (whole / "sapbert_linker").mkdir()
    refused = CliRunner().invoke(app, ["ner-student-export", str(out / distil.MODEL_DIR), "--kb", str(corpus["kb"]),
                                       "--output", str(whole), "--encoder", str(tiny_bert)])
    assert refused.exit_code == 2 and "whole pipeline" in refused.output and (whole / "sapbert_linker").is_dir()
    again = CliRunner().invoke(app, ["ner-student-export", str(out / distil.MODEL_DIR), "--kb", str(corpus["kb"]),
                                     "--output", str(pipeline), "--encoder", str(tiny_bert)])
    assert again.exit_code == 0, again.output  # an earlier export is replaced
    doc = spacy.load(pipeline)("Acid 7 caused kidney failure .")
    assert [(e.text, e.label_) for e in doc.ents] == [("Acid", "CHEMICAL"), ("kidney failure", "DISEASE")]
    # the student records its teacher where it was trained; a package built elsewhere still names it
    assert (record["teacher_model"], record["teacher_seeds"], record["teacher_text"]) == ("tiny-teacher", 2, ["text"])
    assert ner_teacher(pipeline / "sapbert_ner" / "tagger.json")["model"] == "tiny-teacher, 2 seeds"

    moved = tmp_path / "here" / "soft.safetensors"  # the labels lie elsewhere on the machine that exports
    moved.parent.mkdir()
    moved.write_bytes(corpus["soft"].read_bytes())
    result = CliRunner().invoke(app, ["ner-student-export", str(out / distil.MODEL_DIR), "--kb", str(corpus["kb"]),
                                      "--output", str(tmp_path / "p3"), "--encoder", str(tiny_bert),
                                      "--soft-labels", str(moved)])
    assert result.exit_code == 0, result.output
    assert ner_teacher(tmp_path / "p3" / "sapbert_ner" / "tagger.json")["soft_labels"] == str(moved)

    other_kb = write_jsonl([Concept("D1", "kidney failure", [], ["Disease"]), Concept("C1", "acid", [], ["Chemical"]),
                            Concept("C2", "salt", [], ["Chemical"])], tmp_path / "other.jsonl.gz")
    result = CliRunner().invoke(app, ["ner-student-export", str(out / distil.MODEL_DIR), "--kb", str(other_kb),
                                      "--output", str(tmp_path / "p2"), "--encoder", str(tiny_bert)])
    assert result.exit_code != 0 and "pass the KB files its inputs were cut with" in result.output

    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(corpus["soft"]))  # another tag set: not this student's teacher
    save_file(tensors, str(tmp_path / "io.safetensors"), metadata={"format": "1", "tags": json.dumps(["O", "I-X"]),
                                                                   "parts": "[]", "data": "0" * 16})
    result = CliRunner().invoke(app, ["ner-student-export", str(out / distil.MODEL_DIR), "--kb", str(corpus["kb"]),
                                      "--output", str(tmp_path / "p4"), "--encoder", str(tiny_bert),
                                      "--soft-labels", str(tmp_path / "io.safetensors")])
    assert result.exit_code != 0 and "not its teacher's soft labels" in result.output
    assert not (tmp_path / "p4").exists()


def test_soft_labels_of_other_corpus_files_are_refused(corpus, tmp_path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(corpus["soft"]))
    save_file(tensors, str(tmp_path / "other.safetensors"),
              metadata={"format": "1", "tags": json.dumps(list(SCHEME.tags)), "parts": "[]", "data": "0" * 16})
    with pytest.raises(ValueError, match="cut the student's inputs from the teacher's corpus folder"):
        distil.Corpus(fit.Inputs(corpus["inputs"]), distil.SoftLabels(tmp_path / "other.safetensors"))


def test_a_gold_part_teaches_its_own_labels_and_leaves_the_others_open(corpus, tiny_bert, tmp_path):
    """An extra corpus that annotates chemicals only (parts.json) keeps its gold in the inputs, with its
    unlabelled tokens open to DISEASE; ``--gold-part`` makes that gold teach (the ablation of issue 31)."""
    from safetensors.numpy import load_file

    nlp, folder = corpus["nlp"], corpus["folder"]
    chem = []
    for doc in _docs(nlp, 28, None):
        doc.set_ents([Span(doc, 0, 1, "CHEMICAL")], default="outside")
        chem.append(doc)
    DocBin(docs=chem).to_disk(folder / "text.spacy")  # same tokens as before: the teacher's rows still fit
    (folder / "parts.json").write_text(json.dumps([{"name": "text", "file": "text.spacy", "labels": ["CHEMICAL"]}]))
    inputs = tmp_path / "partial.safetensors"
    parts = ["train:train=train.spacy", "unlabelled:text=text.spacy", "dev:dev=dev.spacy"]
    data = write_teacher_inputs(folder, parts, tiny_bert, [corpus["kb"]], inputs, max_pieces=32, overlap=8)["data"]
    read = fit.Inputs(inputs)
    assert [p.get("open_tags") for p in read.parts] == [None, [0, 3, 4], None]
    assert [p.get("labels") for p in read.parts] == [None, ["CHEMICAL"], None]
    gold = load_file(str(inputs))["text/gold"][:6].tolist()
    assert gold == [SCHEME.begin("CHEMICAL")] + [objective.PARTIAL_O] * 5  # "kidney failure" may be a disease here

    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(corpus["soft"]), "np") as handle:  # the same teacher rows, for the changed corpus file
        metadata = dict(handle.metadata(), data=data)
    save_file(load_file(str(corpus["soft"])), str(tmp_path / "soft-partial.safetensors"), metadata=metadata)

    def run(name, *extra):
        distil.main(["--encoder", str(tiny_bert), "--inputs", str(inputs),
                     "--soft-labels", str(tmp_path / "soft-partial.safetensors"), "--output", str(tmp_path / name), "--layers", "0", "--epochs", "6", "--batch-size", "8",
                     "--lr", "1e-3", "--head-lr", "1e-2", "--warmup-steps", "0", "--distil-weight", "0.0",
                     "--device", "cpu", *extra])
        return json.loads((tmp_path / name / distil.LOG_FILE).read_text())

    taught = run("gold", "--gold-part", "text")
    assert taught["gold_parts"] == ["text"] and taught["best"]["dev"]["dev"]["f"] > 90
    alone = run("alone")  # train.spacy never tags "Acid": the student finds the diseases only
    assert alone["gold_parts"] == [] and alone["best"]["dev"]["dev"]["f"] < 70
    with pytest.raises(SystemExit, match="not unlabelled parts"):
        run("wrong", "--gold-part", "dev")
    with pytest.raises(SystemExit, match="do not say which labels"):  # inputs cut without parts.json
        distil.main(["--encoder", str(tiny_bert), "--inputs", str(corpus["inputs"]), "--soft-labels",
                     str(corpus["soft"]), "--output", str(tmp_path / "old"), "--gold-part", "text", "--device", "cpu"])


def test_a_later_dev_part_can_teach_and_then_is_not_scored(tmp_path, tiny_bert):
    """``--train-on ncbi_dev``: a dev part that is not reported (NCBI dev, when BC5CDR dev and NCBI test
    are) learnt from as a train part, gold and teacher; the first dev part still chooses the epoch."""
    nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
    folder = tmp_path / "corpus"
    folder.mkdir()
    sizes = {"train": 8, "dev": 4, "more": 24}  # train never tags "Acid"; the extra dev part does
    DocBin(docs=_docs(nlp, sizes["train"], "disease")).to_disk(folder / "train.spacy")
    for name in ("dev", "more"):
        DocBin(docs=_docs(nlp, sizes[name], "all")).to_disk(folder / f"{name}.spacy")
    kb = write_jsonl([Concept("D1", "kidney failure", [], ["Disease"]), Concept("C1", "salt", [], ["Chemical"])],
                     tmp_path / "kb.jsonl.gz")
    parts = ["train:train=train.spacy", "dev:dev=dev.spacy", "dev:more=more.spacy"]
    inputs, soft = _inputs_and_teacher(tmp_path, folder, tiny_bert, kb, parts, sizes)

    def run(name, *extra):
        distil.main(["--encoder", str(tiny_bert), "--inputs", str(inputs), "--soft-labels", str(soft),
                     "--output", str(tmp_path / name), "--layers", "0",
                     "--epochs", "6", "--batch-size", "8", "--lr", "1e-3", "--head-lr", "1e-2", "--warmup-steps", "0",
                     "--distil-weight", "0.0", "--device", "cpu", *extra])
        return json.loads((tmp_path / name / distil.LOG_FILE).read_text())

    taught = run("taught", "--train-on", "more")
    assert taught["trained_on_dev"] == ["more"] and taught["best"]["dev"]["dev"]["f"] > 90
    assert set(taught["best"]["dev"]) == {"dev"}  # a part learnt from is no longer scored
    alone = run("alone")
    assert alone["trained_on_dev"] == [] and alone["best"]["dev"]["dev"]["f"] < 70
    assert set(alone["best"]["dev"]) == {"dev", "more"}
    for wrong in ("dev", "train"):  # the choosing part, a part that is not dev
        with pytest.raises(SystemExit, match="only dev parts after the first"):
            run(f"wrong-{wrong}", "--train-on", wrong)
    from spacy_sapbert.training.package.card import _dev_gold_sentence, _licences
    from spacy_sapbert.training.package.swap_ner import training_record

    # what package-ner records as the build's ner_trained_on_dev
    assert training_record(tmp_path / "taught" / "model" / "tagger.json")["trained_on_dev"] == ["more"]
    assert training_record(tmp_path / "alone" / "model" / "tagger.json")["trained_on_dev"] == []
    assert "the gold of NCBI disease dev (`--train-on`)" in _dev_gold_sentence(["ncbi_dev"])
    assert _dev_gold_sentence([]) == "" and _licences([]).count("\n") + 1 == _licences(["ncbi_dev"]).count("\n")
    assert _licences(["ncbi_dev"]).endswith("| NER | NCBI disease dev (gold and the teacher's labels) | public domain (US Government work) |")
