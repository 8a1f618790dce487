"""Errors that point at the user's input: the file, the line and the field."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Union


class InputError(ValueError):
    """Bad input, reported as ``path:line: [field] problem`` so a user can find it."""

    def __init__(
        self,
        problem: str,
        path: Optional[Union[str, Path]] = None,
        line: Optional[int] = None,
        field: Optional[str] = None,
    ) -> None:
        self.problem = problem
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        where = self.path or "<input>"
        if line is not None:
            where += f":{line}"
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}: {what}{problem}")


@contextmanager
def exit_on_input_error(code: int = 2) -> Iterator[None]:
    """For command-line entry points: an :class:`InputError` becomes one ``error: …`` line on
    stderr and exit ``code`` (2, as for a usage error), instead of a traceback. The one place
    that maps input errors to an exit code, for every ``sapbert`` command."""
    try:
        yield
    except InputError as err:
        sys.stderr.write(f"error: {err}\n")
        raise SystemExit(code) from err
