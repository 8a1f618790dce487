"""benchmarks/load_and_memory.py's job measurement (``--job-input``, make run's job): the peak RSS it reports is
the measured process's own (a child that holds 200 MB reads above it, a small one below, whatever ran before and
however large the caller), and a command that fails, or cannot start, is an error that carries its stderr."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("load_and_memory")


def test_job_peak_is_the_process_own(bench):
    # the caller holds 400 MB: a child spawned from it directly would start its peak there (Linux carries the
    # spawning process's peak over exec), the launcher's does not
    ballast = bytearray(400 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])
    big = bench.job_peak([sys.executable, "-c", "b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"])
    small = bench.job_peak([sys.executable, "-c", "pass"])  # after the big one: not the largest child so far
    del ballast
    assert 200 < big["peak_rss_mb"] < 300
    assert small["peak_rss_mb"] < 100
    assert big["seconds"] > 0 and small["seconds"] > 0


def test_failing_job_names_its_error(bench):
    with pytest.raises(RuntimeError, match="(?s)exited with 3:.*broken on purpose"):
        bench.job_peak([sys.executable, "-c", "import sys; sys.stderr.write('broken on purpose'); sys.exit(3)"])


def test_annotate_job_writes_into_the_given_folder(bench, tmp_path):
    command = bench.annotate_job(Path("examples/abstracts.jsonl"), str(tmp_path))
    assert command[1:5] == ["-m", "spacy_sapbert.cli", "annotate", "examples/abstracts.jsonl"]
    assert command[-3:] == ["--output", str(tmp_path / "annotations.jsonl"), "--show"]


def test_a_command_that_cannot_start_is_an_error(bench):
    with pytest.raises(RuntimeError, match="(?s)no-such-command-here exited with 1:.*No such file"):
        bench.job_peak(["no-such-command-here"])
