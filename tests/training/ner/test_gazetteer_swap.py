"""`sapbert ner-gazetteer`: a trained NER reading a gazetteer of other KBs, written to a new folder."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import spacy
import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.files import write_jsonl
from spacy_sapbert.ner import model as tagger_model
from spacy_sapbert.ner.gazetteer import Gazetteer
from spacy_sapbert.ner.tags import TagScheme
from spacy_sapbert.training.ner.gazetteer_swap import swap_gazetteer

TOKENIZER_CONFIG = {"nlp": {"tokenizer": {"@tokenizers": "sapbert.ScispacyTokenizer.v1", "split_hyphens": True}}}
LABELS = {"DISEASE": ["Disease"], "CHEMICAL": ["Chemical"]}


def test_gazetteer_swap_adds_names_and_keeps_the_model(tiny_bert, tmp_path):
    nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    gazetteer = Gazetteer.from_names([("DISEASE", "heart attack"), ("CHEMICAL", "aspirin")], nlp.tokenizer)
    model, _ = tagger_model.from_encoder(tiny_bert, scheme.tags, gazetteer.n_features)
    tagger_model.save(model.eval(), tiny_bert, scheme.tags, tmp_path / "model", dtype=torch.float16,
                      extra={"training": {"label_to_types": LABELS}})
    gazetteer.to_disk(tmp_path / "model")
    nlp.add_pipe("sapbert_ner").from_disk(tmp_path / "model")
    nlp.to_disk(tmp_path / "ner")
    kb = write_jsonl([Concept("D1", "kidney failure", [], ["Disease"]), Concept("C1", "cisplatin", [], ["Chemical"])],
                     tmp_path / "kb.jsonl.gz")

    assert swap_gazetteer(tmp_path / "ner", [kb], tmp_path / "out") == 2
    doc = nlp.make_doc("cisplatin and kidney failure")
    new, old = (Gazetteer.from_disk(tmp_path / f / "sapbert_ner") for f in ("out", "ner"))
    assert any(new.features(doc)) and not any(old.features(doc))
    for name in ("model.safetensors", "tagger.json"):  # the model itself is copied as it is
        assert (tmp_path / "out/sapbert_ner" / name).read_bytes() == (tmp_path / "ner/sapbert_ner" / name).read_bytes()
    assert spacy.load(tmp_path / "out")("cisplatin and kidney failure") is not None

    diseases = write_jsonl([Concept("D1", "kidney failure", [], ["Disease"])], tmp_path / "d.jsonl.gz")
    with pytest.raises(InputError, match="CHEMICAL"):  # a label without names: not the features it learnt
        swap_gazetteer(tmp_path / "ner", [diseases], tmp_path / "out3")
    with pytest.raises(InputError, match="another folder"):
        swap_gazetteer(tmp_path / "ner", [kb], tmp_path / "ner")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(InputError):
        swap_gazetteer(tmp_path / "ner", [kb], tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    shutil.rmtree(tmp_path / "ner" / "sapbert_ner")
    with pytest.raises(InputError, match="not a sapbert_ner pipeline"):
        swap_gazetteer(tmp_path / "ner", [kb], tmp_path / "out2")
