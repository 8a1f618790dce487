"""kill -9 at seeded random moments while `annotate` writes: the output is never lost or mixed.

A resumed output only ever holds complete lines of the uninterrupted run, each once, and
resuming completes it; an output being replaced (``--overwrite``) is the old one or the
complete new one, never a mixture and never missing.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from spacy_sapbert.annotate.identity import sidecar_path

from tests.fault_injection import kill_many, run_killed
from tests.linker_fixtures import write_small_kb

TEXTS = ["Plaquenil was stopped after a heart attack.", "Renal failure and kidney failure.", "Nothing.",
         "MS or a breast tumour? Diabetes."]
DOCS = 240
DOCS_NEW = 60
"""The overwriting run's input: short enough (≈1.2 s of the slow pipe) that some kills in [0, 2) s come after
it has replaced the old output, and long enough that others land before."""


@pytest.fixture()
def child(tiny_bert, tmp_path):
    kb = write_small_kb(tmp_path)
    for name, shift, count in (("a.jsonl", 0, DOCS), ("b.jsonl", 1, DOCS_NEW)):
        with (tmp_path / name).open("w", encoding="utf-8") as handle:
            for i in range(count):
                handle.write(json.dumps({"id": f"{name}-{i}", "text": TEXTS[(i + shift) % 4] + f" Case {i}."}) + "\n")
    setup = f"""
        import sys, time
        from spacy.language import Language
        from tests.pipes.test_component import make_nlp
        from spacy_sapbert.annotate import annotate

        @Language.component("slow")
        def slow(doc):
            time.sleep(0.02)
            return doc

        nlp = make_nlp({str(tiny_bert)!r}, {str(kb)!r})
        nlp.add_pipe("slow", first=True)
    """
    return setup, tmp_path


def write_call() -> str:
    """The child's write: the mode of this run is in mode.txt (resume a.jsonl, or overwrite with b.jsonl)."""
    return """
mode = open("mode.txt").read()
source, resume = ("a.jsonl", True) if mode == "resume" else ("b.jsonl", False)
annotate(nlp, source, "out.jsonl", resume=resume, batch_size=4, show_progress=False)
"""


def lines(path: Path):
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def reference(setup: str, folder: Path, source: str, name: str) -> bytes:
    write = f"annotate(nlp, {source!r}, {name!r}, batch_size=4, show_progress=False)"
    assert run_killed(setup, write, 300, folder) == 0
    return (folder / name).read_bytes()


def test_kill_9_while_annotating_never_loses_or_mixes_the_output(child):
    """20 seeded kills, alternating a resumed run (which continues what the last one left) and an
    overwriting run (over a complete output of another input)."""
    setup, folder = child
    done_a = set(reference(setup, folder, "a.jsonl", "ref-a.jsonl").splitlines(keepends=True))
    new = reference(setup, folder, "b.jsonl", "ref-b.jsonl")
    out = folder / "out.jsonl"
    seen = {"resumed_partial": 0, "overwrite_old_kept": 0, "overwrite_replaced": 0}

    def restore_old() -> bytes:
        shutil.copy(folder / "ref-a.jsonl", out)
        shutil.copy(sidecar_path(folder / "ref-a.jsonl"), sidecar_path(out))
        return out.read_bytes()

    def check(run: int) -> None:
        mode = (folder / "mode.txt").read_text()
        if mode == "resume":
            got = lines(out)
            complete = [line for line in got if line.endswith(b"\n")]
            assert len(got) - len(complete) <= 1, "only the last line may be torn"
            assert set(complete) <= done_a, "a line that the uninterrupted run does not write"
            ordinals = [json.loads(line)["ordinal"] for line in complete]
            assert len(ordinals) == len(set(ordinals)), "a document written twice"
            seen["resumed_partial"] += len(complete) < DOCS
            if len(complete) < DOCS and out.exists():  # kept aside: the next resumed run continues it
                shutil.copy(out, folder / "partial.jsonl")
                shutil.copy(sidecar_path(out), sidecar_path(folder / "partial.jsonl"))
            old = restore_old()  # the next run overwrites this complete output
            (folder / "mode.txt").write_text("overwrite")
            check.old = old
        else:
            got = out.read_bytes()
            assert got in (check.old, new), "the output is neither the old one nor the complete new one"
            seen["overwrite_replaced" if got == new else "overwrite_old_kept"] += 1
            out.unlink()
            sidecar_path(out).unlink()
            if (folder / "partial.jsonl").exists():  # the next run resumes what an earlier one left
                (folder / "partial.jsonl").replace(out)
                sidecar_path(folder / "partial.jsonl").replace(sidecar_path(out))
            (folder / "mode.txt").write_text("resume")

    (folder / "mode.txt").write_text("resume")
    outcome = kill_many(setup, write_call(), check, folder, runs=20, seed=14, max_delay=2.0)
    assert outcome["killed"] >= 5 and seen["resumed_partial"] >= 5, seen
    assert seen["overwrite_old_kept"] >= 2 and seen["overwrite_replaced"] >= 1, seen  # both outcomes were seen
    (folder / "mode.txt").write_text("resume")
    assert run_killed(setup, write_call(), 300, folder) == 0  # a clean resume after all of that
    assert set(lines(out)) == done_a and len(lines(out)) == DOCS
