"""Issue 32, items 1 and 5: a model folder is checked before use, and what goes wrong on the disk
is one ``error:`` line, never a traceback or a silently wrong answer.

The folders are made the way users break them: a model copied without its tokenizer files (only
``tokenizer_config.json``, from which transformers builds a 5-token tokenizer), a tokenizer of
another model, a weights file cut short, a header length of absurd size; and a run whose disk
fills up (the file-size limit of the process stands in for a full disk: the write fails the same
way, with an OSError)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.encoding.folder_check import check_model_folder
from spacy_sapbert.errors import InputError

from tests.linker_fixtures import write_small_kb

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _copy(tiny_bert: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(tiny_bert, tmp_path / name))


def _link(model: Path, kb: Path):
    return runner.invoke(app, ["link", "aspirin", "heart attack", "--kb", str(kb), "--model", str(model),
                               "--device", "cpu"])


def _one_error_line(out, *needles: str) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_the_tiny_model_passes_the_checks(tiny_bert):
    check_model_folder(tiny_bert)  # the fixture every other test loads: the checks must not refuse a good folder


def test_a_model_without_its_tokenizer_files_is_refused_before_linking(tiny_bert, tmp_path):
    model = _copy(tiny_bert, tmp_path, "no-tokenizer")
    for name in ("tokenizer.json", "vocab.txt", "special_tokens_map.json"):
        (model / name).unlink(missing_ok=True)
    assert (model / "tokenizer_config.json").is_file()
    out = _link(model, write_small_kb(tmp_path))
    assert out.exit_code == 2
    _one_error_line(out, str(model), "no tokenizer")
    out = runner.invoke(app, ["index", "build", "--kb", str(write_small_kb(tmp_path)), "--model", str(model),
                              "-o", str(tmp_path / "idx")])
    assert out.exit_code == 2 and not (tmp_path / "idx").exists()


def test_a_tokenizer_of_another_model_is_refused(tiny_bert, tmp_path):
    model = _copy(tiny_bert, tmp_path, "other-tokenizer")
    config = json.loads((model / "config.json").read_text())
    config["vocab_size"] = 30522  # the embedding table of a full BERT beside the tiny model's 90-token vocabulary
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="knows .* tokens, the model's embedding table has 30,522"):
        check_model_folder(model)
    config["vocab_size"] = 10  # and a table too small for the tokenizer's ids
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="ids up to .* vocab_size 10"):
        check_model_folder(model)


def test_a_special_token_missing_from_the_vocabulary_is_refused(tiny_bert, tmp_path):
    model = _copy(tiny_bert, tmp_path, "special")
    settings = model / "tokenizer_config.json"
    data = json.loads(settings.read_text())
    data["cls_token"] = "<s>"
    settings.write_text(json.dumps(data))
    with pytest.raises(InputError, match="special token '<s>'") as caught:
        check_model_folder(model)
    assert caught.value.field == "cls_token" and caught.value.path == str(settings)


@pytest.mark.parametrize("damage", ["truncated", "absurd header", "garbage header"])
def test_damaged_weights_are_one_error_line_and_exit_2(tiny_bert, tmp_path, damage):
    model = _copy(tiny_bert, tmp_path, "damaged")
    weights = model / "model.safetensors"
    data = weights.read_bytes()
    if damage == "truncated":
        weights.write_bytes(data[: len(data) // 2])
    elif damage == "absurd header":
        weights.write_bytes((1 << 60).to_bytes(8, "little") + data[8:])
    else:
        length = int.from_bytes(data[:8], "little")
        weights.write_bytes(data[:8] + b"\xff" * length + data[8 + length:])
    out = _link(model, write_small_kb(tmp_path))
    assert out.exit_code == 2
    _one_error_line(out, str(weights))
    with pytest.raises(InputError):
        Encoder(model)


def _annotate_with_a_small_disk(tmp_path: Path, source: Path, output: Path, limit: int):
    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    # no bytecode written: under the file-size limit a module compiled for the first time would leave its
    # .pyc cut at the limit (one short write, then the rename) in the cache the other tests' processes read
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "spacy_sapbert.cli", "annotate", str(source), "--output", str(output),
                           "--batch-size", "2"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          preexec_fn=small_disk, timeout=600)


@pytest.mark.slow
def test_a_full_disk_during_annotate_is_one_error_line_and_the_resume_is_whole(tmp_path):
    source = tmp_path / "in.jsonl"
    text = (REPO / "examples" / "abstracts.jsonl").read_text(encoding="utf-8")
    source.write_text(text, encoding="utf-8")
    output = tmp_path / "out.jsonl"
    run = _annotate_with_a_small_disk(tmp_path, source, output, limit=6000)  # room for a few documents only
    assert run.returncode == 1, run.stderr[-2000:]
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert errors and "File too large" in errors[-1] and str(output) in errors[-1], run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    done_before = len(output.read_text(encoding="utf-8").splitlines()) if output.exists() else 0
    assert done_before < len(text.splitlines())
    again = _annotate_with_a_small_disk(tmp_path, source, output, limit=resource.RLIM_INFINITY)
    assert again.returncode == 0, again.stderr[-2000:]
    ordinals = [json.loads(line)["ordinal"] for line in output.read_text(encoding="utf-8").splitlines()]
    assert sorted(ordinals) == list(range(len(text.splitlines())))
