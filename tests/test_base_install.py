"""What `pip install .` gives, for real: a fresh virtual environment with the package and its base requirements only
(the versions pinned to this environment's, so the test reads the install, not the index of the day) has no torch,
and `sapbert annotate` there links the example abstracts as `sapbert annotate --onnx` does here.
tests/test_packaging.py checks the requirements; tests/cli/test_without_torch.py a process with torch blocked."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "abstracts.jsonl"


def entities(path: Path) -> list:
    return [[(e["start"], e["end"], e["label"], e["concept_id"]) for e in json.loads(line)["entities"]]
            for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a wheel, a venv and an install from the package index or its cache
def test_pip_install_dot_annotates_without_torch(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "assets", "kbs", "corpus", "training_runs", "models", "annotations", "build",
        "*.egg-info", "__pycache__", ".pytest_cache", "node_modules", "metrics", "packages"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("spacy_sapbert-*.whl")
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True,
                            text=True, check=True).stdout.splitlines()
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("".join(line + "\n" for line in frozen if "==" in line and " @ " not in line))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel), "-c", str(constraints)],
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch') is None, "
                            "u.find_spec('onnxruntime') is not None)"], capture_output=True, text=True, check=True)
    assert probe.stdout.split() == ["True", "True"]
    # run outside the checkout, so that the installed package is the one imported
    base = subprocess.run([str(python), "-m", "spacy_sapbert.cli", "annotate", str(EXAMPLES), "-o",
                           str(tmp_path / "base.jsonl")], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert base.returncode == 0, base.stderr[-3000:]
    here = subprocess.run([sys.executable, "-m", "spacy_sapbert.cli", "annotate", str(EXAMPLES), "-o",
                           str(tmp_path / "here.jsonl"), "--onnx"], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert here.returncode == 0, here.stderr[-3000:]
    found = entities(tmp_path / "base.jsonl")
    assert found == entities(tmp_path / "here.jsonl") and sum(map(len, found)) >= 40
