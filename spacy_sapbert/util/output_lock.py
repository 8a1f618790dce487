"""One writer per output: a lock that a second run of the same command meets at once.

Two ``sapbert annotate`` runs on one output each resumed it from the same point and both
appended every document, so the file held each one twice. An output is therefore written
under an exclusive ``flock`` on a hidden sidecar, ``.<output name>.lock`` beside it (beside
what a symbolic link points to). The kernel drops the lock when its process dies, so a run
killed with SIGKILL never leaves it stuck: the file it leaves behind holds no lock and the
next run simply takes it over. The holder writes its pid, host, start time and command
line into the file, and a run that finds the lock taken raises :class:`InputError` naming
them, having touched nothing (neither the output nor the first run's temporary files).

The lock is re-entrant in the thread that holds it (the command line takes it before it
loads the pipeline, then :func:`~spacy_sapbert.annotate.annotate` takes it again); another
thread of the same process is refused like another process. Forked children (``--n-process``
workers) close their inherited copy, so the lock lives exactly as long as the process
holding it. The file is removed on release; a run that locked a file just removed by its
holder sees that the path no longer names what it locked and locks the new file instead.
"""
from __future__ import annotations

import contextlib
import datetime
import errno
import json
import logging
import os
import shlex
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Union

from spacy_sapbert.errors import InputError

try:
    import fcntl
except ImportError:  # not POSIX (Windows): no lock, as before
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
_HELD = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES)


class _Held:
    def __init__(self, fd: Optional[int], thread: int) -> None:
        self.fd, self.thread, self.count = fd, thread, 1


_registry: Dict[str, _Held] = {}
_guard = threading.Lock()


def lock_path(output: PathLike) -> Path:
    """The lock file of ``output``: hidden, beside the file or folder it names."""
    real = Path(os.path.realpath(output))
    return real.with_name(f".{real.name}.lock")


def _command() -> str:
    """This process's command line as a user typed it (``sapbert …``, ``python -m spacy_sapbert.cli …``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    argv = sys.argv or [""]
    head = f"python -m {spec.name.rsplit('.__main__', 1)[0]}" if spec is not None else Path(argv[0]).name
    return " ".join([head, *(shlex.quote(arg) for arg in argv[1:])])[:500]


def _holder() -> str:
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started,
                       "command": _command()}) + "\n"


def _describe(fd: int) -> str:
    """Who holds the lock, from what it wrote (it may be a moment behind: wait a little)."""
    text = ""
    for _ in range(20):
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        if text:
            break
        time.sleep(0.05)
    try:
        who = json.loads(text)
        return f"pid {who['pid']} on host {who['host']} since {who['started']}, command: {who['command']}"
    except (ValueError, KeyError, TypeError):
        return f"the holder did not say who it is ({text[:200]!r})" if text else "the holder did not say who it is"


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # another user's file: flock works on it all the same


def _acquire(path: Path, output: PathLike) -> Optional[int]:
    """An fd holding the lock on ``path``; InputError naming the holder if another has it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create the output's folder ({err.strerror or err})", path.parent) from err
    while True:
        try:
            fd = _open(path)
        except OSError as err:
            raise InputError(f"cannot create the lock file {path} ({err.strerror or err})", output) from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in _HELD:
                holder = _describe(fd)
                os.close(fd)
                raise InputError(f"another run is writing this output: {holder}; wait for it to finish or choose "
                                 f"another --output (lock file {path})", output) from None
            os.close(fd)  # a file system without locks: go on, as before there were any
            logger.warning("%s: cannot lock the output (%s); another run on it would not be stopped", output,
                           err.strerror or err)
            return None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            with contextlib.suppress(OSError):  # a file left by another user's killed run: locked, not ours to write
                os.ftruncate(fd, 0)
                os.pwrite(fd, _holder().encode("utf-8"), 0)
            return fd
        os.close(fd)  # its holder removed it as we locked it: lock the file that is there now


def _release(path: Path, fd: Optional[int]) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):  # gone, or not ours to remove (another user's, in a sticky folder)
        path.unlink()  # while still locked: a waiting run then sees the path changed and retries
    os.close(fd)


@contextlib.contextmanager
def output_lock(output: PathLike) -> Iterator[Path]:
    """Hold the lock of ``output`` (a file, or the folder of the Ray engine) for the block; yields the lock file.

    Raises :class:`InputError` naming the holder when another process (or thread) has it.
    """
    path = lock_path(output)
    key, me = str(path), threading.get_ident()
    with _guard:
        held = _registry.get(key)
        if held is not None and held.thread != me:
            raise InputError(f"another run in this process (thread {held.thread}) is writing this output; wait "
                             f"for it to finish or choose another --output", output)
        if held is not None:
            held.count += 1
        elif fcntl is not None:
            _registry[key] = held = _Held(_acquire(path, output), me)
    try:
        yield path
    finally:
        if held is not None:
            with _guard:
                held.count -= 1
                if held.count == 0 and _registry.get(key) is held:  # not in a forked child: the parent's lock
                    del _registry[key]
                    _release(path, held.fd)


def _after_fork_in_child() -> None:
    """A forked child closes its copy: the lock is the parent's, and goes when the parent does."""
    global _guard
    fds: List[Optional[int]] = [held.fd for held in _registry.values()]
    _registry.clear()
    _guard = threading.Lock()
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing never unlocks for the parent: its own descriptor still holds it


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["lock_path", "output_lock"]
