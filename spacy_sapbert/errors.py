"""Errors that point at the user's input: the file, the line and the field."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union


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
