"""sapbert_linker settings are checked when the pipe is added, before any model or KB is
loaded, with a message naming the setting and what it accepts; a ``spans_key`` that a
document lacks is reported instead of silently linking nothing."""
from __future__ import annotations

import logging

import pytest
import spacy
from spacy.tokens import Span

import spacy_sapbert.pipes.linker as component
import spacy_sapbert.pipes.linker_parts as component_parts
from spacy_sapbert.pipes.linker import SapBertLinker
from spacy_sapbert.linking.settings import SETTING_RULES, LinkerSettings
from spacy_sapbert.errors import InputError

from tests.linker_fixtures import write_small_kb

EXPECTED_RANGE = "expected null (no threshold) or a number from -1 to 1"

BAD_SETTINGS = [
    ("k", "25", "sapbert_linker setting 'k': expected an integer ≥ 1, got '25' (str)"),
    ("k", 0, "sapbert_linker setting 'k': expected an integer ≥ 1, got 0 (int)"),
    ("threshold", 1.5, f"sapbert_linker setting 'threshold': {EXPECTED_RANGE}"),
    ("threshold", -5, f"sapbert_linker setting 'threshold': {EXPECTED_RANGE}"),
    ("threshold", "0.5", f"sapbert_linker setting 'threshold': {EXPECTED_RANGE}"),
    ("max_entities_per_mention", 0, "setting 'max_entities_per_mention': expected an integer ≥ 1, got 0"),
    ("encode_batch_size", 0, "setting 'encode_batch_size': expected an integer ≥ 1, got 0"),
    ("encode_batch_size", "8", "setting 'encode_batch_size': expected an integer ≥ 1, got '8' (str)"),
    ("batch_size", 0, "setting 'batch_size': expected an integer ≥ 1, got 0"),  # the old name, still checked
    ("cache_size", -1, "setting 'cache_size': expected an integer ≥ 0 (0 turns the cache off), got -1 (int)"),
    ("max_length", 0, "setting 'max_length': expected null (the model folder's setting) or an integer ≥ 3"),
    ("max_length", "25", "setting 'max_length': expected null (the model folder's setting) or an integer ≥ 3"),
    ("device", "gpu", "setting 'device': expected one of auto, cpu, cuda, cuda:N, mps, got 'gpu' (str)"),
    ("precision", "int4", "setting 'precision': expected one of auto, float32, float16, bfloat16"),
    ("backend", "tensorrt", "setting 'backend': expected one of auto, native, onnx, transformers, got 'tensorrt' (str)"),
    ("index_kind", "lsh", "setting 'index_kind': expected one of flat, hnsw, ivfpq, pq, got 'lsh' (str)"),
    ("pooling", "max", "setting 'pooling': expected null (the model folder's setting) or one of cls, mean"),
    ("model", "", "setting 'model': expected a model folder or name (a non-empty string), got '' (str)"),
    ("kb", "", "setting 'kb': expected null or a knowledge base file (a non-empty string), got '' (str)"),
    ("index", "", "setting 'index': expected null or an index folder (a non-empty string), got '' (str)"),
    ("spans_key", "", "setting 'spans_key': expected null (link doc.ents) or a span group name"),
    ("extension", "not an identifier", "setting 'extension': expected a Python identifier"),
    ("label_to_types", "Disease", "setting 'label_to_types': expected null (no type filtering) or a mapping of span "
                                  "label → non-empty list of KB types"),
    ("label_to_types", {"DISEASE": "Disease"}, "setting 'label_to_types': expected null (no type filtering)"),
    ("label_to_types", {"DISEASE": []}, "got {'DISEASE': []} (dict)"),
    ("label_to_types", {"DISEASE": [1]}, "setting 'label_to_types': expected null"),
    ("label_to_types", {"": ["Disease"]}, "setting 'label_to_types': expected null"),
    ("label_thresholds", {"CHEMICAL": 1.5}, "setting 'label_thresholds': expected null or a mapping of span label → "
                                            "threshold"),
    ("label_thresholds", {"CHEMICAL": None}, "setting 'label_thresholds': expected null"),
    ("label_thresholds", 0.9, "setting 'label_thresholds': expected null"),
    ("head_fallback", "DISEASE", "setting 'head_fallback': expected null or a list of span labels"),
    ("head_fallback", ["DISEASE", ""], "setting 'head_fallback': expected null or a list of span labels"),
    ("skip_newer_mesh", "Disease", "setting 'skip_newer_mesh': expected null or a list of KB types"),
    ("skip_newer_mesh", [1], "setting 'skip_newer_mesh': expected null or a list of KB types"),
]


@pytest.fixture
def nothing_heavy(monkeypatch):
    """Fail if the pipe tries to load a model or a KB: the settings are checked first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model or KB was loaded before the settings were checked")

    monkeypatch.setattr(component_parts, "Encoder", refuse)
    monkeypatch.setattr(component.KnowledgeBase, "from_jsonl", refuse)


@pytest.mark.parametrize("setting, value, message", BAD_SETTINGS, ids=[f"{s}={v!r}" for s, v, _ in BAD_SETTINGS])
def test_add_pipe_rejects_a_bad_setting_by_name(setting, value, message, nothing_heavy):
    nlp = spacy.blank("en")
    with pytest.raises(InputError) as err:
        nlp.add_pipe("sapbert_linker", config={"kb": "kb.jsonl", setting: value})
    assert isinstance(err.value, ValueError) and err.value.field == setting
    assert message in str(err.value), str(err.value)
    assert "sapbert_linker" not in nlp.pipe_names
    assert not any(str(r).startswith("spacy-sapbert") for r in nlp.meta.get("requirements", []))


def test_precision_error_names_precision_not_dtype(nothing_heavy):
    nlp = spacy.blank("en")
    with pytest.raises(InputError) as err:
        nlp.add_pipe("sapbert_linker", config={"precision": "int4"})
    assert err.value.field == "precision" and "dtype" not in str(err.value)
    assert "'int4'" in str(err.value)


def test_direct_construction_is_checked_too(nothing_heavy):
    """Values that a spaCy config cannot hold (NaN, strings for bools) reach the pipe when it is built in Python."""
    nlp = spacy.blank("en")
    for setting in ("resolve_abbreviations", "set_kb_id", "split_composites"):
        with pytest.raises(InputError, match=f"setting '{setting}': expected true or false, got 'yes' \\(str\\)"):
            SapBertLinker(nlp, **{setting: "yes"})
    with pytest.raises(InputError, match="setting 'k': expected an integer ≥ 1, got True \\(bool\\)"):
        SapBertLinker(nlp, k=True)
    with pytest.raises(InputError, match="my_linker setting 'threshold': expected null .* got nan \\(float\\)"):
        SapBertLinker(nlp, "my_linker", threshold=float("nan"))


def test_every_factory_setting_has_a_rule():
    assert list(component.SETTING_RULES) == list(component.DEFAULT_CONFIG)
    assert component.DEFAULT_CONFIG == LinkerSettings().as_config()  # written once, in LinkerSettings
    with pytest.raises(InputError, match="setting 'k'"):
        LinkerSettings(k=0)  # an instance is always valid, however it is made


def test_the_old_batch_size_key_is_read_as_encode_batch_size(nothing_heavy, caplog):
    nlp = spacy.blank("en")
    with caplog.at_level(logging.INFO, logger="spacy_sapbert.linking.settings"):
        pipe = nlp.add_pipe("sapbert_linker", config={"kb": "kb.jsonl", "batch_size": 8})
    assert pipe.encode_batch_size == 8 and pipe.settings.encode_batch_size == 8
    pipe.threshold = 0.5  # a setting recorded: the old key goes, its value stays under the new one
    config = nlp.get_pipe_config("sapbert_linker")
    assert config["batch_size"] is None and config["encode_batch_size"] == 8
    (record,) = [r for r in caplog.records if "deprecated" in r.getMessage()]
    assert record.levelno == logging.WARNING and "'encode_batch_size'" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="spacy_sapbert.linking.settings"):  # the default: nothing to warn about
        nlp.add_pipe("sapbert_linker", name="second", config={"kb": "kb.jsonl", "batch_size": 64})
    assert [r.levelno for r in caplog.records if "deprecated" in r.getMessage()] == [logging.INFO]
    with pytest.raises(InputError, match="setting 'batch_size': expected null .*old name of 'encode_batch_size'"):
        nlp.add_pipe("sapbert_linker", name="third", config={"kb": "kb.jsonl", "batch_size": 8,
                                                             "encode_batch_size": 16})
    assert SapBertLinker(nlp, batch_size=4).encode_batch_size == 4  # in Python too


@pytest.mark.parametrize("setting, value", [
    ("threshold", -1), ("threshold", 1), ("threshold", 0.0), ("threshold", 0.85), ("threshold", None),
    ("k", 1), ("device", "CPU"), ("device", "cuda:1"), ("device", "mps"), ("precision", "bf16"),
    ("precision", "torch.float16"), ("backend", "Native"), ("pooling", "MEAN"), ("max_length", 3),
    ("cache_size", 0), ("spans_key", "sc"), ("index_kind", "pq"), ("label_to_types", None),
    ("label_to_types", {"GENE": ["Gene", "Protein"]}), ("label_to_types", {}),
    ("label_thresholds", None), ("label_thresholds", {"CHEMICAL": 0.9}), ("label_thresholds", {}),
    ("head_fallback", None), ("head_fallback", ["DISEASE"]), ("head_fallback", []),
    ("skip_newer_mesh", None), ("skip_newer_mesh", ["Disease"]), ("skip_newer_mesh", []),
])
def test_good_settings_are_accepted_without_loading_anything(setting, value, nothing_heavy):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("sapbert_linker", config={"kb": "kb.jsonl", setting: value})
    assert getattr(pipe, setting) == value
    assert not pipe.is_ready


def test_settings_changed_later_are_checked_too(nothing_heavy):
    pipe = spacy.blank("en").add_pipe("sapbert_linker", config={"kb": "kb.jsonl"})
    with pytest.raises(InputError, match="setting 'threshold': expected null"):
        pipe.threshold = 1.5
    with pytest.raises(InputError, match="setting 'k': expected an integer ≥ 1, got '3' \\(str\\)"):
        pipe.k = "3"
    with pytest.raises(InputError, match="setting 'max_entities_per_mention'"):
        pipe.max_entities_per_mention = 0
    assert (pipe.threshold, pipe.k, pipe.max_entities_per_mention) == (None, 25, 5)
    pipe.threshold, pipe.k = -1.0, 3
    assert (pipe.threshold, pipe.k) == (-1.0, 3)
    assert pipe.settings == LinkerSettings(kb="kb.jsonl", threshold=-1.0, k=3)
    pipe.device = "cpu"  # nothing is loaded yet: any setting may change
    with pytest.raises(InputError, match="unknown setting"):
        pipe.configure(treshold=0.5)


def test_a_loaded_pipe_and_its_linker_share_one_settings_object(tiny_bert, tmp_path):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(write_small_kb(tmp_path)),
                                                  "pooling": "mean", "threshold": 0.5})
    pipe.initialize()
    assert pipe.settings is pipe.linker.settings
    pipe.threshold = 0.7
    assert pipe.linker.threshold == 0.7 and pipe.settings is pipe.linker.settings
    pipe.linker.threshold = None  # what the demo does: the pipe sees it too
    assert pipe.threshold is None and pipe.settings.threshold is None
    pipe.extension = "other_ents"
    assert Span.has_extension("other_ents")
    with pytest.raises(InputError, match="device cannot change once the encoder, KB and index are loaded"):
        pipe.device = "cpu"
    pipe.device = "auto"  # unchanged: fine


def test_encoder_dtype_check_names_the_callers_setting():
    from spacy_sapbert.encoding.encoder import check_dtype

    assert check_dtype("FP16") == "float16" and check_dtype(None) == "auto"
    assert check_dtype("torch.bfloat16") == "bfloat16"
    with pytest.raises(InputError) as err:
        check_dtype("int4", setting="--precision")
    assert err.value.field == "--precision" and "unknown --precision 'int4'" in str(err.value)
    with pytest.raises(InputError, match="field 'dtype': unknown dtype 'int4'"):
        check_dtype("int4")


# -- spans_key naming a group a document lacks -------------------------------------------------
def test_missing_span_group_is_reported_once_not_silent(tiny_bert, tmp_path, caplog):
    kb_file = write_small_kb(tmp_path)
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "pooling": "mean",
                                                  "spans_key": "sc"})
    docs = []
    for text in ("Plaquenil after a heart attack", "heart attack"):
        doc = nlp.make_doc(text)
        doc.spans["ents_found"] = [Span(doc, 0, 1, label="X")]
        doc.spans["ruler"] = []
        docs.append(doc)
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert.pipes.linker"):
        linked = list(pipe.pipe(docs))
        pipe(docs[0])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "spans_key" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    message = warnings[0].getMessage()
    assert "'sc'" in message and "['ents_found', 'ruler']" in message, message
    assert all("sc" not in doc.spans for doc in linked)  # nothing linked, nothing invented
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert.pipes.linker"):
        present = nlp.make_doc("heart attack")
        present.spans["sc"] = [Span(present, 0, 2, label="DIS")]
        assert pipe(present).spans["sc"][0].kb_id_ == "D009203"
    assert not caplog.records


def test_missing_span_group_in_a_doc_without_groups_says_so(tiny_bert, tmp_path, caplog):
    kb_file = write_small_kb(tmp_path)
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "pooling": "mean",
                                                  "spans_key": "sc"})
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert.pipes.linker"):
        pipe(nlp.make_doc("heart attack"))
    assert "'sc'" in caplog.text and "no span groups" in caplog.text


LIVE_CHANGES = {"k": 3, "threshold": 0.5, "max_entities_per_mention": 2, "resolve_abbreviations": False,
                "spans_key": "sc", "extension": "other_ents", "set_kb_id": False, "split_composites": True, "cache_size": 7,
                "rerank_max_gap": 0.3, "rescore_gap": 0.0, "label_to_types": None,
                "label_thresholds": {"DISEASE": 0.7}, "head_fallback": ["DISEASE"],
                "skip_newer_mesh": ["Disease"]}
"""A value other than the default for each setting a loaded pipe follows."""
LOAD_CHANGES = {"encode_batch_size": 8, "device": "cpu", "precision": "float32", "backend": "transformers",
                "index_kind": "hnsw", "pooling": "cls", "max_length": 12,
                "label_to_types": {"DISEASE": ["Disease"]}}
"""Settings read when the parts load: changed before they do."""
NAMING_PARTS = {"model", "kb", "index", "rerank", "annotated_names", "exact_names"}
"""Where the parts come from: a saved pipe carries its own copies (tests of to_disk cover them)."""


def test_every_setting_is_covered_by_the_round_trip_test():
    assert set(LIVE_CHANGES) | set(LOAD_CHANGES) | NAMING_PARTS == set(SETTING_RULES)


def _round_trip(nlp, folder):
    nlp.to_disk(folder)
    return spacy.load(folder).get_pipe("sapbert_linker").settings


def test_settings_changed_on_a_loaded_pipe_are_what_spacy_load_restores(tiny_bert, tmp_path):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(write_small_kb(tmp_path)),
                                                  "pooling": "mean"})
    pipe.initialize()
    for setting, value in LIVE_CHANGES.items():
        assert getattr(pipe, setting) != value, setting
        setattr(pipe, setting, value)
    pipe.linker.threshold = 0.25  # through the linker, as the demo's slider does
    restored = _round_trip(nlp, tmp_path / "saved")
    for setting, value in {**LIVE_CHANGES, "threshold": 0.25}.items():
        assert getattr(restored, setting) == value, setting
    assert restored == pipe.settings


def test_settings_changed_before_the_parts_load_are_saved_too(tiny_bert, tmp_path):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(write_small_kb(tmp_path)),
                                                  "pooling": "mean", "batch_size": 256})  # the old key, too
    for setting, value in LOAD_CHANGES.items():
        setattr(pipe, setting, value)
    nlp.rename_pipe("sapbert_linker", "linker")
    nlp.rename_pipe("linker", "sapbert_linker")  # found by identity, not by the name it was made with
    restored = _round_trip(nlp, tmp_path / "saved")
    for setting, value in LOAD_CHANGES.items():
        assert getattr(restored, setting) == value, setting
