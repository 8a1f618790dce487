"""A content hash of an input file, recorded with what was trained on it (pairs, re-ranker data)."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Union

PathLike = Union[str, Path]


def file_fingerprint(path: PathLike) -> str:
    """A content hash of a file, recorded in the trained model's settings."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]
