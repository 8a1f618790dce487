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
