"""The default pipeline on ONNX Runtime: the same entities and concepts as on torch, and a process without torch."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import spacy

from spacy_sapbert.default import DEFAULT_PIPELINE
from spacy_sapbert.errors import InputError

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["Hydroxychloroquine (HCQ) was stopped because of retinopathy and acute kidney injury.",
         "Cisplatin nephrotoxicity in patients with familial adenomatous polyposis (FAP).",
         "No entity here."]
ONNX = {"components.sapbert_ner.backend": "onnx", "components.sapbert_linker.backend": "onnx"}


def linked(nlp, texts=TEXTS):
    return [[(e.start_char, e.end_char, e.label_, [c for c, _ in e._.kb_ents[:1]]) for e in doc.ents]
            for doc in nlp.pipe(texts)]


@pytest.fixture(scope="module")
def torch_default():
    return spacy.load(DEFAULT_PIPELINE, config={"components.sapbert_ner.precision": "float32",
                                                "components.sapbert_linker.precision": "float32"})


def test_ner_alone_on_onnx_scores_as_torch(torch_default):
    onnx_ner = spacy.load(DEFAULT_PIPELINE, exclude=["sapbert_linker"], config={"components.sapbert_ner.backend": "onnx"})
    ours, theirs = onnx_ner.get_pipe("sapbert_ner"), torch_default.get_pipe("sapbert_ner")
    docs = [onnx_ner.make_doc(t) for t in TEXTS]
    for a, b in zip(ours.predict(docs), theirs.predict(docs)):
        np.testing.assert_allclose(a, b, atol=2e-4)
    assert ours.tagging.backend == "onnx" and theirs.tagging.backend == "torch"
    with pytest.raises(InputError, match="CPU only"):
        spacy.load(DEFAULT_PIPELINE, exclude=["sapbert_linker"],
                   config={"components.sapbert_ner.backend": "onnx", "components.sapbert_ner.device": "cuda"}
                   )("text")


def test_default_on_onnx_links_as_torch_and_saves(torch_default, tmp_path):
    onnx_nlp = spacy.load(DEFAULT_PIPELINE, config=ONNX)
    assert linked(onnx_nlp) == linked(torch_default)
    assert onnx_nlp.get_pipe("sapbert_linker").encoder.backend == "onnx"
    onnx_nlp.to_disk(tmp_path / "saved")  # the encoder folder copied as read, the NER's files too
    assert spacy.load(tmp_path / "saved").get_pipe("sapbert_linker").encoder.backend == "onnx"  # the config kept it
    back = spacy.load(tmp_path / "saved", config={"components.sapbert_ner.precision": "float32",
                                                  "components.sapbert_linker.precision": "float32",
                                                  "components.sapbert_ner.backend": "auto",
                                                  "components.sapbert_linker.backend": "auto"})
    assert back.get_pipe("sapbert_linker").encoder.backend == "native"
    assert linked(back) == linked(torch_default)


PROBE = """
import json, sys
from spacy_sapbert.util.torch_free import block_torch
assert block_torch()
import spacy_sapbert
nlp = spacy_sapbert.load()  # the pipes' auto backends, where torch does not import
texts = json.loads(sys.argv[1])
print(json.dumps({"torch": "torch" in sys.modules, "thinc_torch": __import__("thinc.compat").compat.has_torch,
                  "backends": [nlp.get_pipe("sapbert_ner").tagging.backend if nlp("x") is not None else None,
                               nlp.get_pipe("sapbert_linker").encoder.backend],
                  "linked": [[[e.start_char, e.end_char, e.label_, [c for c, _ in e._.kb_ents[:1]]] for e in doc.ents]
                             for doc in nlp.pipe(texts)]}))
"""


def test_a_process_without_torch_runs_the_default(torch_default):
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(TEXTS)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert (result["torch"], result["thinc_torch"]) == (False, False)
    assert result["backends"] == ["onnx", "onnx"]
    expected = [[[s, e, label, ids] for s, e, label, ids in doc] for doc in linked(torch_default)]
    assert result["linked"] == expected


def test_annotate_onnx_flag(tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    runs = {}
    for name, flags in (("onnx", ["--onnx"]), ("torch", [])):
        out = subprocess.run([sys.executable, "-m", "spacy_sapbert.cli", "annotate", str(source), "-o",
                              str(tmp_path / f"{name}.jsonl"), *flags], capture_output=True, text=True, cwd=REPO)
        assert out.returncode == 0, out.stderr[-3000:]
        runs[name] = [[(e["start"], e["end"], e["label"], e["concept_id"]) for e in json.loads(line)["entities"]]
                      for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
    assert runs["onnx"] == runs["torch"] and sum(map(len, runs["onnx"])) >= 4
    refused = subprocess.run([sys.executable, "-m", "spacy_sapbert.cli", "annotate", str(source), "-o",
                              str(tmp_path / "ray"), "--onnx", "--engine", "ray"], capture_output=True, text=True,
                             cwd=REPO)
    assert refused.returncode == 2 and "--onnx" in refused.stderr
