"""The NER teacher: its inputs file, its training and soft labels (fit.py), and a student that learns from them."""
from __future__ import annotations

import json

import numpy as np
import pytest
import spacy
from spacy.tokens import DocBin, Span

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.files import write_jsonl
from spacy_sapbert.ner.tags import IGNORE, TagScheme
from spacy_sapbert.training.ner.teacher import fit
from spacy_sapbert.training.ner.teacher.inputs import TOKENIZER_CONFIG, parse_part, write_teacher_inputs
from spacy_sapbert.training.ner.teacher.soft_labels import SoftLabels, score_teacher

SCHEME = TagScheme(["CHEMICAL", "DISEASE"])


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en", config=TOKENIZER_CONFIG)


def _docbin(nlp, path, n, chemicals=True, diseases=True, annotated=True):
    docs = []
    for i in range(n):
        doc = nlp(f"Acid {i} caused kidney failure .")
        if annotated:
            doc.set_ents(([Span(doc, 0, 1, "CHEMICAL")] if chemicals else []) +
                         ([Span(doc, 3, 5, "DISEASE")] if diseases else []), default="outside")
        docs.append(doc)
    DocBin(docs=docs).to_disk(path)
    return docs


@pytest.fixture()
def kb(tmp_path):
    return write_jsonl([Concept("D1", "kidney failure", [], ["Disease"]), Concept("C1", "acid", [], ["Chemical"])],
                       tmp_path / "kb.jsonl.gz")


def test_inputs_fit_and_score_round_trip(tmp_path, nlp, tiny_bert, kb):
    train = _docbin(nlp, tmp_path / "train.spacy", 6)
    text = _docbin(nlp, tmp_path / "text.spacy", 3, annotated=False)
    _docbin(nlp, tmp_path / "dev.spacy", 2)
    parts = ["train:train=train.spacy", "unlabelled:text=text.spacy", "dev:dev=dev.spacy"]
    inputs = tmp_path / "inputs.safetensors"
    result = write_teacher_inputs(tmp_path, parts, tiny_bert, [kb], inputs, max_pieces=32, overlap=8)
    assert result["parts"]["train"] == {"docs": 6, "tokens": 36, "windows": 6}
    read = fit.Inputs(inputs)
    assert [p["role"] for p in read.parts] == ["train", "unlabelled", "dev"]
    assert read.get("train", "gold").tolist() == [t for doc in train for t in SCHEME.gold(doc)]
    ids, feats, mask, scored = read.batch(read.windows("train")[:2], fit.torch.device("cpu"))
    assert int(feats.max()) > 0  # "acid" and "kidney failure" are KB names
    assert [t.tolist() for _, t in scored] == [list(range(6)), list(range(6, 12))]
    with pytest.raises(InputError, match="never overwritten"):
        write_teacher_inputs(tmp_path, parts, tiny_bert, [kb], inputs, max_pieces=32, overlap=8)

    out = tmp_path / "teacher"
    fit.main(["--model", str(tiny_bert), "--inputs", str(inputs), "--output", str(out), "--epochs", "1",
              "--seeds", "2", "--device", "cpu", "--head-lr", "1e-2"])
    labels = SoftLabels(out / fit.SOFT_LABELS)
    assert labels.training["seeds"] == 2 and set(labels.training["ensemble_dev"]) == {"dev"}
    rows = labels.docs("text", text)
    assert [r.shape for r in rows] == [(6, len(SCHEME))] * 3
    assert np.allclose(np.concatenate(rows).sum(-1), 1.0, atol=1e-2)
    assert set(score_teacher(out / fit.SOFT_LABELS, tmp_path)["dev"]) == {"p", "r", "f"}
    _score_command_writes_a_new_file_unless_overwrite_and_never_a_file_read(out / fit.SOFT_LABELS, tmp_path)
    with pytest.raises(InputError, match="part 'text' has 3 documents, the corpus file 6"):
        labels.docs("text", train)
    with pytest.raises(SystemExit, match="never overwritten"):
        fit.main(["--model", str(tiny_bert), "--inputs", str(inputs), "--output", str(out), "--device", "cpu"])
    with pytest.raises(SystemExit, match="--seeds 0"):
        fit.main(["--model", str(tiny_bert), "--inputs", str(inputs), "--output", str(tmp_path / "t0"), "--seeds", "0"])
    assert labels.check_file("text", tmp_path / "text.spacy")
    _docbin(nlp, tmp_path / "text.spacy", 3)  # the corpus rebuilt: same tokens, other annotation
    with pytest.raises(InputError, match="differs from the file part 'text' was labelled from"):
        labels.part_for_file(tmp_path / "text.spacy")


def test_part_specs_are_checked():
    assert parse_part("unlabelled:biored=train_biored.spacy") == ("unlabelled", "biored", "train_biored.spacy")
    for bad in ("train.spacy", "teach:x=y.spacy", "dev:=dev.spacy"):
        with pytest.raises(InputError, match="ROLE:NAME=FILE"):
            parse_part(bad)


def _soft_labels(path, parts, docs_by_part):
    """A teacher that is sure of the full annotation (CHEMICAL and DISEASE) of every document."""
    from safetensors.numpy import save_file

    tensors = {}
    for name, docs in docs_by_part.items():
        tags = [max(t, 0) for doc in docs for t in SCHEME.gold(doc)]  # unannotated: O
        probs = np.zeros((len(tags), len(SCHEME)), dtype=np.float16)
        probs[np.arange(len(tags)), tags] = 1.0
        offsets = np.cumsum([0] + [len(doc) for doc in docs]).astype(np.int64)
        tensors.update({f"{name}/probs": probs, f"{name}/doc_offsets": offsets})
    save_file(tensors, str(path), metadata={"format": "1", "tags": json.dumps(list(SCHEME.tags)),
                                            "parts": json.dumps(parts)})
    return path


def test_student_learns_the_teachers_chemicals_where_its_gold_has_none(tmp_path, nlp, tiny_bert, kb):
    from spacy_sapbert.training.ner.tagger.config import NerConfig
    from spacy_sapbert.training.ner.tagger.trainer import NerTrainer

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _docbin(nlp, corpus / "train.spacy", 4, chemicals=False)  # gold: "Acid" is O
    _docbin(nlp, corpus / "text.spacy", 28, annotated=False)
    _docbin(nlp, corpus / "dev.spacy", 4)
    teacher_docs = {"train": [nlp(f"Acid {i} caused kidney failure .") for i in range(4)],
                    "text": [nlp(f"Acid {i} caused kidney failure .") for i in range(28)]}
    for doc in teacher_docs["train"] + teacher_docs["text"]:
        doc.set_ents([Span(doc, 0, 1, "CHEMICAL"), Span(doc, 3, 5, "DISEASE")], default="outside")
    parts = [{"name": "train", "role": "train", "file": "train.spacy"},
             {"name": "text", "role": "unlabelled", "file": "text.spacy"}]
    soft = _soft_labels(tmp_path / "soft.safetensors", parts, teacher_docs)
    config = NerConfig(base_model=str(tiny_bert), epochs=6, patience=6, batch_size=8, lr=1e-3, head_lr=1e-2,
                       warmup_steps=0, freeze_embeddings=False, device="cpu", amp="no", checkpoint_every=0,
                       teacher=str(soft), teacher_text=["text"], distil_weight=1.0)
    trainer = NerTrainer(config, corpus / "train.spacy", corpus / "dev.spacy", [kb], tmp_path / "out",
                         tmp_path / "run")
    assert len(trainer.examples) == 32 and all(e.soft is not None for e in trainer.examples)
    assert all(t == IGNORE for e in trainer.examples[4:] for t in e.gold)  # the text's own annotation is not read
    assert trainer.train()["best"]["dev"]["f"] > 90  # "Acid" became CHEMICAL: the teacher taught it
    # the exported record names the teacher's text as the GPU route's does (package-ner reads it, file or not)
    record = json.loads((tmp_path / "out" / "sapbert_ner" / "tagger.json").read_text())["training"]
    assert record["teacher_text"] == ["text"] and "teacher_model" in record and "teacher_seeds" in record

    with pytest.raises(InputError, match=r"\['other'\] are not unlabelled parts"):
        NerTrainer(NerConfig(base_model=str(tiny_bert), device="cpu", amp="no", teacher=str(soft),
                             teacher_text=["other"]), corpus / "train.spacy", corpus / "dev.spacy", [kb],
                   tmp_path / "o2", tmp_path / "r2")
    with pytest.raises(InputError, match="teacher_text"):
        NerConfig(teacher_text=["text"]).validate()


def test_runs_without_a_teacher_resume_as_before():
    """Checkpoints written before the teacher existed carry no teacher settings: a run without one must match them."""
    from spacy_sapbert.training.ner.tagger.config import NerConfig, resume_identity

    assert not {"teacher", "distil_weight", "teacher_text"} & set(resume_identity(NerConfig(), "data", 1))
    taught = resume_identity(NerConfig(teacher="soft.safetensors", teacher_text=["all"]), "data", 1)
    assert taught["teacher"] == "soft.safetensors" and taught["teacher_text"] == ["all"]


def test_the_model_card_names_the_teacher_a_swapped_ner_learned_from(tmp_path, nlp):
    from spacy_sapbert.training.package.card import _teacher_sentence
    from spacy_sapbert.training.package.swap_ner import ner_teacher

    parts = [{"name": "train", "role": "train", "file": "train.spacy"},
             {"name": "biored", "role": "unlabelled", "file": "train_biored.spacy"}]
    soft = _soft_labels(tmp_path / "soft.safetensors", parts, {"train": [nlp("Acid .")], "biored": [nlp("Acid .")]})
    settings = tmp_path / "tagger.json"
    settings.write_text(json.dumps({"training": {"teacher": str(soft), "distil_weight": 0.5,
                                                 "teacher_text": ["all"]}}), encoding="utf-8")
    teacher = ner_teacher(settings)
    assert teacher["text"] == ["biored"] and teacher["distil_weight"] == 0.5
    assert "50% of its loss" in _teacher_sentence(teacher) and "text of biored" in _teacher_sentence(teacher)
    settings.write_text(json.dumps({"training": {"teacher": ""}}), encoding="utf-8")
    assert ner_teacher(settings) is None and _teacher_sentence(None) == ""


def _score_command_writes_a_new_file_unless_overwrite_and_never_a_file_read(soft_labels, corpus):
    from tests.output_guard import assert_output_guarded

    output = corpus / "scores.json"
    assert_output_guarded(lambda path: ["ner-teacher-score", str(soft_labels), str(corpus), "-o", str(path)], output,
                          reads=[soft_labels, corpus / "dev.spacy"])
    assert set(json.loads(output.read_text(encoding="utf-8"))["dev"]) == {"p", "r", "f"}


def test_cli_writes_inputs_with_the_default_parts_and_scores_the_teacher(tmp_path, nlp, tiny_bert, kb):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.training.cli import register

    register(app)
    _docbin(nlp, tmp_path / "train.spacy", 2)
    _docbin(nlp, tmp_path / "dev.spacy", 1)
    (tmp_path / "parts.json").write_text(json.dumps([{"name": "bc5cdr", "file": "train.spacy", "labels": []},
                                                     {"name": "more", "file": "dev.spacy", "labels": []}]))
    out = tmp_path / "inputs.safetensors"
    command = ["ner-teacher-inputs", str(tmp_path), "--teacher", str(tiny_bert), "--kb", str(kb), "-o", str(out),
               "--max-pieces", "32", "--overlap", "8"]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    roles = [(p["role"], p["name"]) for p in fit.Inputs(out).parts]
    assert roles == [("train", "train"), ("unlabelled", "more"), ("dev", "bc5cdr_dev")]  # bc5cdr is in train.spacy
    again = CliRunner().invoke(app, command)
    assert again.exit_code == 2 and "never overwritten" in again.output, again.output
    missing = CliRunner().invoke(app, ["ner-teacher-score", str(tmp_path / "none.safetensors"), str(tmp_path)])
    assert missing.exit_code == 2 and "soft labels not found" in missing.output
