"""The command line where torch is not installed (the base install): annotating runs on ONNX Runtime with no flag,
and a command that needs torch stops with one line that says what to install, before it writes anything."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_sapbert.errors import TorchBlocked, exit_on_input_error, missing_extra

REPO = Path(__file__).resolve().parents[2]
# `sapbert …` in a process where `import torch` fails as it does without torch installed (a plain
# ModuleNotFoundError: block_torch's own, TorchBlocked, says --onnx, which these runs do not use)
WITHOUT_TORCH = """
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from spacy_sapbert.cli import main
sys.argv = ["sapbert", *sys.argv[1:]]
main()
"""


def sapbert_without_torch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, *args], capture_output=True, text=True, cwd=REPO)


def test_annotate_needs_no_flag_without_torch(tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"id": "1", "text": "Cisplatin nephrotoxicity in patients with FAP."}) + "\n")
    runs = {}
    # against --onnx where torch is installed: the same float32 models (the default computes bf16 where the CPU
    # prefers it, whose entities may differ in a few places)
    for name, run in (("without", sapbert_without_torch),
                      ("with", lambda *a: subprocess.run([sys.executable, "-m", "spacy_sapbert.cli", *a, "--onnx"],
                                                         capture_output=True, text=True, cwd=REPO))):
        out = run("annotate", str(source), "-o", str(tmp_path / f"{name}.jsonl"))
        assert out.returncode == 0, out.stderr[-3000:]
        (line,) = (tmp_path / f"{name}.jsonl").read_text().splitlines()
        runs[name] = [(e["start"], e["end"], e["label"], e["concept_id"]) for e in json.loads(line)["entities"]]
    assert runs["without"] == runs["with"] and len(runs["with"]) >= 2


def test_a_training_command_says_what_to_install(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("heart attack\tmyocardial infarction\n")
    out = sapbert_without_torch("pretrain", str(pairs), "-o", str(tmp_path / "model"))
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (  # a training command: the extra that trains, torch in it
        "error: this command needs torch, which is not installed here: pip install 'spacy-sapbert[train]'")
    assert not (tmp_path / "model").exists()


def test_only_an_optional_extras_module_is_explained(capsys):
    with pytest.raises(SystemExit) as stopped, exit_on_input_error():
        raise ModuleNotFoundError("No module named 'gradio.blocks'", name="gradio.blocks")
    assert stopped.value.code == 1
    assert "pip install 'spacy-sapbert[demo]'" in capsys.readouterr().err
    assert missing_extra(ModuleNotFoundError("x", name="pytorch_metric_learning")).endswith("'spacy-sapbert[train]'")
    assert missing_extra(ModuleNotFoundError("x", name="torch.nn")).endswith("'spacy-sapbert[torch]'")
    assert "without --onnx" in missing_extra(TorchBlocked("x", name="torch"))  # torch installed, kept out
    with pytest.raises(ModuleNotFoundError), exit_on_input_error():  # any other missing module is a bug: shown whole
        raise ModuleNotFoundError("No module named 'spacy_sapbert.nothing'", name="spacy_sapbert.nothing")


def test_link_over_a_kb_searches_its_flat_index_without_torch():
    """A flat index is searched by a torch matrix multiply where torch is installed; without it, by FAISS: the
    same answers (mentions linked against a KB, no type filter)."""
    kb = str(REPO / "tests" / "fixtures" / "evaluate" / "kb.jsonl")
    args = ("link", "heart attack", "breast tumour", "--kb", kb, "--model", "sapbert-default", "--top", "2", "--json")
    without = sapbert_without_torch(*args)
    assert without.returncode == 0, without.stderr[-3000:]
    here = subprocess.run([sys.executable, "-m", "spacy_sapbert.cli", *args], capture_output=True, text=True,
                          cwd=REPO)
    assert here.returncode == 0, here.stderr[-3000:]

    def ranked(stdout: str) -> list:
        return [[c["concept_id"] for c in json.loads(line)["candidates"]] for line in stdout.splitlines()]
    assert ranked(without.stdout) == ranked(here.stdout)
    assert [ids[0] for ids in ranked(here.stdout)] == ["D009203", "D001943"]


def test_n_process_without_torch_equals_one_process(tmp_path):
    """The workers fork from a process that holds ONNX Runtime sessions: made with one thread when workers will fork
    (no thread pool for the fork to leave behind), they annotate as one process does."""
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(
        ["Cisplatin nephrotoxicity in patients with FAP.", "Lithium can cause goiter and hypothyroidism.",
         "No entity here.", "Heart attack after three days of angina."] * 2)))
    for name, extra in (("one", []), ("two", ["--n-process", "2", "--batch-size", "2"])):
        out = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, "annotate", str(source), "-o",
                              str(tmp_path / f"{name}.jsonl"), *extra], capture_output=True, text=True, cwd=REPO,
                             timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
