"""kill -9 while ``sapbert package-default`` replaces an earlier package: the folder is then the
old complete package or the new complete one, never missing and never a mix, and the next run
clears what the killed one left.

The child loads a small package (tiny random BERT, small KB, blank NER) and runs the part of
the packager that writes the folder (:func:`spacy_sapbert.training.package.build.write_pipeline`); building a
package from scratch is the same code up to that point and takes longer.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Dict

import pytest
import spacy

from spacy_sapbert.training.package.build import build_default_pipeline, is_package_output, write_pipeline

from tests.fault_injection import KillServer
from tests.linker_fixtures import write_small_kb
from tests.training.package.test_package import _blank_ner

pytestmark = pytest.mark.slow


def _digest(folder: Path) -> Dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_kill_while_replacing_a_package_leaves_the_old_or_the_new_one(tiny_bert, tmp_path):
    """Killed at every boundary of a write that replaces a package and finds a killed write's
    temporary folder beside it: before the first and the last of each kind of file-system call
    (removing the leftover; making the temporary folder and its files; syncing them; the
    swap; deleting the old package; see :mod:`tests.fault_injection`) and as it returns.
    The disk changes only at those calls (and by bytes going into a file of the temporary
    folder), and the calls of one kind in between only repeat a state for another file, so
    these ~20 kills leave every kind of state the 20 randomly timed kills of the earlier
    version could leave, without depending on timing, and in a fraction of the time (each
    run is a fork of one process that has loaded the pipeline, not a new interpreter);
    after each one, the same write again leaves the new package and nothing else, which the
    earlier version checked once, at the end."""
    old = tmp_path / "old"
    build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, write_small_kb(tmp_path), old, pq_m=8,
                           version="0.1.0")
    report = {k: v for k, v in json.loads((old / "build.json").read_text()).items() if k != "sapbert_package"}
    # the new package: what the child writes (same code, same inputs)
    setup = f"""
import json, spacy
from spacy_sapbert.training.package.build import write_pipeline
nlp = spacy.load({str(old)!r})
nlp.meta["version"] = "0.2.0"
report = json.loads({json.dumps(report)!r})
"""
    scope: Dict[str, object] = {}
    exec(setup, scope)
    write_pipeline(scope["nlp"], scope["report"], tmp_path / "new")  # type: ignore[arg-type]
    references = {"old": _digest(old), "new": _digest(tmp_path / "new")}
    assert references["old"] != references["new"]
    for version, folder in (("0.1.0", old), ("0.2.0", tmp_path / "new")):
        assert spacy.load(folder).meta["version"] == version and is_package_output(folder)

    work = tmp_path / "work"
    out = work / "default"

    def prepare() -> None:
        """The old package, and the temporary folder of a write killed half-way."""
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(old, out)
        shutil.copytree(tmp_path / "new" / "ner", work / ".default.tmp-k1lled0" / "ner")

    outcome = {"left temporary folders": 0, "old": 0, "new": 0}

    def check() -> None:
        assert out.is_dir(), "the package folder is missing"
        assert [p.name for p in work.iterdir() if not p.name.startswith(".")] == ["default"]
        digest = _digest(out)
        which = [name for name, ref in references.items() if ref == digest]
        assert which, "neither the old nor the new package; differs from them in " + "; ".join(
            f"{name}: {sorted(k for k in set(ref) | set(digest) if ref.get(k) != digest.get(k))[:6]}"
            for name, ref in references.items())
        assert is_package_output(out)
        outcome[which[0]] += 1
        outcome["left temporary folders"] += any(p.name.startswith(".default.tmp-") for p in work.iterdir())

    def recovered(point, _):  # the next write cleared every temporary folder the killed one left
        assert [p.name for p in work.iterdir()] == ["default"], (point, sorted(work.iterdir()))
        assert _digest(out) == references["new"], point

    with KillServer(setup, f"write_pipeline(nlp, report, {str(out)!r})", tmp_path, root=work) as server:
        points = server.kill_at_each_boundary(prepare, lambda point: check(), recovered)
    assert len(points) >= 12 and all(outcome.values()), (outcome, [str(p) for p in points])
    assert spacy.load(out).meta["version"] == "0.2.0"
