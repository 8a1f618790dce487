"""One run at a time writes an output (issue 32, item 4): faults injected around the lock.

Two `sapbert annotate in.jsonl -o out.jsonl` runs started a second apart both reported
'written 48' and the file held every document twice. Here a second run is refused with one
`error:` line naming the holder, having touched nothing; a holder killed with SIGKILL (even
one with forked workers still alive) leaves a lock file that the next run takes over; a
forked child never releases its parent's lock; the lock is re-entrant in its thread; a lock
file removed by its holder just as another run locked it is not trusted; processes taking
turns never hold it together; and the issue's two runs at once leave each document once.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Iterator, List

import pytest

from spacy_sapbert.annotate import annotate
from spacy_sapbert.annotate.sharded import run_sharded
from spacy_sapbert.errors import InputError
from spacy_sapbert.util import output_lock as lock_module
from spacy_sapbert.util.output_lock import lock_path, output_lock

from tests.linker_fixtures import write_small_kb
from tests.pipes.test_component import make_nlp

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
TEXTS = ["Plaquenil was stopped after a heart attack.", "Renal failure and kidney failure.", "Nothing here.",
         "MS or a breast tumour? Diabetes."]
DOCS = 48
HOLD = """
import contextlib, os, sys, time
from spacy_sapbert.util.output_lock import output_lock

with contextlib.ExitStack() as stack:
    for output in sys.argv[2:]:
        stack.enter_context(output_lock(output))
    worker = 0
    if sys.argv[1] == "fork":  # a forked worker (as --n-process has) that outlives its parent
        worker = os.fork()
        if worker == 0:
            time.sleep(600)
            os._exit(0)
    sys.stdout.write(f"READY {worker}\\n")
    sys.stdout.flush()
    sys.stdin.readline()
"""


def write_docs(path: Path, count: int = DOCS) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": f"{TEXTS[i % 4]} Case {i}."}) + "\n"
                            for i in range(count)), encoding="utf-8")
    return path


def cli(*args: str) -> List[str]:
    return [sys.executable, "-m", "spacy_sapbert.cli", "annotate", *args]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*args), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def snapshot(folder: Path) -> Dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def ordinals(path: Path) -> List[int]:
    return sorted(json.loads(line)["ordinal"] for line in path.read_text(encoding="utf-8").splitlines())


def locked_elsewhere(output: Path) -> bool:
    """Whether some open file holds the lock (a probe of our own: flock locks conflict within a process too)."""
    try:
        fd = os.open(lock_path(output), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@contextmanager
def held_by_another_process(*outputs: Path, mode: str = "plain") -> Iterator[SimpleNamespace]:
    """A child process holding the locks of ``outputs`` (with a forked worker when ``mode`` is 'fork')."""
    child = subprocess.Popen([sys.executable, "-c", HOLD, mode, *map(str, outputs)], env=ENV, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder = SimpleNamespace(process=child, pid=child.pid, worker=0)
    try:
        line = child.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("READY"), f"the holder failed: {line}{child.stderr.read()}"  # type: ignore[union-attr]
        holder.worker = int(line.split()[1])
        yield holder
    finally:
        for pid in (child.pid, holder.worker):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        child.wait(timeout=60)


def assert_refused(result: subprocess.CompletedProcess, output: str, pid: int) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()  # one line: nothing was loaded (loading logs INFO lines) or written
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {output}: another run is writing this output: pid {pid} on host "
                               f"{socket.gethostname()} since "), lines[0]
    assert ", command: " in lines[0] and "wait for it to finish or choose another --output" in lines[0], lines[0]


@pytest.fixture(scope="module")
def nlp(tiny_bert, tmp_path_factory):
    return make_nlp(tiny_bert, write_small_kb(tmp_path_factory.mktemp("kb")))


@pytest.mark.slow
def test_a_second_cli_run_is_refused_before_loading_naming_the_holder_and_touching_nothing(tmp_path):
    write_docs(tmp_path / "docs.jsonl")
    out = tmp_path / "out.jsonl"
    # what a first run leaves while it works: part of its output, and the new output of an --overwrite
    out.write_bytes(b'{"ordinal": 0}\n{"ordi')
    (tmp_path / ".out.jsonl.tmp-4242-abcdef").write_bytes(b'{"ordinal": 0}\n')
    with output_lock(out) as lock, output_lock(tmp_path / "parts"):
        assert lock == tmp_path / ".out.jsonl.lock" and json.loads(lock.read_text())["pid"] == os.getpid()
        before = snapshot(tmp_path)
        for extra in ([], ["--overwrite"], ["--n-process", "2"]):
            assert_refused(run_cli("docs.jsonl", "-o", "out.jsonl", *extra, cwd=tmp_path), "out.jsonl", os.getpid())
        assert_refused(run_cli("docs.jsonl", "-o", "parts", "--engine", "ray", cwd=tmp_path), "parts", os.getpid())
        assert snapshot(tmp_path) == before
    assert not lock.exists()


@pytest.mark.slow
def test_a_holder_killed_with_sigkill_leaves_a_lock_file_the_next_run_takes_over(tmp_path):
    write_docs(tmp_path / "docs.jsonl")
    out = tmp_path / "out.jsonl"
    with held_by_another_process(out) as holder:
        assert_refused(run_cli("docs.jsonl", "-o", "out.jsonl", cwd=tmp_path), "out.jsonl", holder.pid)
        assert not out.exists()
        holder.process.send_signal(signal.SIGKILL)
        holder.process.wait(timeout=60)
    assert json.loads(lock_path(out).read_text())["pid"] == holder.pid  # stale: its holder is gone
    result = run_cli("docs.jsonl", "-o", "out.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert ordinals(out) == list(range(DOCS)) and not lock_path(out).exists()


def test_a_killed_holder_with_a_forked_worker_still_alive_does_not_keep_the_lock(tmp_path):
    out = tmp_path / "out.jsonl"
    with held_by_another_process(out, mode="fork") as holder:
        assert holder.worker and locked_elsewhere(out)
        holder.process.send_signal(signal.SIGKILL)
        holder.process.wait(timeout=60)
        os.kill(holder.worker, 0)  # the worker lives on (it would raise ProcessLookupError otherwise)
        # the worker closes its inherited descriptor as it starts: on a loaded machine that can come a
        # moment after it reported its pid, so wait for it (a worker that kept the lock fails after 30 s)
        deadline = time.monotonic() + 30
        while locked_elsewhere(out) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not locked_elsewhere(out)
        with output_lock(out) as lock:
            assert json.loads(lock.read_text())["pid"] == os.getpid()


def test_a_forked_child_leaving_the_block_does_not_release_the_parents_lock(tmp_path):
    out = tmp_path / "out.jsonl"
    held = output_lock(out)
    lock = held.__enter__()
    child = os.fork()
    if child == 0:  # the child runs the rest of the block, as a fork that returns would
        code = 1
        try:
            held.__exit__(None, None, None)
            code = 0
        finally:
            os._exit(code)
    try:
        assert os.waitpid(child, 0)[1] == 0
        assert lock.exists() and locked_elsewhere(out)
    finally:
        held.__exit__(None, None, None)
    assert not lock.exists() and not locked_elsewhere(out)


def test_two_cli_runs_at_once_leave_each_document_once(tmp_path):
    """The issue's two runs, started together: whichever way they interleave, no document twice."""
    write_docs(tmp_path / "docs.jsonl")
    runs = [subprocess.Popen(cli("docs.jsonl", "-o", "out.jsonl"), cwd=tmp_path, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(run, *run.communicate(timeout=300)) for run in runs]
    assert sorted(run.returncode for run in runs) in ([0, 0], [0, 2]), [err for _, _, err in results]
    for run, stdout, stderr in results:
        if run.returncode == 2:  # refused while the other one wrote
            other = next(r for r in runs if r is not run)
            assert_refused(subprocess.CompletedProcess(run.args, 2, stdout, stderr), "out.jsonl", other.pid)
    assert ordinals(tmp_path / "out.jsonl") == list(range(DOCS))
    assert not lock_path(tmp_path / "out.jsonl").exists()


def test_the_library_is_refused_while_another_process_writes_and_leaves_its_files(nlp, tmp_path):
    source = write_docs(tmp_path / "docs.jsonl", 8)
    out = tmp_path / "out.jsonl"
    (tmp_path / ".out.jsonl.tmp-4242-abcdef").write_bytes(b"the other run's new output\n")
    with held_by_another_process(out, tmp_path / "parts") as holder:
        before = snapshot(tmp_path)
        for resume in (True, False):
            with pytest.raises(InputError, match=f"out.jsonl: another run is writing this output: pid {holder.pid} "):
                annotate(nlp, source, out, resume=resume, show_progress=False)
        with pytest.raises(InputError, match=f"another run is writing this output: pid {holder.pid} "):
            run_sharded(lambda shards, folder: pytest.fail("annotated under another run's lock"), source,
                        tmp_path / "parts", {}, show_progress=False)
        assert snapshot(tmp_path) == before and not (tmp_path / "parts").exists()


def test_the_lock_is_reentrant_in_its_thread_and_refused_to_others(nlp, tmp_path):
    source = write_docs(tmp_path / "docs.jsonl", 8)
    out = tmp_path / "out.jsonl"
    refused: List[Exception] = []

    def other_thread() -> None:
        try:
            with output_lock(out):
                pass
        except InputError as err:
            refused.append(err)

    with output_lock(out) as lock:  # what the command line does before loading the pipeline
        with output_lock(str(out)):
            assert locked_elsewhere(out)
        assert locked_elsewhere(out), "an inner release must not unlock the outer holder"
        summary = annotate(nlp, source, out, show_progress=False)  # takes it again
        assert summary.written == 8 and ordinals(out) == list(range(8))
        assert locked_elsewhere(out) and lock.exists()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert len(refused) == 1 and "another run in this process" in str(refused[0])
    assert not locked_elsewhere(out) and not lock.exists()


def test_a_stale_lock_file_is_taken_over(tmp_path):
    out = tmp_path / "out.jsonl"
    lock_path(out).write_text('{"pid": 1, "host": "gone", "started": "then", "command": "killed"}\n{"garb')
    with output_lock(out) as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()


def test_a_lock_file_removed_as_it_was_locked_is_not_trusted(tmp_path, monkeypatch):
    """Run A releases (removes the file, then unlocks) between our open and our flock, and run C
    creates and locks a new file: our flock succeeds on A's removed file, which must not count."""
    out = tmp_path / "out.jsonl"
    path = lock_path(out)
    first = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(first, fcntl.LOCK_EX)  # run A
    real_flock, third = fcntl.flock, []

    def racing_flock(fd: int, operation: int) -> None:
        if not third:
            path.unlink()
            os.close(first)  # A's release, in its order
            third.append(os.open(path, os.O_RDWR | os.O_CREAT))  # run C
            real_flock(third[0], fcntl.LOCK_EX)
            os.write(third[0], b'{"pid": 4242, "host": "c", "started": "now", "command": "sapbert annotate"}\n')
        real_flock(fd, operation)

    monkeypatch.setattr(lock_module, "fcntl", SimpleNamespace(flock=racing_flock, LOCK_EX=fcntl.LOCK_EX,
                                                              LOCK_NB=fcntl.LOCK_NB))
    try:
        with pytest.raises(InputError, match="another run is writing this output: pid 4242 on host c "):
            with output_lock(out):
                pass
    finally:
        os.close(third[0])


def test_processes_taking_turns_never_hold_it_together(tmp_path):
    """Three processes increment a counter under the lock, unlocked read-modify-write: no update is lost."""
    out, counter = tmp_path / "out.jsonl", tmp_path / "counter"
    counter.write_text("0")
    script = textwrap.dedent("""
        import sys
        from spacy_sapbert.errors import InputError
        from spacy_sapbert.util.output_lock import output_lock

        done = 0
        while done < int(sys.argv[3]):
            try:
                with output_lock(sys.argv[1]):
                    value = int(open(sys.argv[2]).read())
                    open(sys.argv[2], "w").write(str(value + 1))
                    done += 1
            except InputError:
                pass
    """)
    workers = [subprocess.Popen([sys.executable, "-c", script, str(out), str(counter), "150"], env=ENV)
               for _ in range(3)]
    assert [worker.wait(timeout=180) for worker in workers] == [0, 0, 0]
    assert counter.read_text() == "450" and not lock_path(out).exists()
