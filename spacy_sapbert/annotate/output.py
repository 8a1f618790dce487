"""A JSONL output file that a crash cannot leave half-written, and that a re-run resumes.

Each document is one line, written with a single ``os.write`` on a file opened for
appending, so a killed process leaves whole lines behind (a line is never split between
two writes). On opening an existing file to resume, the lines are checked: a last line
without its newline (power loss, a full disk) is cut off, and the ``ordinal`` of every
complete line is remembered so that those input records are not annotated again.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, Optional, Set, Union

from ..errors import InputError

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


class ResumableJsonl:
    """Append-only JSONL output; ``done`` holds the ordinals already in the file."""

    def __init__(self, path: PathLike, resume: bool = True) -> None:
        self.path = Path(path)
        self.done: Set[int] = set()
        self.repaired_bytes = 0
        self._fd: Optional[int] = None
        if self.path.is_dir():
            raise InputError("output is a folder, not a file", self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and resume:
            self._scan()
        elif self.path.exists():
            self.path.unlink()

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
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    def write(self, obj: Dict[str, Any]) -> None:
        """Append ``obj`` (which carries an ``ordinal``) as one line."""
        if self._fd is None:
            self.open()
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)  # type: ignore[arg-type]
            view = view[written:]
        self.done.add(obj["ordinal"])

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "ResumableJsonl":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["ResumableJsonl"]
