"""KnowledgeBase.to_jsonl under kill -9, concurrent writers and the order of its disk syncs.

The promise (spacy_sapbert/util/atomic.py): a KB file is always the old KB or the complete new
one, and what a killed writer leaves behind is a hidden temporary file that nothing takes
for a KB and :func:`~spacy_sapbert.util.atomic.remove_stale_temps` can find.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Dict, List

import pytest

from tests.fault_injection import KillServer, boundaries
from spacy_sapbert.util.atomic import remove_stale_temps
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

KB_NAME = "kb.jsonl.gz"
N_OLD, N_NEW = 1_200, 2_000
"""Enough concepts for many chunks of compressed text (the kills fall before the first and the last)."""
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


def test_kill_9_during_to_jsonl_leaves_the_old_or_the_new_kb(tmp_path: Path) -> None:
    """Killed at every boundary of a write over an older KB: before the first and the last of
    each kind of file-system call (creating the temporary file, writing compressed text to it,
    syncing it, the rename, syncing the folder; see :mod:`tests.fault_injection`) and as it
    returns. The disk changes only at those calls, and the chunks in between only make the
    temporary file longer, so these 7 kills leave every kind of state the 24 randomly timed
    kills of the earlier version could leave (a temporary file empty, part written or
    complete; the new KB in place), without depending on timing (the earlier version needed
    a KB ten times as big, and a measured run, to make its kills land inside the write)."""
    old, new = _make_kb(N_OLD, "old"), _make_kb(N_NEW, "new")
    folder = tmp_path / "kbs"
    target = old.to_jsonl(folder / KB_NAME)
    old_bytes = target.read_bytes()
    fingerprints = {old.fingerprint(): "old", new.fingerprint(): "new"}
    seen: Dict[str, int] = {"old": 0, "new": 0, "left a temporary file": 0, "left part of the new KB": 0}

    def check() -> None:
        loaded = KnowledgeBase.from_jsonl(target)
        which = fingerprints.get(loaded.fingerprint())
        assert which is not None, f"{target.name} is neither the old KB nor the new one ({len(loaded):,} concepts)"
        seen[which] += 1
        visible = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        assert visible == [KB_NAME], f"files a user or a glob would take for KBs: {visible}"
        leftovers = sorted(p for p in folder.iterdir() if p.name.startswith("."))
        assert not any(_looks_like_a_kb(p.name) for p in leftovers), leftovers
        seen["left a temporary file"] += bool(leftovers)
        seen["left part of the new KB"] += any(0 < p.stat().st_size < len(new_bytes) for p in leftovers)
        assert remove_stale_temps(folder, KB_NAME) == len(leftovers), leftovers
        target.write_bytes(old_bytes)  # the next run replaces the old KB again

    setup = MAKE_KB + f"from pathlib import Path\nkb = make_kb({N_NEW}, 'new')\ntarget = Path({str(target)!r})\n"
    with KillServer(setup, "kb.to_jsonl(target)\n", tmp_path, root=folder) as server:
        points = boundaries(server.trace())
        new_bytes = target.read_bytes()
        target.write_bytes(old_bytes)
        for point in points:
            server.run(point)
            try:
                check()
            except AssertionError as err:
                raise AssertionError(f"killed {point}: {err}") from err
    calls = {point.event.call for point in points if point.event}
    assert {"builtins.open", "gzip.GzipFile.write", "os.fsync", "os.replace"} <= calls, points
    assert all(seen.values()), seen


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
