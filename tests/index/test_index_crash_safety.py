"""NameIndex.save killed (SIGKILL) at every boundary of its writes: the index folder always loads
and is, byte for byte, the previous index or the new one; leftovers never break the next save.

Two precomputed indexes A and B (random unit vectors) are saved once; each run's child loads the
one that is *not* in the target folder and saves it over the one that is, and is killed part-way.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Dict

import numpy as np

from spacy_sapbert.index.name_index import MANIFEST, NameIndex

from tests.fault_injection import KillServer

DIM = 64
ROWS = {"A": 20_000, "B": 26_000}  # different sizes: a mix of A's and B's files cannot load


def _make_index(tag: str) -> NameIndex:
    """A flat index of ``ROWS[tag]`` random unit vectors, two names per concept (no encoder needed)."""
    import faiss

    rows = ROWS[tag]
    rng = np.random.default_rng(ROWS[tag])
    vectors = rng.standard_normal((rows, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    flat = faiss.IndexFlatIP(DIM)
    flat.add(vectors)
    names = [f"{tag} name {i}" for i in range(rows)]
    concepts = [f"{tag}:{i}" for i in range(rows // 2)]
    table = np.stack([np.arange(rows), np.arange(rows) // 2], axis=1).astype(np.int32)
    manifest = {"format_version": 1, "kind": "flat", "params": {}, "dim": DIM, "rows": rows, "names": rows,
                "concepts": len(concepts), "model_fingerprint": f"model-{tag}", "kb_fingerprint": tag,
                "kb_name": f"kb-{tag}"}
    index = NameIndex(flat, names, [concepts[i // 2] for i in range(rows)], manifest)
    index._tables = (names, concepts, table)
    return index


def _digests(folder: Path) -> Dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _leftovers(parent: Path, name: str) -> list:
    return sorted(p.name for p in parent.iterdir() if p.name != name)


def test_save_killed_at_any_moment_leaves_the_old_or_the_new_index(tmp_path):
    """Killed before the first and the last of each kind of file-system call of a save that finds
    a killed save's temporary folder beside the index (removing it; making the new temporary
    folder and its files; syncing; the swap; deleting the old index; see
    :mod:`tests.fault_injection`) and as it returns. The disk changes only at those calls (and
    by bytes going into a file of the temporary folder), and the calls of one kind in between
    only repeat a state for another file, so these ~17 kills leave every kind of state the 20
    randomly timed kills of the earlier version could leave (that version needed indexes ten
    times as big, to make a save last), without depending on timing; after each one, the next
    save completes and clears every leftover."""
    sources = {}
    for tag in ROWS:
        sources[tag] = _make_index(tag).save(tmp_path / "sources" / tag)
    expected = {tag: _digests(folder) for tag, folder in sources.items()}
    manifests = {tag: json.loads((folder / MANIFEST).read_text()) for tag, folder in sources.items()}
    other = {"A": "B", "B": "A"}

    work = tmp_path / "work"
    target = work / "index"

    def prepare() -> None:
        """Index A, and the temporary folder of a save killed half-way."""
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(sources["A"], target)
        shutil.copytree(sources["B"], work / ".index.tmp-k1lled00")
        (work / ".index.tmp-k1lled00" / MANIFEST).unlink()

    def tag_of(folder: Path) -> str:
        loaded = NameIndex.load(folder)  # must always load ...
        tag = loaded.manifest["kb_fingerprint"]
        assert loaded.manifest == manifests[tag] and len(loaded) == ROWS[tag]
        assert _digests(folder) == expected[tag], f"index folder is not exactly index {tag}"  # ... whole
        assert loaded.names[-1] == f"{tag} name {ROWS[tag] - 1}"
        return tag

    setup = f"""
        import json
        from spacy_sapbert.index.name_index import NameIndex
        target = {str(target)!r}
        sources = {{"A": {str(sources["A"])!r}, "B": {str(sources["B"])!r}}}
    """
    write = """
with open(target + "/manifest.json", encoding="utf-8") as handle:
    now = json.load(handle)["kb_fingerprint"]
NameIndex.load(sources["B" if now == "A" else "A"]).save(target)
"""
    seen = {"A": 0, "B": 0, "left temporary folders": 0}
    def check(point):
        tag, leftovers = tag_of(target), _leftovers(work, "index")
        assert all(name.startswith(".index.tmp-") for name in leftovers), leftovers
        seen[tag] += 1
        seen["left temporary folders"] += bool(leftovers)
        return tag

    def recovered(point, tag):  # the next save cleared what the killed one left behind, and completed
        assert tag_of(target) == other[tag] and _leftovers(work, "index") == [], point

    with KillServer(setup, write, tmp_path, root=work) as server:
        points = server.kill_at_each_boundary(prepare, check, recovered)
    calls = {point.event.call for point in points if point.event}
    assert {"shutil.rmtree", "os.mkdir", "os.fsync", "spacy_sapbert.util.atomic._exchange"} <= calls, points
    assert all(seen.values()), seen
