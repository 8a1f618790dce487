"""What an input file is, from its first bytes: refused when it is not text (binary data,
mostly undecodable), and which reader ``--format auto`` means for it."""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Optional, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.formats.pubtator import looks_like_pubtator
from spacy_sapbert.util.textfile import open_binary

PathLike = Union[str, Path]

SNIFF_BYTES = 8192
MAX_UNDECODABLE = 0.05
"""Share of a file's first bytes that may fail to decode before it is refused as not text."""


def text_problem(head: bytes) -> Optional[str]:
    """Why ``head`` (a file's first bytes) is not text, or None: NUL bytes, or mostly undecodable."""
    nul = head.find(b"\0")
    if nul >= 0:
        return f"not a text file (a NUL byte at offset {nul}: binary data?)"
    decoded = head.decode("utf-8", errors="replace")
    bad = decoded.count("\ufffd") - head.decode("utf-8", errors="ignore").count("\ufffd")
    if decoded and bad / len(decoded) > MAX_UNDECODABLE:
        return f"not a text file ({bad} of the first {len(decoded)} characters are not UTF-8)"
    return None


def check_text_file(path: Path) -> None:
    """Refuse a binary file before any record is read from it."""
    try:
        with open_binary(path) as handle:
            head = handle.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"cannot read input ({getattr(err, 'strerror', None) or err})", path) from err
    head = head[:SNIFF_BYTES - 4] if len(head) == SNIFF_BYTES else head  # a character cut at the end is fine
    problem = text_problem(head)
    if problem:
        raise InputError(f"{problem}; sapbert annotate reads UTF-8 text, JSONL, PubTator or PubMed XML (gzip too)",
                         path)


def detect_format(path: PathLike) -> str:
    """The format ``auto`` stands for, for ``path`` (see the module's docstring)."""
    path = Path(path)
    if path.is_dir():
        return "text"
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if suffixes and suffixes[-1] in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffixes and suffixes[-1] == ".xml":
        return "pubmed"
    try:
        with open_binary(path) as handle:
            for raw in handle:
                line = raw.decode("utf-8", errors="replace")
                if line.strip():
                    return "pubtator" if looks_like_pubtator(line) else "text"
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"cannot read input ({err.strerror or err})", path) from err
    return "text"


__all__ = ["MAX_UNDECODABLE", "SNIFF_BYTES", "check_text_file", "detect_format", "text_problem"]
