"""kill -9 at every boundary of a writer, for the crash-safety tests.

A writer's promise (the previous good file or folder is intact, or the new one is complete;
what a killed run leaves is recognisable and cleared by the next run) is about the states
the disk can be left in. Those change at the writer's file-system calls (open for writing,
write, fsync, mkdir, rename/replace/exchange, unlink, rmdir, rmtree ...); in between, only
more bytes reach a file being written. So a SIGKILL can only leave one of the states
*before* such a call (or, for a ``write``, part-way through it). Killing at random moments
samples those states, mostly the same few long-lasting ones; this module visits them
deliberately:

1. :meth:`KillServer.trace` runs the writer once, unharmed, and lists its file-system calls
   (:class:`Event`) under a folder;
2. :func:`boundaries` picks the kill points: before every kind of call (for the calls of one
   kind on one file, or in one temporary folder, the first and the last), plus a write cut
   in half and the moment the writer returns;
3. :meth:`KillServer.run` replays the writer and kills it (``SIGKILL`` to itself) exactly
   there.

The child process does its imports and set-up once (that is most of the time a run took
when every run started a new interpreter); each run is a ``fork`` of it, so it starts from
exactly the state that set-up left, as a new process would, and dies as a killed process
does (the kernel closes its files and drops its locks; what it had not written is lost).
"""
from __future__ import annotations

import builtins
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

TESTS = Path(__file__).resolve().parent

#: (module, function) pairs a replayed writer is watched through: every call that changes
#: what is on disk, from Python (a C extension's own writes, e.g. FAISS or safetensors
#: writing a file, fall between an ``open``/``mkdir`` before and an ``fsync`` or rename after)
CALLS: Tuple[Tuple[str, str], ...] = (
    ("builtins", "open"), ("io", "open"), ("os", "open"), ("os", "write"), ("os", "pwrite"), ("os", "truncate"),
    ("os", "ftruncate"), ("os", "fsync"), ("os", "mkdir"), ("os", "replace"), ("os", "rename"), ("os", "unlink"),
    ("os", "remove"), ("os", "rmdir"), ("shutil", "rmtree"), ("spacy_sapbert.util.atomic", "_exchange"),
    ("gzip", "GzipFile.write"),  # a chunk of compressed text on its way to the file
)


@dataclass(frozen=True)
class Event:
    """One watched call: ``call`` ("os.replace") and the path it acts on (for a rename, the
    destination), relative to the traced folder, with temporary names' random parts as ``*``."""

    call: str
    path: str

    def kind(self) -> Tuple[str, str]:
        """What makes two calls interchangeable for a kill: the same call on the same file, or
        anywhere inside the same temporary folder (its files differ only in name); numbers in
        names (the step of a checkpoint) do not count."""
        parts = re.sub(r"\d+", "#", self.path).split("/")
        for i, part in enumerate(parts):
            if ".tmp" in part:
                return self.call, "/".join(parts[: i + 1])
        return self.call, "/".join(parts)


@dataclass(frozen=True)
class KillPoint:
    """Kill the writer just before its ``index``-th watched call (``how="before"``), part-way
    through it (``"partial"``: half the bytes of a write), or once it has returned
    (``"end"``, no index)."""

    index: Optional[int]
    how: str = "before"
    event: Optional[Event] = None

    def __str__(self) -> str:
        if self.how == "end":
            return "when the write returns"
        return f"{self.how} call {self.index} ({self.event.call} {self.event.path})" if self.event else \
            f"{self.how} call {self.index}"


@dataclass
class Run:
    outcome: str  # "killed" or "finished"
    events: List[Event]  # the watched calls it made (up to the kill)


def boundaries(events: Sequence[Event], partial_writes: bool = True) -> List[KillPoint]:
    """Kill points that leave every distinct state the traced writer can leave.

    Before the first and before the last call of each kind (:meth:`Event.kind`): of the calls
    of one kind, none, all but one (some), or all (what the next kind's first call, or the
    return, finds) are done, and the calls in between only leave more states of "some";
    ``partial_writes``: also half-way through those ``os.write`` calls; and after the writer
    returned."""
    by_kind: Dict[Tuple[str, str], List[int]] = {}
    for i, event in enumerate(events):
        by_kind.setdefault(event.kind(), []).append(i)
    chosen = sorted({i for indices in by_kind.values() for i in (indices[0], indices[-1])})
    points = [KillPoint(i, "before", events[i]) for i in chosen]
    if partial_writes:
        points += [KillPoint(i, "partial", events[i]) for i in chosen if events[i].call == "os.write"]
    return points + [KillPoint(None, "end")]


class KillServer:
    """A child process that runs ``setup`` once and then, for each :meth:`run`, forks a copy of
    itself that runs ``write`` (a statement) and is killed at the requested point.

    ``root``: the folder whose file-system calls are watched and counted (default ``cwd``)."""

    def __init__(self, setup: str, write: str, cwd: Path, root: Optional[Path] = None,
                 timeout: float = 300.0) -> None:
        self.setup, self.write, self.cwd = textwrap.dedent(setup), textwrap.dedent(write), Path(cwd)
        self.root = Path(root or cwd).resolve()
        self.timeout = timeout
        self.child: Optional[subprocess.Popen] = None
        self._scratch = Path(tempfile.mkdtemp(prefix="kill-server-"))
        self._log = (self._scratch / "stderr.txt").open("w+", encoding="utf-8")
        self.runs = 0

    def __enter__(self) -> "KillServer":
        code = self.setup + "\nfrom tests.fault_injection import serve as _serve\n" \
            f"_serve(globals(), {self.write!r}, {str(self.root)!r}, {self.timeout!r})\n"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]),
                   TQDM_DISABLE="1")
        self.child = subprocess.Popen([sys.executable, "-c", code], cwd=self.cwd, env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._log, text=True)
        line = self._read()
        while line and line.strip() != "READY":  # whatever set-up printed
            line = self._read()
        if not line:
            raise AssertionError(f"the writer's set-up failed:\n{self._stderr()}")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.child is not None:
            try:
                self.child.stdin.close()  # type: ignore[union-attr]
                self.child.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.child.kill()
                self.child.wait()
        self._log.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _read(self) -> str:
        return self.child.stdout.readline()  # type: ignore[union-attr]

    def _stderr(self, tail: int = 6000) -> str:
        self._log.flush()
        return (self._scratch / "stderr.txt").read_text(encoding="utf-8", errors="replace")[-tail:]

    def run(self, kill: Optional[KillPoint] = None) -> Run:
        """Run the write once; with ``kill``, it must die there (AssertionError if it finishes)."""
        self.runs += 1
        result = self._scratch / f"run-{self.runs}.json"
        request = {"result": str(result), "index": kill.index if kill else None, "how": kill.how if kill else None,
                   "event": [kill.event.call, kill.event.path] if kill and kill.event else None}
        self.child.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.child.stdin.flush()  # type: ignore[union-attr]
        status = self._read()
        if not status:
            raise AssertionError(f"the kill server died:\n{self._stderr()}")
        status = json.loads(status)
        report = json.loads(result.read_text(encoding="utf-8")) if result.exists() else {}
        events = [Event(*pair) for pair in report.get("events", [])]
        if status["outcome"] == "hung":
            raise AssertionError(f"the write did not end within {self.timeout} s ({kill or 'no kill'})")
        if report.get("error"):
            raise AssertionError(f"the write failed ({kill or 'no kill'}):\n{report['error']}")
        if report.get("mismatch"):
            raise AssertionError(f"the replayed write did not make the traced calls: {report['mismatch']}")
        if status["outcome"] == "killed":
            assert kill is not None, f"killed without a kill point:\n{self._stderr()}"
            return Run("killed", events)
        assert status["outcome"] == "finished", (status, self._stderr())
        if kill is not None:
            raise AssertionError(f"the write finished before the kill point {kill} ({len(events)} calls)")
        return Run("finished", events)

    def trace(self) -> List[Event]:
        """The watched calls of one complete, unharmed run (which therefore changes the disk)."""
        return self.run().events

    def kill_at_each_boundary(self, prepare: Callable[[], None], check: Callable[[KillPoint], Any],
                              recovered: Callable[[KillPoint, Any], None]) -> List[KillPoint]:
        """The crash suites' loop: from the state ``prepare`` makes, kill the write at each of
        :func:`boundaries` of a traced run, ``check`` what it left (its AssertionError names the
        point), then run the write once more unharmed and let ``recovered`` check the result
        (with what ``check`` returned). Returns the points."""
        prepare()
        points = boundaries(self.trace())
        for point in points:
            prepare()
            self.run(point)
            try:
                found = check(point)
            except AssertionError as err:
                raise AssertionError(f"killed {point}: {err}") from err
            self.run()  # the next write clears what the killed one left behind, and completes
            recovered(point, found)
        return points


# -- in the child ---------------------------------------------------------------------------------

_TMP_NAME = re.compile(r"(\.tmp-)[^/]*")


def _describe(name: str, args: tuple, kwargs: dict, root: str) -> Optional[str]:
    """The path a watched call acts on, relative to ``root``; None outside it."""
    if name in ("os.replace", "os.rename", "spacy_sapbert.util.atomic._exchange"):
        target = args[1] if len(args) > 1 else kwargs.get("dst")
    elif name == "gzip.GzipFile.write":
        target = getattr(getattr(args[0], "fileobj", None), "name", None)
    else:
        target = args[0] if args else kwargs.get("path", kwargs.get("file"))
    try:
        if isinstance(target, int):  # a file descriptor
            path = os.readlink(f"/proc/self/fd/{target}")
        else:
            path = os.fsdecode(os.fspath(target))
            if kwargs.get("dir_fd") is not None:
                path = os.path.join(os.readlink(f"/proc/self/fd/{kwargs['dir_fd']}"), path)
            path = os.path.abspath(path)
    except (TypeError, OSError):
        return None
    if name in ("builtins.open", "io.open"):
        mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
        if not any(flag in mode for flag in "wax+"):
            return None  # reading
    if name == "os.open":
        flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
        if not flags & (os.O_CREAT | os.O_TRUNC):
            return None  # opens what is there
    if path != root and not path.startswith(root + os.sep):
        return None
    if (name == "os.mkdir" and os.path.lexists(path)) or (name.endswith(".open") and os.path.isdir(path)):
        return None  # changes nothing: a folder that is there (exist_ok), an unnamed file (O_TMPFILE)
    return _TMP_NAME.sub(r"\1*", os.path.relpath(path, root))


class _Watch:
    """The watched calls of the forked writer, and the kill."""

    def __init__(self, root: str, request: Dict[str, Any]) -> None:
        self.root, self.request = root, request
        self.events: List[List[str]] = []
        self.active = False

    def install(self) -> None:
        import importlib

        for module_name, attr in CALLS:
            try:
                owner: Any = importlib.import_module(module_name) if module_name != "builtins" else builtins
            except ImportError:
                continue
            *path, attr_name = attr.split(".")
            for part in path:  # a method: ("gzip", "GzipFile.write")
                owner = getattr(owner, part)
            real = getattr(owner, attr_name, None)
            if real is not None:
                setattr(owner, attr_name, self._wrap(f"{module_name}.{attr}", real))

    def _wrap(self, name: str, real: Callable) -> Callable:
        @functools.wraps(real)
        def watched(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return real(*args, **kwargs)
            self.active = False  # the calls made to describe this one are not watched
            try:
                path = _describe(name, args, kwargs, self.root)
            finally:
                self.active = True
            if path is None:
                return real(*args, **kwargs)
            index = len(self.events)
            self.events.append([name, path])
            if index == self.request.get("index"):
                if self.request.get("event") not in (None, [name, path]):
                    self.finish(mismatch=f"call {index} is {name} {path}, not {' '.join(self.request['event'])}")
                if self.request["how"] == "partial" and name == "os.write":
                    data = memoryview(args[1])
                    real(args[0], data[: max(1, len(data) // 2)])
                self.die()
            return real(*args, **kwargs)
        return watched

    def die(self) -> None:
        self.active = False
        self.report()
        os.kill(os.getpid(), signal.SIGKILL)

    def report(self, **extra: Any) -> None:
        with open(self.request["result"], "w", encoding="utf-8") as handle:
            json.dump({"events": self.events, **extra}, handle)

    def finish(self, **extra: Any) -> None:
        self.active = False
        self.report(**extra)
        os._exit(0)


def _forked(namespace: Dict[str, Any], write: str, root: str, request: Dict[str, Any]) -> None:
    """In the fork: one thread for torch and FAISS (an inherited OpenMP pool hangs), watch, write."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        from spacy_sapbert.util.threads import single_thread_in_child

        single_thread_in_child()
        watch = _Watch(root, request)
        watch.install()
        watch.active = True
        try:
            exec(write, namespace)
        except BaseException:  # noqa: BLE001 - reported to the test
            watch.finish(error=traceback.format_exc())
        if request.get("how") == "end":
            watch.die()
        watch.finish()
    finally:
        os._exit(70)  # never back into the server's loop


def serve(namespace: Dict[str, Any], write: str, root: str, timeout: float) -> None:
    """The child's loop: a request per line on stdin, a status per line on stdout."""
    channel = os.fdopen(os.dup(1), "w")
    channel.write("READY\n")
    channel.flush()
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _forked(namespace, write, root, request)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                status = None
                break
            time.sleep(0.002)
        if status is None:
            outcome = "hung"
        elif os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            outcome = "killed"
        else:
            outcome = "finished" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else f"status {status}"
        channel.write(json.dumps({"outcome": outcome}) + "\n")
        channel.flush()


__all__ = ["CALLS", "Event", "KillPoint", "KillServer", "Run", "boundaries", "serve"]
