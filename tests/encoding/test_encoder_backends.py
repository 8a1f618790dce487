"""The native BERT backend (no transformers import) against transformers, and CPU bf16."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from spacy_sapbert.encoding import encoder as encoder_mod
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["heart attack", "myocardial infarction", "breast cancer of the left side", "x", "renal failure", "",
         "Ünïcödé naïve café", "word " * 80, "BRCA1/2 (breast cancer 1) - [type II]"]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_native_backend_equals_transformers(tiny_bert, pooling):
    ours = Encoder(tiny_bert, pooling=pooling, device="cpu", dtype="float32", backend="native")
    theirs = Encoder(tiny_bert, pooling=pooling, device="cpu", dtype="float32", backend="transformers")
    assert (ours.backend, theirs.backend) == ("native", "transformers")
    assert ours.tokenizer(TEXTS, truncation=True, max_length=ours.max_length)["input_ids"] == \
        theirs.tokenizer(TEXTS, truncation=True, max_length=theirs.max_length)["input_ids"]
    np.testing.assert_allclose(ours.encode(TEXTS, batch_size=3), theirs.encode(TEXTS, batch_size=3), atol=1e-5)
    assert ours.fingerprint == theirs.fingerprint and ours.dim == theirs.dim == 32


def test_native_backend_on_real_minilm(minilm_path):
    ours = Encoder(minilm_path, device="cpu", dtype="float32")
    theirs = Encoder(minilm_path, device="cpu", dtype="float32", backend="transformers")
    assert ours.backend == "native" and ours.pooling == "mean"
    np.testing.assert_allclose(ours.encode(TEXTS), theirs.encode(TEXTS), atol=1e-5)
    assert ours.fingerprint == theirs.fingerprint


def test_native_save_is_a_transformers_folder(tiny_bert, tmp_path):
    ours = Encoder(tiny_bert, pooling="mean", device="cpu", dtype="float32", backend="native")
    ours.round_weights("float16")
    ours.save(tmp_path / "saved")
    assert not list((tmp_path / "saved").glob("*.bin"))
    back = {b: Encoder(tmp_path / "saved", device="cpu", dtype="float32", backend=b) for b in ("native", "transformers")}
    for loaded in back.values():
        assert loaded.pooling == "mean" and loaded.fingerprint == ours.fingerprint
        np.testing.assert_allclose(loaded.encode(TEXTS), ours.encode(TEXTS), atol=1e-5)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "saved" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}


def test_backend_choice_and_errors(tiny_bert, tmp_path):
    folder = tmp_path / "no-tokenizer-json"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        if (tiny_bert / name).is_file():
            (folder / name).write_bytes((tiny_bert / name).read_bytes())
    assert Encoder(folder, device="cpu", dtype="float32").backend == "transformers"
    with pytest.raises(InputError, match="native backend cannot run this model: no tokenizer.json"):
        Encoder(folder, device="cpu", backend="native")
    with pytest.raises(InputError, match="unknown backend"):
        Encoder(tiny_bert, device="cpu", backend="tensorrt")
    relative = tmp_path / "relative-positions"
    relative.mkdir()
    for item in tiny_bert.iterdir():
        (relative / item.name).write_bytes(item.read_bytes())
    config = json.loads((relative / "config.json").read_text())
    (relative / "config.json").write_text(json.dumps(dict(config, position_embedding_type="relative_key")))
    assert Encoder(relative, device="cpu", dtype="float32").backend == "transformers"
    broken = tmp_path / "wrong-shapes"
    broken.mkdir()
    for item in tiny_bert.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    (broken / "config.json").write_text(json.dumps(dict(config, intermediate_size=48)))
    with pytest.raises(InputError, match="intermediate.dense.weight has shape"):
        Encoder(broken, device="cpu", backend="native")


def test_cpu_precision_auto_follows_the_cpu(tiny_bert, monkeypatch):
    monkeypatch.setattr(encoder_mod, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(encoder_mod, "cpu_prefers_bf16", lambda: True)
    fast = Encoder(tiny_bert, pooling="mean", device="cpu")
    assert fast.dtype == "bfloat16" and fast.autocast
    monkeypatch.setattr(encoder_mod, "cpu_prefers_bf16", lambda: False)  # native bf16, slower than float32
    plain = Encoder(tiny_bert, pooling="mean", device="cpu")
    assert plain.dtype == "float32" and not plain.autocast
    assert Encoder(tiny_bert, pooling="mean", device="cpu", dtype="bf16").dtype == "bfloat16"  # asked for: kept
    # autocast changes the compute only: same weights, same fingerprint, nearly the same vectors
    assert fast.fingerprint == plain.fingerprint
    a, b = fast.encode(TEXTS), plain.encode(TEXTS)
    assert not np.array_equal(a, b)
    assert float((a * b).sum(1).min()) > 0.99
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_default_pipeline_loads_without_transformers():
    # threshold off: the default abstains on "acute myocardial infarction" (two close concepts)
    code = ("import sys, spacy_sapbert; nlp = spacy_sapbert.load(); nlp.get_pipe('sapbert_linker').threshold = None; "
            "doc = nlp('Patients with acute myocardial infarction received aspirin.'); "
            "print(sorted(e.kb_id_ for e in doc.ents)); print('transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "False", out.stderr[-2000:]
    assert "D009203|OMIM:608446" in lines[-2] and "D001241" in lines[-2]


def test_component_precision_setting(tiny_bert, tmp_path, monkeypatch):
    import spacy

    from tests.linker_fixtures import write_small_kb

    monkeypatch.setattr(encoder_mod, "cpu_has_native_bf16", lambda: True)
    monkeypatch.setattr(encoder_mod, "cpu_prefers_bf16", lambda: True)
    kb_file = write_small_kb(tmp_path, "small.jsonl.gz")
    pipes = {}
    for precision in ("auto", "float32", "bfloat16"):
        nlp = spacy.blank("en")
        nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "pooling": "mean",
                                               "device": "cpu", "precision": precision})
        pipes[precision] = nlp.get_pipe("sapbert_linker")
        assert pipes[precision].encoder.dtype == ("float32" if precision == "float32" else "bfloat16")
    nlp.to_disk(tmp_path / "saved")
    assert spacy.load(tmp_path / "saved").get_pipe("sapbert_linker").encoder.dtype == "bfloat16"
    overridden = spacy.load(tmp_path / "saved", config={"components.sapbert_linker.backend": "transformers",
                                                         "components.sapbert_linker.precision": "float32"})
    encoder = overridden.get_pipe("sapbert_linker").encoder
    assert (encoder.backend, encoder.dtype) == ("transformers", "float32")
    assert pipes["auto"].encoder.backend == "native"
    nlp = spacy.blank("en")
    with pytest.raises(InputError, match="setting 'precision': expected one of auto, float32"):
        nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "precision": "int4"})


def test_loading_draws_no_random_weights_and_leaves_initialisation_as_it_was(tiny_bert):
    """The native loader builds its layers without their random initial weights (every one comes
    from the file): the global random state is untouched by a load, the loaded weights are the
    file's, and layers built afterwards are initialised as usual."""
    from safetensors.torch import load_file

    from spacy_sapbert.encoding import bert

    config = json.loads((tiny_bert / "config.json").read_text())
    torch.manual_seed(7)
    expected_next = torch.rand(3)
    torch.manual_seed(7)
    model = bert.BertEncoder.from_folder(tiny_bert, config)
    assert torch.equal(torch.rand(3), expected_next)  # nothing was drawn while loading
    stored = load_file(str(tiny_bert / bert.WEIGHTS_FILE))
    assert torch.equal(model.state_dict()["encoder.layer.0.attention.self.query.weight"],
                       stored["encoder.layer.0.attention.self.query.weight"].float())
    with pytest.raises(RuntimeError, match="boom"), bert.unset_weights():
        raise RuntimeError("boom")
    torch.manual_seed(0)
    a = torch.nn.Linear(4, 4).weight.detach().clone()
    torch.manual_seed(0)
    assert torch.equal(torch.nn.Linear(4, 4).weight, a) and a.abs().sum() > 0  # drawn, from the seed


def test_gc_paused_restores_the_collector():
    import gc

    from spacy_sapbert.util.gc_pause import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller's own pause is kept
    finally:
        gc.enable()


def test_unset_weights_skips_the_draws_of_the_calling_thread_only():
    import threading

    from spacy_sapbert.encoding import bert

    drawn = {}

    def other_thread():
        torch.manual_seed(0)  # the global generator: this thread's layer must draw from it
        drawn["other"] = torch.nn.Linear(8, 8).weight.detach().clone()

    with bert.unset_weights():
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    torch.manual_seed(0)
    assert torch.equal(drawn["other"], torch.nn.Linear(8, 8).weight)
