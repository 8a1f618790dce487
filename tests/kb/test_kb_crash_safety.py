"""KnowledgeBase.to_jsonl under kill -9, concurrent writers and the order of its disk syncs.

The promise (spacy_sapbert/util/atomic.py): a KB file is always the old KB or the complete new
one, and what a killed writer leaves behind is a hidden temporary file that nothing takes
for a KB and :func:`~spacy_sapbert.util.atomic.remove_stale_temps` can find.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest

from tests.fault_injection import PRELUDE, kill_many
from spacy_sapbert.util.atomic import remove_stale_temps
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

KB_NAME = "kb.jsonl.gz"
N_OLD, N_NEW = 12_000, 20_000
#: kills drawn from [0, 0.9 x the measured run) (inside the write) and from [0, 4 x) (most finish first)
RUNS_INSIDE, RUNS_WIDE = 18, 6
#: the concepts of a KB of ``n`` concepts; run in the test and in the killed child alike
MAKE_KB = """
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

def make_kb(n, tag):
    return KnowledgeBase([Concept(f"D{i:06d}", f"{tag} concept {i}", [f"{tag} alias {i} a", f"{tag} alias {i} b"],
                                  ["Disease"], f"{tag} definition of concept {i}") for i in range(n)], name="kb")
"""


def _make_kb(n: int, tag: str) -> KnowledgeBase:
    scope: Dict[str, object] = {}
    exec(MAKE_KB, scope)
    return scope["make_kb"](n, tag)  # type: ignore[operator]


def _looks_like_a_kb(name: str) -> bool:
    return name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz"))


def _go_to_exit_seconds(setup: str, write: str, cwd: Path) -> float:
    """How long the child that kill_many starts takes from "go" to its exit when left alone (the
    write, then the interpreter's exit): the quicker of two, to draw the kill moments from (on
    a busy machine a run only gets slower, which keeps kills drawn below it inside the write)."""
    code = textwrap.dedent(setup) + PRELUDE + textwrap.dedent(write)
    times = []
    for _ in range(2):
        child = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "READY"
        started = time.perf_counter()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=120) == 0
        times.append(time.perf_counter() - started)
        child.communicate()
    return min(times)


def test_kill_9_during_to_jsonl_leaves_the_old_or_the_new_kb(tmp_path: Path) -> None:
    old, new = _make_kb(N_OLD, "old"), _make_kb(N_NEW, "new")
    folder = tmp_path / "kbs"
    target = old.to_jsonl(folder / KB_NAME)
    old_bytes = target.read_bytes()
    fingerprints = {old.fingerprint(): "old", new.fingerprint(): "new"}
    seen: Dict[str, int] = {"old": 0, "new": 0}
    mid_write: List[int] = []

    def check(run: int) -> None:
        loaded = KnowledgeBase.from_jsonl(target)
        which = fingerprints.get(loaded.fingerprint())
        assert which is not None, f"{target.name} is neither the old KB nor the new one ({len(loaded):,} concepts)"
        seen[which] += 1
        visible = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        assert visible == [KB_NAME], f"files a user or a glob would take for KBs: {visible}"
        leftovers = sorted(p.name for p in folder.iterdir() if p.name.startswith("."))
        assert not any(_looks_like_a_kb(n) for n in leftovers), leftovers
        assert remove_stale_temps(folder, KB_NAME) == len(leftovers), leftovers
        if leftovers:
            mid_write.append(run)
        target.write_bytes(old_bytes)  # the next run replaces the old KB again

    def setup(path: Path) -> str:
        return MAKE_KB + f"from pathlib import Path\nkb = make_kb({N_NEW}, 'new')\ntarget = Path({str(path)!r})\n"

    write = "kb.to_jsonl(target)\n"
    scratch = tmp_path / "timing"
    scratch.mkdir()
    write_s = _go_to_exit_seconds(setup(scratch / KB_NAME), write, tmp_path)
    inside = kill_many(setup(target), write, check, cwd=tmp_path, runs=RUNS_INSIDE, seed=7, max_delay=0.9 * write_s)
    wide = kill_many(setup(target), write, check, cwd=tmp_path, runs=RUNS_WIDE, seed=8, max_delay=4 * write_s)
    outcome = {key: inside[key] + wide[key] for key in inside}
    runs = RUNS_INSIDE + RUNS_WIDE
    # most kills must land inside the write (a temporary file left behind shows it), or the test
    # tests nothing; and some writes must finish, so that "the new KB" is checked too
    why = (outcome, f"{len(mid_write)} left a temporary file", f"undisturbed run {write_s:.3f} s")
    assert outcome["killed"] > runs // 2 and len(mid_write) > runs // 2, why
    assert outcome["finished"] >= 1 and seen["new"] >= outcome["finished"], (why, seen)


def test_concurrent_writers_never_mix_their_kbs(tmp_path: Path) -> None:
    """Two writers of one KB file (two builds into one kbs/ folder): the file ends up as one
    of the two KBs, and neither writer trips over the other's temporary file."""
    kbs = [_make_kb(6_000, "first"), _make_kb(6_000, "second")]
    target = tmp_path / KB_NAME
    errors: List[BaseException] = []

    def write(kb: KnowledgeBase) -> None:
        try:
            for _ in range(3):
                kb.to_jsonl(target)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=write, args=(kb,)) for kb in kbs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert KnowledgeBase.from_jsonl(target).fingerprint() in {kb.fingerprint() for kb in kbs}
    assert [p.name for p in tmp_path.iterdir()] == [KB_NAME]


def test_to_jsonl_syncs_the_data_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rename that reaches the disk before the data would leave an empty KB after a power cut."""
    events: List[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def replace(src, dst) -> None:
        events.append(f"replace {Path(dst).name}")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    _make_kb(10, "x").to_jsonl(tmp_path / KB_NAME)
    assert f"replace {KB_NAME}" in events
    assert "fsync" in events[: events.index(f"replace {KB_NAME}")], events
