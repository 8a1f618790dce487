"""Writers that a crash cannot leave half-done: the old file or folder, or the complete new one.

A killed process (kill -9, power loss, a full disk) must never destroy what a user had.
Every writer of a user-visible file therefore writes a temporary sibling in the same
folder (same file system, so the final rename is atomic), flushes it to disk, and only
then renames it over the target. A folder is built the same way beside the target and
swapped in with one ``renameat2(RENAME_EXCHANGE)`` call where Linux offers it, so there
is no moment at which the target is missing; elsewhere the old folder is renamed aside
first and put back by :func:`recover_dir` if the process dies between the two renames.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, Optional, Union

from spacy_sapbert.errors import InputError

PathLike = Union[str, Path]
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _new_folder_mode() -> int:
    """The permissions ``mkdir`` would give a new folder (0777 less the umask)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:  # Linux: read it without changing it
            umask = next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o777 & ~umask


def _fsync_tree(folder: Path) -> None:
    """Every file under ``folder`` on disk, then the folders: before a swap, or a power cut could
    swap in empty files."""
    for root, _, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(root))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # not every platform can open a folder
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_sibling(path: PathLike, suffix: str = "") -> Path:
    """A fresh, unused name beside ``path`` (hidden, with the process id, so leftovers are recognisable)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{os.urandom(3).hex()}{suffix}")


@contextlib.contextmanager
def atomic_open(path: PathLike, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on success it replaces ``path``.

    On an exception the temporary file is removed and ``path`` is left as it was.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes whole files: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    handle = open(tmp, mode, encoding=None if "b" in mode else encoding)
    try:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        handle.close()
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_bytes(path: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as handle:
        handle.write(data)
    return Path(path)


def atomic_write_text(path: PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux's renameat2; False where that is not available."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return result == 0


def _aside(path: Path) -> Path:
    return path.with_name(f".{path.name}.old")


def recover_dir(path: PathLike) -> None:
    """Put back a folder left renamed aside by a replace that died half-way (non-Linux fallback)."""
    path = Path(path)
    aside = _aside(path)
    if aside.is_dir() and not path.exists():
        os.replace(aside, path)
    elif aside.is_dir():
        shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def atomic_dir(path: PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; on success it becomes ``path``.

    An existing ``path`` is replaced only once the new folder is complete, and removed
    after the swap; on an exception the temporary folder is removed and ``path`` is
    untouched. Callers decide beforehand whether replacing ``path`` is allowed.
    """
    path = Path(path)
    if path.is_symlink():  # replace the folder the link points to, and keep the link
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    recover_dir(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        os.chmod(tmp, _new_folder_mode())  # mkdtemp's folder is private (0700); the result is not
        yield tmp
        _fsync_tree(tmp)
        if not path.exists():
            os.replace(tmp, path)
        elif path.is_dir() and _exchange(tmp, path):
            shutil.rmtree(tmp)  # tmp now holds the old folder
        else:
            if not path.is_dir():
                raise FileExistsError(f"{path} exists and is not a folder")
            aside = _aside(path)
            os.replace(path, aside)
            os.replace(tmp, path)
            shutil.rmtree(aside)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def describe_folder(folder: Path, limit: int = 5) -> str:
    """The first few entries of a folder, for an error message ("data/, notes.txt and 3 more")."""
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    return ", ".join(entries[:limit]) + (f" and {len(entries) - limit} more" if len(entries) > limit else "")


def check_replaceable(folder: PathLike, ours: Callable[[Path], bool], what: str, remedy: str,
                      option: str = "--output", overwrite: bool = False,
                      reads: Optional[Dict[str, Optional[PathLike]]] = None) -> None:
    """Refuse to replace ``folder`` where that would delete something its writer did not write.

    Allowed: a missing or empty folder, an earlier output of the same writer (``ours``), and
    anything with ``overwrite``. A symbolic link is judged, and replaced, by its target.
    Writers that build for minutes check before building and again before swapping in.
    Never allowed, not even with ``overwrite``: a folder that is, or holds, one of ``reads``
    (what the writer reads, by the name the error gives it: its model, say).
    """
    folder = Path(folder)
    for name, source in (reads or {}).items():
        if source is not None and Path(source).exists():
            source, target = Path(source).resolve(), folder.resolve()
            if source == target or target in source.parents:
                raise InputError(f"is or holds {name}, which this command reads: write to another folder", folder,
                                 field=option)
    real = folder.resolve() if folder.is_symlink() else folder
    if not real.exists():
        return
    if not real.is_dir():
        raise InputError(f"exists and is not a folder; remove it or choose another {option}", folder)
    if overwrite or not any(real.iterdir()) or ours(real):
        return
    raise InputError(f"refusing to replace a folder that is not {what}; it holds {describe_folder(real)}. {remedy}",
                     folder)


def check_new_file(output: PathLike, overwrite: bool, inputs: Iterable[PathLike] = (), option: str = "--output"
                   ) -> None:
    """Before a command writes the file ``output``: it is none of the command's ``inputs`` and lies in none of
    those that are folders (not even with ``overwrite``: the command reads them while it builds what it writes),
    and it is new unless ``overwrite``. Nothing a user has is replaced unasked."""
    output = Path(output)
    target = output.resolve()
    for given in inputs:
        source = Path(given).resolve()
        if source == target or (source.is_dir() and source in target.parents):
            raise InputError("is one of the files read: write to a new file", output, field=option)
    if output.is_dir():
        raise InputError("is a folder: name a file", output, field=option)
    if output.exists() and not overwrite:
        raise InputError("exists: choose a new file, or --overwrite (nothing is overwritten unasked)", output,
                         field=option)


def remove_stale_temps(folder: PathLike, name: str) -> int:
    """Remove temporary siblings of ``folder/name`` left by killed writers; return how many."""
    removed = 0
    for leftover in Path(folder).glob(f".{name}.tmp-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                leftover.unlink()
        removed += 1
    return removed


__all__ = ["atomic_dir", "atomic_open", "atomic_write_bytes", "atomic_write_text", "check_new_file", "check_replaceable",
           "describe_folder", "recover_dir", "remove_stale_temps", "temp_sibling"]
