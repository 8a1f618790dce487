"""`sapbert package-ner`: the default pipeline with a new NER, its linker kept byte for byte."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import spacy
import torch

from spacy_sapbert.default import DEFAULT_PIPELINE
from spacy_sapbert.errors import InputError
from spacy_sapbert.ner import model as tagger_model
from spacy_sapbert.ner.gazetteer import Gazetteer
from spacy_sapbert.ner.tags import TagScheme
from spacy_sapbert.training.package.swap_ner import replace_ner

TOKENIZER_CONFIG = {"nlp": {"tokenizer": {"@tokenizers": "sapbert.ScispacyTokenizer.v1", "split_hyphens": True}}}


def _digests(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def ner_pipeline(tmp_path_factory, tiny_bert) -> Path:
    root = tmp_path_factory.mktemp("ner")
    nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    gazetteer = Gazetteer.from_names([("DISEASE", "heart attack")], nlp.tokenizer)
    model, _ = tagger_model.from_encoder(tiny_bert, scheme.tags, gazetteer.n_features)
    tagger_model.save(model.eval(), tiny_bert, scheme.tags, root / "model", dtype=torch.float16)
    gazetteer.to_disk(root / "model")
    nlp.add_pipe("sapbert_ner").from_disk(root / "model")
    nlp.add_pipe("abbreviation_entities")
    nlp.to_disk(root / "pipeline")
    return root / "pipeline"


def test_replace_ner_keeps_the_linker_and_records_the_new_ner(ner_pipeline, tmp_path):
    report = replace_ner(DEFAULT_PIPELINE, ner_pipeline, tmp_path / "out")
    out = tmp_path / "out"
    assert report["ner_pipe"] == "sapbert_ner" and report["ner_shares_word_embeddings"] is False
    assert _digests(out / "sapbert_linker") == _digests(Path(DEFAULT_PIPELINE) / "sapbert_linker")
    nlp = spacy.load(out)
    assert nlp.pipe_names == ["sapbert_ner", "dictionary_entities", "abbreviation_entities", "sapbert_linker"]
    nlp("She had a heart attack.")  # runs end to end
    build = json.loads((out / "build.json").read_text())
    assert build["sapbert_package"] and build["ner"] == str(ner_pipeline)
    assert "sapbert_ner" in build["components_mb"] and "tok2vec" not in build["components_mb"]
    assert "`sapbert_ner`" in (out / "README.md").read_text()
    # how the NER runs is the package's (4 windows a batch, chosen for speed and memory), not the new model's 16
    shipped = spacy.util.load_config(Path(DEFAULT_PIPELINE) / "config.cfg")["components"]["sapbert_ner"]
    assert spacy.util.load_config(ner_pipeline / "config.cfg")["components"]["sapbert_ner"]["batch_size"] == 16
    assert nlp.config["components"]["sapbert_ner"]["batch_size"] == shipped["batch_size"] == 4
    assert nlp.get_pipe("sapbert_ner").cfg["batch_size"] == 4


def test_replace_ner_sets_a_new_default_threshold_and_the_card_keeps_the_high_precision_one(ner_pipeline, tmp_path):
    high = json.loads((Path(DEFAULT_PIPELINE) / "build.json").read_text())["calibration"]["threshold"]
    replace_ner(DEFAULT_PIPELINE, ner_pipeline, tmp_path / "out", threshold=0.5, threshold_reason="best F1 on dev")
    assert spacy.load(tmp_path / "out").get_pipe("sapbert_linker").threshold == 0.5
    assert _digests(tmp_path / "out" / "sapbert_linker") == _digests(Path(DEFAULT_PIPELINE) / "sapbert_linker")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "the threshold is 0.5 (best F1 on dev)" in card and f"high-precision threshold, {high}" in card
    assert "0.9 for CHEMICAL spans (`label_thresholds`" in card  # the per-label choice stays, as in the config
    assert spacy.load(tmp_path / "out").get_pipe("sapbert_linker").label_thresholds == {"CHEMICAL": 0.9}
    with pytest.raises(InputError, match="between 0 and 1"):
        replace_ner(DEFAULT_PIPELINE, ner_pipeline, tmp_path / "bad", threshold=1.5)


def test_replace_ner_refuses_what_is_not_a_package_or_a_ner(ner_pipeline, tmp_path):
    with pytest.raises(InputError, match="build.json missing"):
        replace_ner(ner_pipeline, ner_pipeline, tmp_path / "a")
    blank = tmp_path / "blank"
    spacy.blank("en").to_disk(blank)
    with pytest.raises(InputError, match="not a NER pipeline"):
        replace_ner(DEFAULT_PIPELINE, blank, tmp_path / "b")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(InputError):
        replace_ner(DEFAULT_PIPELINE, ner_pipeline, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
