"""A JSONL output file that a crash cannot leave half-written, and that a re-run resumes.

Each document is one line, written with a single ``os.write`` on a file opened for
appending, so a killed process leaves whole lines behind (a line is never split between
two writes). On opening an existing file to resume, the lines are checked: a last line
without its newline (power loss, a full disk) is cut off, and the ``ordinal`` of every
complete line is remembered so that those input records are not annotated again; the
sidecar (:mod:`.identity`) must say that the same input and pipeline wrote them.

Starting an existing output again (``resume=False``, ``--overwrite``) never removes it
first: the new output is written to a temporary file beside it and renamed over it only
when complete, so the old one survives a crash of the new run.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Set, Union

from spacy_sapbert.annotate.identity import RunRecord
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.atomic import remove_stale_temps, temp_sibling

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


def check_paths(source: PathLike, output: PathLike) -> None:
    """Refuse, before anything is loaded, an output that is the input or cannot be written."""
    source, output = Path(source), Path(output)
    if not source.exists():
        raise InputError("input not found", source)
    if output.is_dir():
        raise InputError("output is a folder, not a file", output)
    if output.exists() and os.path.samefile(source, output):
        raise InputError(f"output is the input file ({source}): annotating it in place would destroy it; "
                         f"choose another --output", output)
    if source.is_dir() and output.suffix == ".txt" and source.resolve() in output.resolve().parents:
        raise InputError("output is a .txt file inside the input folder, which is read as input; choose another "
                         "--output", output)
    folder = output.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as err:
        raise InputError("cannot create the output's folder: a file of that name is in the way", folder) from err
    except OSError as err:
        raise InputError(f"cannot create the output's folder ({err.strerror or err})", folder) from err
    try:  # the only reliable test (root, read-only mounts, /proc): create a file there
        with tempfile.TemporaryFile(dir=folder):
            pass
        if output.exists():
            with output.open("ab"):
                pass
    except OSError as err:
        raise InputError(f"cannot write the output here ({err.strerror or err})", output) from err


class ResumableJsonl:
    """Append-only JSONL output; ``done`` holds the ordinals already in the file."""

    def __init__(self, path: PathLike, resume: bool = True, record: Optional[RunRecord] = None) -> None:
        self.path = Path(path)
        self.done: Set[int] = set()
        self.repaired_bytes = 0
        self.record = record
        self._fd: Optional[int] = None
        self._target = self.path  # where lines go: the output, or a temporary file that replaces it
        if self.path.is_dir():
            raise InputError("output is a folder, not a file", self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.path.parent, self.path.name)
        has_lines = self.path.exists() and self.path.stat().st_size > 0
        if has_lines and resume:
            if record is not None:
                record.check_resume("input", "pipeline")
            self._scan()
        elif has_lines:
            self._target = temp_sibling(self.path)
        elif record is not None:
            record.write()

    def _scan(self) -> None:
        """Remember the finished ordinals; cut a torn last line."""
        good_end = 0
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                if not raw.endswith(b"\n"):
                    break  # torn last line: cut below
                try:
                    obj = json.loads(raw)
                    ordinal = obj["ordinal"]
                except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
                    raise InputError(f"cannot resume: this line is not an annotation written by sapbert annotate "
                                     f"({err.__class__.__name__}); use --overwrite or another output file",
                                     self.path, number) from err
                if not isinstance(ordinal, int):
                    raise InputError("cannot resume: 'ordinal' is not an integer", self.path, number, "ordinal")
                self.done.add(ordinal)
                good_end += len(raw)
        size = self.path.stat().st_size
        if size > good_end:
            self.repaired_bytes = size - good_end
            logger.warning("%s: cutting an incomplete last line (%d bytes) before resuming", self.path,
                           self.repaired_bytes)
            with self.path.open("r+b") as handle:
                handle.truncate(good_end)

    def open(self) -> "ResumableJsonl":
        if self._fd is None:
            try:
                self._fd = os.open(self._target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as err:
                raise InputError(f"cannot write the output ({err.strerror or err})", self.path) from err
        return self

    def write_line(self, ordinal: int, data: bytes) -> None:
        """Append one complete line (``data`` ends with a newline) for record ``ordinal``."""
        if self._fd is None:
            self.open()
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)  # type: ignore[arg-type]
                view = view[written:]
        except OSError as err:  # a full disk: say which file (os.write does not)
            raise OSError(err.errno, err.strerror, str(self.path)) from err
        self.done.add(ordinal)

    def write(self, obj: Dict[str, Any]) -> None:
        """Append ``obj`` (which carries an ``ordinal``) as one line."""
        self.write_line(obj["ordinal"], (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))

    def close(self, complete: bool = True) -> None:
        """Flush; a replacing output takes the old one's place only when ``complete``."""
        if self._fd is None and self._target != self.path:
            self.open()  # an empty new output still replaces the old one
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._target == self.path:
            return
        if not complete:
            self._target.unlink(missing_ok=True)
            return
        if self.record is not None:
            self.record.remove()  # never a new output beside the old run's record: see identity.py
        os.replace(self._target, self.path)
        self._target = self.path
        if self.record is not None:
            self.record.write()

    def __enter__(self) -> "ResumableJsonl":
        return self.open()

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(complete=exc_type is None)


__all__ = ["ResumableJsonl", "check_paths"]
