"""Input documents for batch annotation, streamed one record at a time.

Formats (``fmt``):

``text``      a file with one document per line (blank lines are not documents), or a
              folder whose ``*.txt`` files are one document each (read in name order);
``jsonl``     one JSON object per line; the text and the ID are taken from configurable
              fields, every other field is carried to the output unchanged;
``pubtator``  PubTator blocks (``PMID|t|title``, ``PMID|a|abstract``, annotation lines,
              a blank line), parsed by :mod:`spacy_sapbert.formats.pubtator` as the training
              corpora are; the text is ``title + " " + abstract`` so that PubTator
              offsets stay valid, and the block's annotation lines are carried along.
``pubmed``    PubMed/MEDLINE XML (the baseline's ``pubmed25n0001.xml.gz``), one record per
              ``PubmedArticle`` (:mod:`.pubmed_xml`), its text ``title + " " + abstract``;
``auto``      a folder is ``text``; ``.jsonl``/``.ndjson`` is ``jsonl``; ``.xml`` is ``pubmed``;
              a file whose first non-blank line looks like ``PMID|t|`` is ``pubtator``;
              anything else ``text``.

Every record has an ``ordinal`` (its position among the input's records, malformed ones
included), which the resumable output uses to skip finished documents. A record that
cannot be read is yielded as :class:`Malformed` with the file and line, never dropped.

A :class:`Span` reads part of an input (a shard of :mod:`.shards`): a byte range of a
file that starts at a record, or a range of a folder's files, with the line number and
ordinal its first record has in the whole input, so that a shard's records are those of
the whole read, numbered the same.
"""
from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from spacy_sapbert.annotate.pubmed_xml import read_articles
from spacy_sapbert.annotate.sniff import SNIFF_BYTES, check_text_file, detect_format, text_problem
from spacy_sapbert.errors import InputError
from spacy_sapbert.formats.pubtator import parse_block, split_blocks
from spacy_sapbert.util.textfile import open_binary

PathLike = Union[str, Path]
FORMATS = ("auto", "text", "jsonl", "pubtator", "pubmed")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Record:
    """A readable input document."""

    ordinal: int
    id: str
    text: str
    where: str
    meta: Dict[str, Any] = field(default_factory=dict)
    line: int = 0
    """Line number of the record's first line (0 for a folder's file)."""
    offset: int = 0
    """Byte offset of the record's first line in its (decompressed) file: where a shard may start."""


@dataclass
class Malformed:
    """An input record that could not be read, with where and why."""

    ordinal: int
    where: str
    reason: str


Item = Union[Record, Malformed]


@dataclass(frozen=True)
class Span:
    """Part of an input: bytes ``[start, end)`` of a file (``end`` None: to its end), or files
    ``[start, end)`` of a folder in name order; ``first_line``/``first_ordinal`` number its first record."""

    start: int = 0
    end: Optional[int] = None
    first_line: int = 1
    first_ordinal: int = 0


WHOLE = Span()


def read_records(path: PathLike, fmt: str = "auto", text_field: str = "text",
                 id_field: Optional[str] = "id", span: Span = WHOLE) -> Iterator[Item]:
    """Stream the records of ``path`` (a file, or a folder of ``.txt`` files), or of its ``span``."""
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
        return _read_folder(path, span)
    if fmt == "text":
        return _read_lines(path, span)
    if fmt == "jsonl":
        return _read_jsonl(path, text_field, id_field, span)
    if fmt == "pubmed":
        return read_articles(path, _lines(path, span), _pubmed_record, Malformed)
    return _read_pubtator(path, span)


def _pubmed_record(ordinal: int, pmid: str, text: str, where: str, title: str, line: int) -> Record:
    return Record(ordinal, pmid, text, where, meta={"title": title}, line=line)


def folder_documents(path: Path) -> List[Path]:
    """The documents of a folder read as ``text``: its ``*.txt`` files, in name order."""
    return sorted(p for p in path.rglob("*.txt") if p.is_file())


def _span_lines(handle: Any, span: Span) -> Iterator[Tuple[int, int, bytes]]:
    """(line number, byte offset, bytes) of each line of ``span``."""
    if span.start:
        handle.seek(span.start)
    position = span.start
    for number, raw in enumerate(handle, span.first_line):
        if span.end is not None and position >= span.end:
            return
        yield number, position, raw
        position += len(raw)


def _lines(path: Path, span: Span = WHOLE) -> Iterator[tuple]:
    """(line number, text, decode problem, byte offset) for each line, surviving undecodable bytes."""
    number = 0
    try:
        with open_binary(path) as handle:
            for number, position, raw in _span_lines(handle, span):
                try:
                    yield number, raw.decode("utf-8").rstrip("\r\n"), None, position
                except UnicodeDecodeError as err:
                    yield (number, raw.decode("utf-8", errors="replace").rstrip("\r\n"), f"not UTF-8 ({err.reason})",
                           position)
    except (OSError, EOFError, zlib.error) as err:  # a truncated gzip stream ends in EOFError
        raise InputError(f"cannot read input after line {number} ({getattr(err, 'strerror', None) or err})",
                         path) from err


def _read_lines(path: Path, span: Span) -> Iterator[Item]:
    ordinal = span.first_ordinal
    for number, line, problem, position in _lines(path, span):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if problem:
            yield Malformed(ordinal, where, problem)
        else:
            yield Record(ordinal, str(number), line, where, line=number, offset=position)
        ordinal += 1


def _read_folder(path: Path, span: Span) -> Iterator[Item]:
    files = folder_documents(path)[span.start:span.end]
    for ordinal, file in enumerate(files, span.start):
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


def _read_jsonl(path: Path, text_field: str, id_field: Optional[str], span: Span) -> Iterator[Item]:
    ordinal = span.first_ordinal
    for number, line, problem, position in _lines(path, span):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        item = _jsonl_record(ordinal, number, line, where, problem, text_field, id_field)
        if isinstance(item, Record):
            item.line, item.offset = number, position
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


def _read_pubtator(path: Path, span: Span) -> Iterator[Item]:
    """One record per block (:mod:`spacy_sapbert.formats.pubtator`); a broken block is one :class:`Malformed`."""
    problems: Dict[int, str] = {}

    starts: Dict[int, int] = {}  # first line of a block -> its byte offset (kept until the block is read)

    def numbered() -> Iterator[Tuple[int, str]]:
        after_blank = True
        for number, line, problem, position in _lines(path, span):
            if problem:
                problems[number] = problem
            blank = not line.strip()
            if not blank and after_blank:
                starts[number] = position
            after_blank = blank
            yield number, line
    for ordinal, block in enumerate(split_blocks(numbered()), span.first_ordinal):
        item = _pubtator_record(ordinal, path, block, problems)
        offset = starts.pop(block[0][0], 0)
        if isinstance(item, Record):
            item.line, item.offset = block[0][0], offset
        yield item


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


__all__ = ["FORMATS", "Malformed", "Record", "Span", "folder_documents", "read_records"]
