"""Our model folders load in sentence-transformers and give the Encoder's vectors (real MiniLM).

Both writers are covered: the trainer's export (``save_model``) and ``Encoder.save`` (also as a
saved pipeline's ``sapbert_linker/encoder``); and the module files leave the fingerprint alone,
the shipped default's (which its index records) included.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import spacy

from spacy_sapbert.default import default_encoder_path
from spacy_sapbert.encoding.encoder import SETTINGS_FILE, Encoder, read_settings
from spacy_sapbert.encoding.st_files import FILES, POOLING_DIR, pooling_config, pooling_from_config
from spacy_sapbert.training.selfalign import export
from spacy_sapbert.training.common.basemodel import load_base_model

from tests.minilm_kb import minilm_kb

sentence_transformers = pytest.importorskip("sentence_transformers")

TEXTS = ["heart attack", "Myocardial Infarction", "hydroxychloroquine sulphate", "type II diabetes", "x", "",
         "carcinoma of the lung, non-small cell, stage IV, with metastases to the brain, liver and bones "
         "and a very long tail that runs past the twenty-five tokens of max_length"]
SHIPPED_FINGERPRINT = "a5d48c2c5a2d314b"  # what the shipped default's index records


def _st_vectors(folder: Path) -> np.ndarray:
    model = sentence_transformers.SentenceTransformer(str(folder), device="cpu")  # 6.x wants a str, not a Path
    return model.encode(TEXTS, normalize_embeddings=False)  # its own Normalize module normalises


def _assert_same_vectors(ours: np.ndarray, theirs: np.ndarray) -> float:
    ours, theirs = ours.astype(np.float64), theirs.astype(np.float64)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(np.linalg.norm(theirs, axis=1), 1.0, atol=1e-4)  # Normalize ran
    cosines = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() >= 0.9999, cosines
    return float(np.abs(cosines - 1).max())


def _check_module_files(folder: Path, pooling: str, max_length: int, dim: int) -> None:
    for name in FILES:
        assert (folder / name).is_file(), name
    modules = json.loads((folder / "modules.json").read_text())
    assert [(m["path"], m["type"].rsplit(".", 1)[-1]) for m in modules] == [
        ("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    pooling_cfg = json.loads((folder / POOLING_DIR / "config.json").read_text())
    assert pooling_cfg["word_embedding_dimension"] == dim
    assert pooling_cfg["pooling_mode_mean_tokens"] is (pooling == "mean")
    assert pooling_cfg["pooling_mode_cls_token"] is (pooling == "cls")
    assert json.loads((folder / "sentence_bert_config.json").read_text()) == {"max_seq_length": max_length,
                                                                              "do_lower_case": False}


class _OneProcess:
    """The part of an ``accelerate.Accelerator`` that ``export.save_model`` uses, for one process."""

    is_main_process = True

    def wait_for_everyone(self) -> None:
        pass

    def unwrap_model(self, model):
        return model


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_trainer_export_loads_in_sentence_transformers(minilm_path, tmp_path, monkeypatch, pooling):
    model, tokenizer, _ = load_base_model(str(minilm_path))
    output = tmp_path / "model"
    written_in = []
    real_writer = export.write_sentence_transformers_files

    def spy(folder, *args):
        written_in.append(Path(folder))
        assert not output.exists()  # inside the temporary folder, before the swap
        return real_writer(folder, *args)

    monkeypatch.setattr(export, "write_sentence_transformers_files", spy)
    export.save_model(output, _OneProcess(), model, tokenizer,
                      lambda: {"pooling": pooling, "max_length": 25, "normalize": True, "training": {}})
    assert len(written_in) == 1 and written_in[0].parent == output.parent and written_in[0] != output
    assert not written_in[0].exists() and not list(tmp_path.glob(".model.tmp-*"))
    _check_module_files(output, pooling, 25, 384)

    ours = Encoder(output, device="cpu", dtype="float32")
    assert (ours.pooling, ours.max_length) == (pooling, 25)  # from sapbert.json
    _assert_same_vectors(ours.encode(TEXTS), _st_vectors(output))


@pytest.mark.parametrize("pooling,weights_dtype,backend", [("mean", "float16", "native"), ("cls", "float32", "native"),
                                                           ("cls", "float16", "transformers")])
def test_encoder_save_loads_in_sentence_transformers(minilm_path, tmp_path, pooling, weights_dtype, backend):
    encoder = Encoder(minilm_path, pooling=pooling, max_length=32, device="cpu", dtype="float32", backend=backend)
    if weights_dtype == "float16":
        encoder.round_weights("float16")
    folder = encoder.save(tmp_path / "saved", weights_dtype=weights_dtype)
    _check_module_files(folder, pooling, 32, 384)
    # float16 weights compute in float32 (config.json), here as in the encoder, not in half precision on a CPU
    assert json.loads((folder / "config.json").read_text())["dtype"] == "float32"
    ours = Encoder(folder, device="cpu", dtype="float32")
    assert ours.fingerprint == encoder.fingerprint
    _assert_same_vectors(ours.encode(TEXTS), _st_vectors(folder))


def test_saved_pipeline_encoder_folder_loads_in_sentence_transformers(minilm_path, tmp_path):
    kb_path = minilm_kb().to_jsonl(tmp_path / "mesh30.jsonl")
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(minilm_path), "kb": str(kb_path), "pooling": "cls",
                                           "precision": "float32"})
    nlp.to_disk(tmp_path / "pipeline")
    folder = tmp_path / "pipeline" / "sapbert_linker" / "encoder"
    _check_module_files(folder, "cls", 25, 384)  # cls, though the MiniLM folder's own files say mean

    loaded = spacy.load(tmp_path / "pipeline").get_pipe("sapbert_linker").encoder
    assert loaded.fingerprint == nlp.get_pipe("sapbert_linker").encoder.fingerprint
    _assert_same_vectors(loaded.encode(TEXTS), _st_vectors(folder))


def test_shipped_default_loads_in_sentence_transformers_with_its_fingerprint(tmp_path):
    folder = default_encoder_path()
    _check_module_files(folder, "mean", 25, 384)
    ours = Encoder("sapbert-default", device="cpu", dtype="float32")
    assert ours.fingerprint == SHIPPED_FINGERPRINT
    _assert_same_vectors(ours.encode(TEXTS), _st_vectors(folder))

    # The same folder without the module files: the same fingerprint (they are not part of it).
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in folder.iterdir():
        if path.is_file() and path.name not in FILES:
            (bare / path.name).symlink_to(path)
    assert not (bare / "modules.json").exists()
    assert Encoder(bare, device="cpu", dtype="float32").fingerprint == SHIPPED_FINGERPRINT


def test_module_files_leave_the_fingerprint_alone(tiny_bert, tmp_path):
    encoder = Encoder(tiny_bert, pooling="mean", device="cpu", dtype="float32")
    folder = encoder.save(tmp_path / "saved")
    _check_module_files(folder, "mean", 25, 32)
    with_files = Encoder(folder, device="cpu", dtype="float32").fingerprint
    for name in ("modules.json", "sentence_bert_config.json"):
        (folder / name).unlink()
    for name in ("1_Pooling", "2_Normalize"):
        shutil.rmtree(folder / name)
    assert Encoder(folder, device="cpu", dtype="float32").fingerprint == with_files == encoder.fingerprint
    assert json.loads((folder / SETTINGS_FILE).read_text())["fingerprint"] == with_files


def test_one_mapping_reads_what_it_writes(tmp_path):
    for pooling in ("cls", "mean"):
        assert pooling_from_config(pooling_config(pooling, 8)) == pooling
        folder = tmp_path / pooling
        (folder / POOLING_DIR).mkdir(parents=True)
        (folder / POOLING_DIR / "config.json").write_text(json.dumps(pooling_config(pooling, 8)))
        assert read_settings(folder) == {"pooling": pooling}  # no sapbert.json: the pooling config decides
    # sentence-transformers 6 saves one pooling_mode instead of the flags
    assert pooling_from_config({"embedding_dimension": 8, "pooling_mode": "cls"}) == "cls"
    assert pooling_from_config({"embedding_dimension": 8, "pooling_mode": ["mean"]}) == "mean"
    # modes the encoder does not compute are not taken for one it does
    assert pooling_from_config({"pooling_mode": "max"}) is None
    assert pooling_from_config({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}) is None
    assert pooling_from_config({"word_embedding_dimension": 8}) is None
