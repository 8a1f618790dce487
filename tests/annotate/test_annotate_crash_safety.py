"""kill -9 at every boundary of `annotate`'s writes: the output is never lost or mixed.

A resumed output only ever holds complete lines of the uninterrupted run, each once (the last
one may be torn), keeps every line it had, and resuming completes it; an output being
replaced (``--overwrite``) is the old one or the complete new one, never a mixture and never
missing, and its record (the sidecar) never describes the other one.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Dict, List

import pytest

from spacy_sapbert.annotate.identity import sidecar_path

from tests.fault_injection import KillServer, boundaries
from tests.linker_fixtures import write_small_kb

pytestmark = pytest.mark.slow

TEXTS = ["Plaquenil was stopped after a heart attack.", "Renal failure and kidney failure.", "Nothing.",
         "MS or a breast tumour? Diabetes."]
DOCS, DOCS_NEW = 12, 8
"""Lines in three and two batches: the kill points take the first and the last write of a file, and
a longer input only adds more states with some of the lines written."""
KEPT = 5
"""Complete lines of the partial output a resumed run starts from (then half a line, torn)."""

WRITE = """
job = json.loads(open("job.json").read())
annotate(nlp, job["source"], "out/out.jsonl", resume=job["resume"], batch_size=4, show_progress=False)
"""


def lines(path: Path) -> List[bytes]:
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def test_kill_9_while_annotating_never_loses_or_mixes_the_output(tiny_bert, tmp_path):
    """Every state a kill can leave, from each of the three ways a run starts: a fresh output, a
    partial one to resume (ending in a torn line, as a power cut leaves it) and a complete one
    to replace, with a killed replacement's temporary file and lock file beside it.

    Each run is traced once unharmed, then killed before the first and the last of each kind
    of file-system call it makes (taking the lock; writing, syncing and renaming the record;
    creating, writing and syncing the output or its temporary file; removing the old record;
    the rename over the old output; releasing the lock), half-way through the first and the
    last line's write, and as it returns (see :mod:`tests.fault_injection`). The disk changes
    only at those calls, and the calls of one kind between the first and the last only write
    more lines, so these 13 to 20 kills per start (here) leave every kind of state that the 20
    randomly timed kills of the earlier version could leave, including the short-lived ones
    those rarely or never hit (the old output without its record, between the removal of the
    record and the rename); and no timing decides which states are seen (the earlier version
    failed on a loaded machine when no replacement finished inside its 2 s window of kills).
    After each kill, running the same command again must complete the output exactly as an
    uninterrupted run writes it, which the earlier version checked once, at the end.
    """
    kb = write_small_kb(tmp_path)
    for name, shift, count in (("a.jsonl", 0, DOCS), ("b.jsonl", 1, DOCS_NEW)):
        with (tmp_path / name).open("w", encoding="utf-8") as handle:
            for i in range(count):
                handle.write(json.dumps({"id": f"{name}-{i}", "text": TEXTS[(i + shift) % 4] + f" Case {i}."}) + "\n")
    setup = f"""
        import json
        from tests.pipes.test_component import make_nlp
        from spacy_sapbert.annotate import annotate

        nlp = make_nlp({str(tiny_bert)!r}, {str(kb)!r})
    """
    folder = tmp_path / "out"
    out, record = folder / "out.jsonl", sidecar_path(folder / "out.jsonl")

    def job(source: str, resume: bool) -> None:
        (tmp_path / "job.json").write_text(json.dumps({"source": source, "resume": resume}))

    def clear() -> None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()

    def visible() -> List[str]:
        return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))

    with KillServer(setup, WRITE, tmp_path, root=folder) as server:
        # the uninterrupted runs: a.jsonl into a fresh output, then b.jsonl over it
        clear()
        job("a.jsonl", True)
        server.run()
        ref_a, record_a = out.read_bytes(), record.read_bytes()
        done_a = set(lines(out))
        assert len(done_a) == DOCS
        job("b.jsonl", False)
        server.run()
        ref_b, record_b = out.read_bytes(), record.read_bytes()
        records = {ref_a: record_a, ref_b: record_b}

        def fresh() -> List[bytes]:
            clear()
            return []

        def partial() -> List[bytes]:
            clear()
            kept = lines_a[:KEPT]
            out.write_bytes(b"".join(kept) + lines_a[KEPT][: len(lines_a[KEPT]) // 2])
            record.write_bytes(record_a)
            return kept

        def complete() -> List[bytes]:
            clear()
            out.write_bytes(ref_a)
            record.write_bytes(record_a)
            (folder / ".out.jsonl.tmp-4242-abcdef").write_bytes(ref_b[:100])  # a killed replacement's
            (folder / ".out.jsonl.lock").write_text('{"pid": 4242}\n')  # lock file, no longer locked
            return []

        def check_resumed(kept: List[bytes]) -> None:
            got = lines(out)
            complete_lines = [line for line in got if line.endswith(b"\n")]
            assert len(got) - len(complete_lines) <= 1, "only the last line may be torn"
            assert set(complete_lines) <= done_a, "a line that the uninterrupted run does not write"
            ordinals = [json.loads(line)["ordinal"] for line in complete_lines]
            assert len(ordinals) == len(set(ordinals)), "a document written twice"
            assert set(kept) <= set(complete_lines), "a line of the resumed output was lost"
            if got:
                assert record.read_bytes() == record_a, "lines without the record of what wrote them"
            assert visible() in ([], ["out.jsonl.sapbert.json"], ["out.jsonl", "out.jsonl.sapbert.json"]), visible()

        def check_replaced(_: List[bytes]) -> None:
            assert out.is_file(), "the output is missing"
            got = out.read_bytes()
            assert got in (ref_a, ref_b), "the output is neither the old one nor the complete new one"
            # the record may be gone for a moment (a resume then asks for --overwrite), never the other run's
            assert not record.exists() or record.read_bytes() == records[got], "the record is the other output's"
            assert visible() in (["out.jsonl"], ["out.jsonl", "out.jsonl.sapbert.json"]), visible()

        lines_a = ref_a.splitlines(keepends=True)
        starts = {"fresh": (fresh, "a.jsonl", True, check_resumed, ref_a, record_a),
                  "resume": (partial, "a.jsonl", True, check_resumed, ref_a, record_a),
                  "overwrite": (complete, "b.jsonl", False, check_replaced, ref_b, record_b)}
        seen: Dict[str, set] = {}
        for start, (prepare, source, resume, check, final, final_record) in starts.items():
            job(source, resume)
            prepare()
            points = boundaries(server.trace())
            for point in points:
                kept = prepare()
                server.run(point)
                try:
                    check(kept)
                except AssertionError as err:
                    raise AssertionError(f"{start} run killed {point}: {err}") from err
                if start == "overwrite":
                    seen.setdefault(start, set()).add("new" if out.read_bytes() == ref_b else
                                                      "old" if record.exists() else "old, no record")
                else:
                    got_lines = lines(out)
                    seen.setdefault(start, set()).add(len([x for x in got_lines if x.endswith(b"\n")]))
                    if got_lines and not got_lines[-1].endswith(b"\n"):
                        seen[start].add("torn")
                server.run()  # the same command again completes the output
                got = out.read_bytes()
                assert (sorted(lines(out)) == sorted(final.splitlines(keepends=True)) if resume else got == final), \
                    f"{start} run killed {point}, then run again: not the uninterrupted run's output"
                assert record.read_bytes() == final_record, f"{start} run killed {point}, then run again: record"
                assert visible() == ["out.jsonl", "out.jsonl.sapbert.json"], visible()
                assert not list(folder.glob(".out.jsonl.tmp-*")), f"{start} {point}: a temporary output is left"
            assert len(points) >= 8, (start, points)
        # the kills left every kind of state: none, some and all of the lines, and a torn one; the old
        # output with and without its record, and the new one
        assert "torn" in seen["fresh"] and "torn" in seen["resume"], seen
        assert {0, DOCS} <= seen["fresh"] and any(0 < n < DOCS for n in seen["fresh"] if n != "torn"), seen
        assert {KEPT, DOCS} <= seen["resume"] and any(KEPT < n < DOCS for n in seen["resume"] if n != "torn"), seen
        assert seen["overwrite"] == {"old", "old, no record", "new"}, seen
