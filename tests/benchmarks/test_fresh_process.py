"""benchmarks/fresh_process.py: a command under the launcher keeps its stdout and exit code (the pipeline
benchmark reads its children's JSON from stdout), and its own usage comes last on stderr, its peak RSS
not raised by the caller's memory."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.benchmarks import load_script


@pytest.fixture(scope="module")
def fresh_process():
    return load_script("fresh_process")


def test_stdout_and_exit_code_pass_through(fresh_process):
    done = subprocess.run(fresh_process.fresh([sys.executable, "-c", "print('{\"x\": 1}'); import sys; sys.exit(4)"]),
                          capture_output=True, text=True)
    assert done.returncode == 4
    assert done.stdout.strip() == '{"x": 1}'
    usage = fresh_process.usage_of(done.stderr)
    assert usage["code"] == 4 and usage["seconds"] > 0


def test_peak_is_the_command_own(fresh_process):
    ballast = bytearray(400 * 1024 * 1024)  # spawned from here directly, a child's peak would start above 400 MB
    ballast[::4096] = b"x" * len(ballast[::4096])
    done = subprocess.run(fresh_process.fresh([sys.executable, "-c", "import resource; "
                                               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"]),
                          capture_output=True, text=True)
    del ballast
    assert int(done.stdout) / 1024 < 100  # what the command reads of itself
    assert fresh_process.usage_of(done.stderr)["peak_rss_mb"] < 100  # what the launcher reads of it


def test_usage_of_without_a_report_is_empty(fresh_process):
    assert fresh_process.usage_of("") == {}
    assert fresh_process.usage_of("Traceback (most recent call last):\n  boom") == {}


def test_the_command_runs_with_the_bytecode_cache_on(fresh_process, monkeypatch):
    """A sandbox's PYTHONDONTWRITEBYTECODE would make every measured process compile the package again; the
    rest of the caller's environment reaches the command."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("SAPBERT_FRESH_PROBE", "kept")
    done = subprocess.run(fresh_process.fresh([sys.executable, "-c", "import os, sys; "
                                               "print(sys.dont_write_bytecode, os.environ['SAPBERT_FRESH_PROBE'])"]),
                          capture_output=True, text=True)
    assert done.stdout.strip() == "False kept"
