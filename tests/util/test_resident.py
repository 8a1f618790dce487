"""spacy_sapbert.util.resident: only clean shared-library mappings are dropped, their pages leave the resident set
and the process carries on, and ``sapbert annotate`` drops them before it loads the pipeline."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from spacy_sapbert.util.resident import library_mappings


def smaps_entry(range_: str, permissions: str, path: str, anonymous_kb: int, swap_kb: int = 0) -> str:
    return (f"{range_} {permissions} 00000000 08:01 101                      {path}\n"
            f"Size:               2048 kB\nRss:                 512 kB\nAnonymous:      {anonymous_kb:>8} kB\n"
            f"Swap:           {swap_kb:>8} kB\nVmFlags: rd mr mw me\n")


SMAPS = "".join([
    smaps_entry("55d0c0a00000-55d0c0a21000", "rw-p", "[heap]", 132),
    smaps_entry("7f1000000000-7f1000200000", "r--p", "/venv/torch/lib/libtorch_cpu.so", 0),
    smaps_entry("7f1000200000-7f1004000000", "r-xp", "/venv/torch/lib/libtorch_cpu.so", 0),
    smaps_entry("7f1004000000-7f1004100000", "r--p", "/venv/torch/lib/libtorch_cpu.so", 24),  # relocated, read-only
    smaps_entry("7f1004100000-7f1004200000", "rw-p", "/venv/torch/lib/libtorch_cpu.so", 8),   # its data
    smaps_entry("7f1005000000-7f1005020000", "r-xp", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0),
    smaps_entry("7f1006000000-7f1006400000", "r--p", "/data/index/vectors.bin", 0),            # a data file
    smaps_entry("7f1008000000-7f1008010000", "r-xp", "/tmp/ort/libonnxruntime.so.1.32.0 (deleted)", 0),
    smaps_entry("7f1009000000-7f1009010000", "r--p", "/opt/my libs/libfoo.so", 0, swap_kb=4),  # relocated, swapped
    "7f100a000000-7f100a010000 r-xp 00000000 08:01 106  /usr/lib/libbar.so\nRss: 4 kB\n",  # no Anonymous/Swap
    smaps_entry("7ffd00000000-7ffd00021000", "rw-p", "[stack]", 132),
])

# every readable page of numpy's extension read in; its resident kB before and after; numpy still computes
PROBE = r"""
import ctypes, json, numpy
from numpy._core import _multiarray_umath as extension
from spacy_sapbert.util.resident import drop_library_pages
path = extension.__file__
def mappings():
    for line in open("/proc/self/maps"):
        fields = line.split()
        if len(fields) >= 6 and fields[5] == path:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            yield start, end, fields[1]
def resident():
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        fields = line.split()
        if "-" in fields[0] and not fields[0].endswith(":"):
            inside = len(fields) >= 6 and fields[5] == path and "w" not in fields[1]
        elif fields[0] == "Rss:" and inside:
            total += int(fields[1])
    return total
for start, end, permissions in mappings():
    if permissions.startswith("r"):
        ctypes.string_at(start, end - start)
before = resident()
asked = drop_library_pages()
print(json.dumps({"before": before, "asked": asked, "after": resident(),
                  "norm": float(numpy.linalg.norm(numpy.arange(4.0)))}))
"""


def test_only_clean_read_only_library_mappings_are_droppable(tmp_path):
    smaps = tmp_path / "smaps"
    smaps.write_text(SMAPS, encoding="utf-8")
    found = list(library_mappings(smaps))
    assert [(m.path.rsplit("/", 1)[-1], m.permissions, m.droppable) for m in found] == [
        ("libtorch_cpu.so", "r--p", True), ("libtorch_cpu.so", "r-xp", True),
        ("libtorch_cpu.so", "r--p", False),  # pages the loader wrote: dropping them would undo its relocations
        ("libtorch_cpu.so", "rw-p", False), ("libc.so.6", "r-xp", True),
        ("libonnxruntime.so.1.32.0 (deleted)", "r-xp", True),
        ("libfoo.so", "r--p", False)]  # not the heap, the stack, a data file or an entry that says nothing of its pages
    assert (found[0].start, found[0].end, found[3].anonymous_kb) == (0x7f1000000000, 0x7f1000200000, 8)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")
def test_the_pages_leave_the_resident_set_and_the_process_carries_on():
    row = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                                    check=True).stdout)
    assert row["asked"] > 0 and row["before"] > 1000, row  # numpy's code and constants, all read in
    assert row["after"] < row["before"] / 4, row
    assert row["norm"] == pytest.approx(14 ** 0.5)  # its code mapped again on use


def test_annotate_drops_them_before_it_loads_the_pipeline(tmp_path, monkeypatch):
    import spacy_sapbert.cli.annotate as annotate_command
    import spacy_sapbert.util.resident as resident
    from spacy_sapbert.cli.app import app

    calls = []

    class Stop(Exception):
        pass

    def load(*args, **kwargs):
        calls.append("load")
        raise Stop

    monkeypatch.setattr(resident, "drop_library_pages", lambda: calls.append("drop") or 0)
    monkeypatch.setattr(annotate_command, "load_pipeline", load)
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "1", "text": "Cisplatin nephrotoxicity."}\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["annotate", str(source), "--output", str(tmp_path / "out.jsonl")])
    assert isinstance(result.exception, Stop), result.output
    assert calls == ["drop", "load"]
