"""The encoder on ONNX Runtime (:mod:`spacy_sapbert.encoding.onnx_bert`) against the native torch model."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spacy_sapbert.default import DEFAULT_PIPELINE
from spacy_sapbert.encoding import onnx_bert
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError

TEXTS = ["heart attack", "myocardial infarction", "breast cancer of the left side", "x", "renal failure", "",
         "Ünïcödé naïve café", "word " * 80, "BRCA1/2 (breast cancer 1) - [type II]"]
DEFAULT_ENCODER = Path(DEFAULT_PIPELINE) / "sapbert_linker" / "encoder"


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_onnx_backend_equals_native(tiny_bert, pooling):
    ours = Encoder(tiny_bert, pooling=pooling, device="cpu", backend="onnx")
    native = Encoder(tiny_bert, pooling=pooling, device="cpu", dtype="float32", backend="native")
    assert (ours.backend, ours.dtype, ours.device) == ("onnx", "float32", "cpu")
    np.testing.assert_allclose(ours.encode(TEXTS, batch_size=3), native.encode(TEXTS, batch_size=3), atol=1e-5)
    raw = ours.encode(TEXTS[:3], normalize=False)
    np.testing.assert_allclose(raw, native.encode(TEXTS[:3], normalize=False), atol=1e-4)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    assert ours.fingerprint == native.fingerprint and ours.dim == native.dim == 32


def test_onnx_backend_on_the_default_encoder():
    ours = Encoder(DEFAULT_ENCODER, backend="onnx")
    native = Encoder(DEFAULT_ENCODER, dtype="float32", backend="native")
    vectors = ours.encode(TEXTS)
    np.testing.assert_allclose(vectors, native.encode(TEXTS), atol=1e-5)
    assert ours.fingerprint == native.fingerprint  # the recorded one, checked against the files' digests
    # the session keeps its own copy of the weights; the table is read again from the file for the NER
    assert ours.model.word_embeddings.dtype == np.float16
    assert ours.model.word_embeddings.shape == (ours.model.settings.vocab_size, ours.dim)


def test_onnx_encoder_saves_its_folder(tiny_bert, tmp_path):
    ours = Encoder(tiny_bert, pooling="mean", device="cpu", backend="onnx")
    ours.save(tmp_path / "saved")
    back = Encoder(tmp_path / "saved", device="cpu", dtype="float32", backend="native")
    np.testing.assert_allclose(back.encode(TEXTS), ours.encode(TEXTS), atol=1e-5)
    assert back.fingerprint == ours.fingerprint
    with pytest.raises(InputError, match="needs the native backend"):
        ours.save(tmp_path / "half", weights_dtype="float16")


def test_onnx_backend_errors(tiny_bert, monkeypatch):
    with pytest.raises(InputError, match="CPU only"):
        Encoder(tiny_bert, device="cuda", backend="onnx")
    monkeypatch.setattr(onnx_bert, "available", lambda: False)
    with pytest.raises(InputError, match=r"spacy-sapbert\[onnx\]"):
        Encoder(tiny_bert, backend="onnx")


def test_auto_backend_without_torch(tiny_bert, monkeypatch):
    from spacy_sapbert.util import devices

    monkeypatch.setattr(devices, "torch_installed", lambda: False)
    assert Encoder(tiny_bert, device="cpu").backend == "onnx"
    monkeypatch.setattr(devices, "torch_installed", lambda: True)
    assert Encoder(tiny_bert, device="cpu").backend == "native"


def test_sessions_take_omp_num_threads_where_it_is_set(monkeypatch):
    from spacy_sapbert.encoding.onnx_bert import _threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    every = _threads()  # every CPU the process may use
    monkeypatch.setenv("OMP_NUM_THREADS", str(every + 2))
    assert _threads() == every + 2
    for unusable in ("", "0", "four"):  # not a count of threads
        monkeypatch.setenv("OMP_NUM_THREADS", unusable)
        assert _threads() == every
