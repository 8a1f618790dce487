"""An inference encoder under CPU bf16 autocast keeps its linear layers in bf16 (``half_linears``): the same
vectors to the bit, the same fingerprint, and ``save`` writes the file's float weights, not the rounded ones."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from spacy_sapbert.default import DEFAULT_MODEL
from spacy_sapbert.encoding.encoder import Encoder, resolve_model_path
from spacy_sapbert.errors import InputError

TEXTS = ["renal failure", "Hydroxychloroquine retinopathy", "a longer mention of chronic kidney disease", "ms"]


def _linear_dtypes(encoder: Encoder) -> set:
    return {m.weight.dtype for m in encoder.model.modules() if isinstance(m, torch.nn.Linear)}


def test_bf16_linears_encode_to_the_bit_keep_the_fingerprint_and_save_the_float_weights(tmp_path):
    plain = Encoder(DEFAULT_MODEL, device="cpu", dtype="bfloat16", backend="native")
    half = Encoder(DEFAULT_MODEL, device="cpu", dtype="bfloat16", backend="native", half_linears=True)
    assert _linear_dtypes(plain) == {torch.float32} and _linear_dtypes(half) == {torch.bfloat16}
    assert np.array_equal(half.encode(TEXTS), plain.encode(TEXTS))
    assert half.fingerprint == plain.fingerprint
    a, b = plain.save(tmp_path / "plain"), half.save(tmp_path / "half")
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert json.loads((b / "sapbert.json").read_text()) == json.loads((a / "sapbert.json").read_text())
    reloaded = Encoder(b, device="cpu", dtype="bfloat16", backend="native", half_linears=True)
    assert reloaded.fingerprint == plain.fingerprint and np.array_equal(reloaded.encode(TEXTS), plain.encode(TEXTS))
    with pytest.raises(InputError, match="half_linears"):
        half.round_weights("float16")
    # the file it read its float weights from replaced by other weights: saving refuses rather than write them
    copy = Encoder(b, device="cpu", dtype="bfloat16", backend="native", half_linears=True)
    Encoder(tmp_path / "plain", device="cpu", dtype="float32", backend="native")  # (still loadable)
    from safetensors.torch import load_file, save_file

    state = load_file(str(b / "model.safetensors"))
    state = {k: (v + 0.5 if k.endswith("query.weight") else v) for k, v in state.items()}
    save_file(state, str(b / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(InputError, match="no longer holds them"):
        copy.save(tmp_path / "again")


def test_half_linears_only_where_autocast_computes_in_bf16():
    float32 = Encoder(DEFAULT_MODEL, device="cpu", dtype="float32", backend="native", half_linears=True)
    assert _linear_dtypes(float32) == {torch.float32}


def test_a_folder_without_a_recorded_fingerprint_hashes_the_float_weights(tmp_path):
    """The bf16 linear layers are read straight from the file, so the hash is taken of the file's float weights:
    the same fingerprint as the float model's and as the one the shipped folder records. The word-piece table
    stays as stored (float16), frozen."""
    import shutil

    folder = shutil.copytree(resolve_model_path(DEFAULT_MODEL), tmp_path / "model")
    settings = json.loads((folder / "sapbert.json").read_text())
    recorded = settings.pop("fingerprint")
    (folder / "sapbert.json").write_text(json.dumps(settings))
    half = Encoder(folder, device="cpu", dtype="bfloat16", backend="native", half_linears=True)
    plain = Encoder(folder, device="cpu", dtype="float32", backend="native")
    assert _linear_dtypes(half) == {torch.bfloat16} and _linear_dtypes(plain) == {torch.float32}
    assert half.fingerprint == plain.fingerprint == recorded
    for encoder in (half, plain):
        table = encoder.model.embeddings.word_embeddings.weight
        assert table.dtype == torch.float16 and not table.requires_grad
    assert all(not m.weight.requires_grad for m in half.model.modules() if isinstance(m, torch.nn.Linear))


def test_the_recorded_fingerprint_is_taken_only_while_the_files_are_the_recorded_ones(tmp_path, monkeypatch):
    """The files' digests are hashed on a second thread while the weights load (PendingDigests): the same
    digests as hashing them in line, the recorded fingerprint used while they match, and a file edited since
    (the tokenizer) makes the load hash the weights instead; a folder gone before its digests are read is
    an error the caller sees."""
    import shutil

    import spacy_sapbert.encoding.encoder as encoder_module
    from spacy_sapbert.encoding.recorded import DIGESTS_KEY, PendingDigests, file_digests, recorded_fingerprint

    taken = []

    def spy(*args):
        assert isinstance(args[3], PendingDigests)  # the digests were started before the weights loaded
        taken.append(recorded_fingerprint(*args))
        return taken[-1]

    monkeypatch.setattr(encoder_module, "recorded_fingerprint", spy)
    folder = shutil.copytree(resolve_model_path(DEFAULT_MODEL), tmp_path / "model")
    settings = json.loads((folder / "sapbert.json").read_text())
    assert PendingDigests(folder).result() == file_digests(folder) == settings[DIGESTS_KEY]
    current = {"pooling": settings["pooling"], "max_length": settings["max_length"]}
    assert recorded_fingerprint(folder, settings, current, PendingDigests(folder)) == settings["fingerprint"]
    assert recorded_fingerprint(folder, settings, dict(current, max_length=7), PendingDigests(folder)) is None
    loaded = Encoder(folder, device="cpu", dtype="bfloat16", backend="native", half_linears=True)
    assert taken == [settings["fingerprint"]] and loaded.fingerprint == settings["fingerprint"]
    with open(folder / "tokenizer_config.json", "a", encoding="utf-8") as handle:
        handle.write("\n")
    assert recorded_fingerprint(folder, settings, current, PendingDigests(folder)) is None
    edited = Encoder(folder, device="cpu", dtype="bfloat16", backend="native", half_linears=True)
    assert taken[-1] is None and edited.fingerprint == settings["fingerprint"]  # the weights hashed: the same
    from spacy_sapbert.encoding.recorded import worth_hashing

    assert worth_hashing(folder, settings, {"pooling": settings["pooling"], "max_length": None})
    assert not worth_hashing(folder, settings, {"pooling": "cls" if settings["pooling"] != "cls" else "mean"})
    pending = PendingDigests(tmp_path / "gone")
    with pytest.raises(OSError):
        pending.result()
