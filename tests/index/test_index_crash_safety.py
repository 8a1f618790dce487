"""NameIndex.save killed (SIGKILL) at seeded random moments: the index folder always loads and
is, byte for byte, the previous index or the new one; leftovers never break the next save.

Two precomputed indexes A and B (a few hundred thousand rows of random unit vectors, so a
save is mostly I/O and takes a measurable time) are saved once; each run's child loads the one
that is *not* in the target folder and saves it over the one that is, and is killed part-way.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Dict

import numpy as np

from spacy_sapbert.index.name_index import MANIFEST, NameIndex

from tests.fault_injection import kill_many

DIM = 64
ROWS = {"A": 200_000, "B": 260_000}  # different sizes: a mix of A's and B's files cannot load
RUNS = 20
SEED = 20240611


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


def test_save_killed_at_random_moments_leaves_the_old_or_the_new_index(tmp_path):
    sources = {}
    for tag in ROWS:
        sources[tag] = _make_index(tag).save(tmp_path / "sources" / tag)
    expected = {tag: _digests(folder) for tag, folder in sources.items()}
    manifests = {tag: json.loads((folder / MANIFEST).read_text()) for tag, folder in sources.items()}

    work = tmp_path / "work"
    work.mkdir()
    target = work / "index"
    current = {"tag": "A"}
    NameIndex.load(sources["A"]).save(target)
    started = time.perf_counter()
    NameIndex.load(sources["B"]).save(work / "timing")  # a measured save of the bigger index
    save_seconds = time.perf_counter() - started
    shutil.rmtree(work / "timing")
    assert _digests(target) == expected["A"]

    setup = f"""
        import json
        from spacy_sapbert.index.name_index import NameIndex
        target = {str(target)!r}
        with open(target + "/manifest.json", encoding="utf-8") as handle:
            now = json.load(handle)["kb_fingerprint"]
        index = NameIndex.load({{"A": {str(sources["B"])!r}, "B": {str(sources["A"])!r}}}[now])
    """
    write = "index.save(target)\n"
    mid_save = []

    def check(run: int) -> None:
        loaded = NameIndex.load(target)  # must always load ...
        tag = loaded.manifest["kb_fingerprint"]
        old, new = current["tag"], "B" if current["tag"] == "A" else "A"
        assert tag in (old, new), tag
        assert loaded.manifest == manifests[tag] and len(loaded) == ROWS[tag]
        assert _digests(target) == expected[tag], f"index folder is not exactly index {tag}"  # ... whole
        assert loaded.names[-1] == f"{tag} name {ROWS[tag] - 1}"
        leftovers = _leftovers(work, "index")
        assert all(name.startswith(".index.tmp-") for name in leftovers), leftovers
        if leftovers:
            mid_save.append(run)  # killed after the temporary folder was made: inside the save
        current["tag"] = tag

    # The kill lands within [0, 1.3 × save time) of the child starting its save (it was waiting on
    # stdin with everything loaded): most runs die inside the save, a few finish.
    outcome = kill_many(setup, write, check, cwd=tmp_path, runs=RUNS, seed=SEED,
                        max_delay=max(0.05, 1.3 * save_seconds))
    assert outcome["killed"] >= RUNS * 0.6, (outcome, save_seconds)
    # ... and a good share of those while files were being written or the old folder removed
    # (earlier kills fall in the clean-up of the previous run's leftovers)
    assert len(mid_save) >= RUNS / 4, (mid_save, outcome, save_seconds)

    # the next save clears what killed saves left behind, and completes
    final = "B" if current["tag"] == "A" else "A"
    NameIndex.load(sources[final]).save(target)
    assert _digests(target) == expected[final]
    assert _leftovers(work, "index") == []
