"""Input documents for batch annotation, streamed one record at a time.

Formats (``fmt``):

``text``      a file with one document per line (blank lines are not documents), or a
              folder whose ``*.txt`` files are one document each (read in name order);
``jsonl``     one JSON object per line; the text and the ID are taken from configurable
              fields, every other field is carried to the output unchanged;
``pubtator``  PubTator blocks (``PMID|t|title``, ``PMID|a|abstract``, annotation lines,
              a blank line), parsed by :mod:`spacy_sapbert.pubtator` as the training
              corpora are; the text is ``title + " " + abstract`` so that PubTator
              offsets stay valid, and the block's annotation lines are carried along.
``auto``      a folder is ``text``; ``.jsonl``/``.ndjson`` is ``jsonl``; a file whose first
              non-blank line looks like ``PMID|t|`` is ``pubtator``; anything else ``text``.

Every record has an ``ordinal`` (its position among the input's records, malformed ones
included), which the resumable output uses to skip finished documents. A record that
cannot be read is yielded as :class:`Malformed` with the file and line, never dropped.
"""
from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ..errors import InputError
from ..pubtator import looks_like_pubtator, parse_block, split_blocks

PathLike = Union[str, Path]
FORMATS = ("auto", "text", "jsonl", "pubtator")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Record:
    """A readable input document."""

    ordinal: int
    id: str
    text: str
    where: str
    meta: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Malformed:
    """An input record that could not be read, with where and why."""

    ordinal: int
    where: str
    reason: str


Item = Union[Record, Malformed]


SNIFF_BYTES = 8192
MAX_UNDECODABLE = 0.05
"""Share of a file's first bytes that may fail to decode before it is refused as not text."""
_GZIP_MAGIC = b"\x1f\x8b"


def _open_bytes(path: Path) -> Any:
    """The file's bytes, decompressed when it is gzip (by its magic number, whatever its name)."""
    with path.open("rb") as handle:
        magic = handle.read(2)
    return gzip.open(path, "rb") if magic == _GZIP_MAGIC else path.open("rb")


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
        with _open_bytes(path) as handle:
            head = handle.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"cannot read input ({getattr(err, 'strerror', None) or err})", path) from err
    head = head[:SNIFF_BYTES - 4] if len(head) == SNIFF_BYTES else head  # a character cut at the end is fine
    problem = text_problem(head)
    if problem:
        raise InputError(f"{problem}; sapbert annotate reads UTF-8 text, JSONL or PubTator (gzip too)", path)


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
    try:
        with _open_bytes(path) as handle:
            for raw in handle:
                line = raw.decode("utf-8", errors="replace")
                if line.strip():
                    return "pubtator" if looks_like_pubtator(line) else "text"
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"cannot read input ({err.strerror or err})", path) from err
    return "text"


def read_records(path: PathLike, fmt: str = "auto", text_field: str = "text",
                 id_field: Optional[str] = "id") -> Iterator[Item]:
    """Stream the records of ``path`` (a file, or a folder of ``.txt`` files)."""
    path = Path(path)
    if not path.exists():
        raise InputError("input not found", path)
    if fmt not in FORMATS:
        raise InputError(f"unknown input format {fmt!r}: use one of {', '.join(FORMATS)}", field="format")
    if path.is_file():
        check_text_file(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if path.is_dir():
        if fmt != "text":
            raise InputError(f"a folder is read as one document per .txt file, not as {fmt}", path, field="format")
        return _read_folder(path)
    if fmt == "text":
        return _read_lines(path)
    if fmt == "jsonl":
        return _read_jsonl(path, text_field, id_field)
    return _read_pubtator(path)


def _lines(path: Path) -> Iterator[tuple]:
    """(line number, text, decode problem) for each line, surviving undecodable bytes."""
    number = 0
    try:
        with _open_bytes(path) as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    yield number, raw.decode("utf-8").rstrip("\r\n"), None
                except UnicodeDecodeError as err:
                    yield number, raw.decode("utf-8", errors="replace").rstrip("\r\n"), f"not UTF-8 ({err.reason})"
    except (OSError, EOFError, zlib.error) as err:  # a truncated gzip stream ends in EOFError
        raise InputError(f"cannot read input after line {number} ({getattr(err, 'strerror', None) or err})",
                         path) from err


def _read_lines(path: Path) -> Iterator[Item]:
    ordinal = 0
    for number, line, problem in _lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if problem:
            yield Malformed(ordinal, where, problem)
        else:
            yield Record(ordinal, str(number), line, where)
        ordinal += 1


def _read_folder(path: Path) -> Iterator[Item]:
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    for ordinal, file in enumerate(files):
        doc_id = file.relative_to(path).as_posix()
        try:
            data = file.read_bytes()
            problem = text_problem(data[:SNIFF_BYTES])
            if problem:
                yield Malformed(ordinal, str(file), problem)
            else:
                yield Record(ordinal, doc_id, data.decode("utf-8"), str(file))
        except UnicodeDecodeError as err:
            yield Malformed(ordinal, str(file), f"not UTF-8 ({err.reason})")
        except OSError as err:
            yield Malformed(ordinal, str(file), f"cannot read ({err.strerror or err})")


def _read_jsonl(path: Path, text_field: str, id_field: Optional[str]) -> Iterator[Item]:
    ordinal = 0
    for number, line, problem in _lines(path):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        item = _jsonl_record(ordinal, number, line, where, problem, text_field, id_field)
        ordinal += 1
        yield item


def _jsonl_record(ordinal: int, number: int, line: str, where: str, problem: Optional[str], text_field: str,
                  id_field: Optional[str]) -> Item:
    if problem:
        return Malformed(ordinal, where, problem)
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        return Malformed(ordinal, where, f"invalid JSON ({err.msg} at column {err.colno})")
    if not isinstance(obj, dict):
        return Malformed(ordinal, where, f"expected a JSON object, found {type(obj).__name__}")
    if text_field not in obj:
        return Malformed(ordinal, where, f"field {text_field!r} missing")
    text = obj.pop(text_field)
    if not isinstance(text, str):
        return Malformed(ordinal, where, f"field {text_field!r} is {type(text).__name__}, not a string")
    surrogate = _LONE_SURROGATE.search(text)
    if surrogate:
        return Malformed(ordinal, where, f"field {text_field!r} holds an unpaired surrogate "
                                         f"U+{ord(surrogate.group()):04X} at character {surrogate.start()} "
                                         f"(not valid Unicode)")
    doc_id: Any = obj.pop(id_field, None) if id_field else None
    if doc_id is None:
        doc_id = str(number)
    elif not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
        return Malformed(ordinal, where, f"field {id_field!r} is {type(doc_id).__name__}, not a string or integer")
    return Record(ordinal, str(doc_id), text, where, meta=obj)


def _read_pubtator(path: Path) -> Iterator[Item]:
    """One record per block (:mod:`spacy_sapbert.pubtator`); a broken block is one :class:`Malformed`."""
    problems: Dict[int, str] = {}

    def numbered() -> Iterator[Tuple[int, str]]:
        for number, line, problem in _lines(path):
            if problem:
                problems[number] = problem
            yield number, line

    for ordinal, block in enumerate(split_blocks(numbered())):
        yield _pubtator_record(ordinal, path, block, problems)


def _pubtator_record(ordinal: int, path: Path, block: List[Tuple[int, str]], problems: Dict[int, str]) -> Item:
    where = f"{path}:{block[0][0]}"
    undecodable = [f"line {n}: {problems.pop(n)}" for n, _ in block if n in problems]
    if undecodable:
        return Malformed(ordinal, where, "; ".join(undecodable))
    try:
        parsed = parse_block(block, path)
    except InputError as err:
        return Malformed(ordinal, f"{path}:{err.line}", err.problem)
    meta: Dict[str, Any] = {"title": parsed.title}
    if parsed.annotations:
        meta["pubtator_annotations"] = [line for _, line in parsed.annotations]
    return Record(ordinal, parsed.pmid, parsed.text, where, meta=meta)


__all__ = ["FORMATS", "Record", "Malformed", "check_text_file", "detect_format", "read_records", "text_problem"]
