"""kill -9 while ``sapbert package-default`` replaces an earlier package: the folder is then the
old complete package or the new complete one, never missing and never a mix.

The child loads a small package (tiny random BERT, small KB, blank NER) and runs the part of
the packager that writes the folder (:func:`spacy_sapbert.training.package.build.write_pipeline`); building a
package from scratch is the same code up to that point and takes longer.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Dict, Set

import spacy

from spacy_sapbert.training.package.build import build_default_pipeline, is_package_output, write_pipeline

from tests.fault_injection import kill_many
from tests.linker_fixtures import write_small_kb
from tests.training.package.test_package import _blank_ner

RUNS = 20


def _digest(folder: Path) -> Dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_kill_while_replacing_a_package_leaves_the_old_or_the_new_one(tiny_bert, tmp_path):
    old = tmp_path / "old"
    build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, write_small_kb(tmp_path), old, pq_m=8,
                           version="0.1.0")
    report = {k: v for k, v in json.loads((old / "build.json").read_text()).items() if k != "sapbert_package"}
    # the new package: what the child writes (same code, same inputs), and how long writing it takes
    setup = f"""
import json, spacy
from spacy_sapbert.training.package.build import write_pipeline
nlp = spacy.load({str(old)!r})
nlp.meta["version"] = "0.2.0"
report = json.loads({json.dumps(report)!r})
"""
    scope: Dict[str, object] = {}
    exec(setup, scope)
    started = time.perf_counter()
    write_pipeline(scope["nlp"], scope["report"], tmp_path / "new")  # type: ignore[arg-type]
    write_s = time.perf_counter() - started
    references = {"old": _digest(old), "new": _digest(tmp_path / "new")}
    assert references["old"] != references["new"]
    for version, folder in (("0.1.0", old), ("0.2.0", tmp_path / "new")):
        assert spacy.load(folder).meta["version"] == version and is_package_output(folder)

    out = tmp_path / "work" / "default"
    shutil.copytree(old, out)
    seen: Set[str] = set()
    outcome = {"mid_write": 0, "old": 0, "new": 0}

    def check(run: int) -> None:
        leftovers = {p.name for p in out.parent.iterdir() if p != out}
        if leftovers - seen:  # this run was killed with its temporary folder on disk: inside the write
            outcome["mid_write"] += 1
        seen.update(leftovers)
        assert out.is_dir(), "the package folder is missing"
        digest = _digest(out)
        which = [name for name, ref in references.items() if ref == digest]
        assert which, "neither the old nor the new package; differs from them in " + "; ".join(
            f"{name}: {sorted(k for k in set(ref) | set(digest) if ref.get(k) != digest.get(k))[:6]}"
            for name, ref in references.items())
        assert is_package_output(out)
        outcome[which[0]] += 1
        if which == ["new"]:  # every run replaces the old package
            shutil.rmtree(out)
            shutil.copytree(old, out)

    killed = kill_many(setup, f"write_pipeline(nlp, report, {str(out)!r})", check, cwd=tmp_path, runs=RUNS,
                       seed=20240611, max_delay=1.2 * write_s + 0.05)
    assert killed["killed"] + killed["finished"] == RUNS
    assert outcome["mid_write"] >= RUNS // 5, (outcome, killed, write_s)  # the kills did land inside the write
    # the next write clears every temporary folder the killed ones left, and the result loads
    write_pipeline(scope["nlp"], scope["report"], out)  # type: ignore[arg-type]
    assert [p.name for p in out.parent.iterdir()] == ["default"]
    assert _digest(out) == references["new"] and spacy.load(out).meta["version"] == "0.2.0"
