"""Opening upstream files: gzip or plain, UTF-8, with errors that name the line.

Every reader goes through here so that a missing file, a corrupt gzip stream, a
non-UTF-8 byte or an empty file gives the same kind of :class:`InputError` (file,
line, problem) whichever format is being read.

A truncated file must not read as a smaller vocabulary. A gzip stream that ends early
or fails its CRC is an error here; a plain text file cut mid-line is caught by its
last line lacking a line ending (every upstream line format ends each line with one),
which the vocabulary readers ask for with ``require_line_end``.
"""
from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import IO, Iterator, Optional, Tuple, Union

from tqdm import tqdm

from spacy_sapbert.errors import InputError

PathLike = Union[str, Path]
GZIP_MAGIC = b"\x1f\x8b"


def existing_file(path: PathLike) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path)
    return path


def is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def open_binary(path: PathLike) -> IO[bytes]:
    """A binary handle on the file's content, decompressed when it is gzip (by magic bytes, not name)."""
    path = existing_file(path)
    return gzip.open(path, "rb") if is_gzip(path) else path.open("rb")


def iter_lines(path: PathLike, progress: bool = False, desc: Optional[str] = None,
               require_line_end: bool = False) -> Iterator[Tuple[int, str]]:
    """Yield ``(line_number, text)`` with the line ending removed.

    Lines are decoded one by one so a bad byte is reported with its line number; a UTF-8
    byte-order mark on the first line is dropped. An empty file (or one with only blank
    lines) is an error: every upstream format we read has at least one record. With
    ``require_line_end``, a last line without a line ending is an error before it is
    yielded: it is what a copy or download cut short leaves, and its record may be torn.
    """
    path = existing_file(path)
    seen_text = False
    line_no = 0
    bar = None
    if progress:
        total = None if is_gzip(path) else path.stat().st_size
        bar = tqdm(total=total, unit="B", unit_scale=True, desc=desc or path.name, leave=False)
    try:
        with open_binary(path) as handle:
            try:
                for line_no, raw in enumerate(handle, 1):
                    if bar is not None:
                        bar.update(len(raw))
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as err:
                        raise InputError(
                            f"not UTF-8 text: byte 0x{raw[err.start]:02x} at column {err.start + 1} "
                            "(convert the file to UTF-8)", path, line_no) from err
                    if line_no == 1 and text.startswith("\ufeff"):
                        text = text[1:]
                    if require_line_end and not raw.endswith(b"\n") and text.strip():
                        raise InputError(
                            "the last line has no line ending: the file looks cut short (an interrupted "
                            "download or copy) and this record may be incomplete; fetch the file again "
                            "(or end the line, if you wrote the file by hand)", path, line_no)
                    text = text.rstrip("\n").rstrip("\r")
                    seen_text = seen_text or bool(text.strip())
                    yield line_no, text
            except (OSError, EOFError, zlib.error) as err:
                raise InputError(f"corrupt or truncated gzip data ({err})", path, line_no + 1) from err
    finally:
        if bar is not None:
            bar.close()
    if not seen_text:
        raise InputError("empty file", path)


def read_bytes(path: PathLike) -> bytes:
    """A whole file's bytes, decompressed when it is gzip data (by magic bytes, whatever its name); a corrupt
    stream is an :class:`InputError`. (``GzipFile.read`` peaks at twice the text; ``gzip.decompress`` at 2.6
    times.)"""
    path = existing_file(path)
    try:
        with open_binary(path) as handle:
            return handle.read()
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"corrupt or truncated gzip data ({err})", path) from err


def read_text(path: PathLike) -> str:
    """A whole (possibly gzipped) UTF-8 text file, a byte-order mark dropped; a corrupt stream, a
    non-UTF-8 byte (with its line) or an empty file is an :class:`InputError`."""
    return decode_text(read_bytes(path), path)


def decode_text(raw: bytes, path: PathLike) -> str:
    """A file's bytes as text, as :func:`read_text` reads it; ``path`` names the file in the errors."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte 0x{raw[err.start]:02x})", path,
                         raw[: err.start].count(b"\n") + 1) from err
    del raw
    if not text or text.isspace():  # not text.strip(): a copy of the whole text, for a test
        raise InputError("empty file", path)
    return text


def load_json(path: PathLike) -> object:
    """Parse a (possibly gzipped) JSON file; syntax and encoding errors name the line."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"invalid JSON: {err.msg} (column {err.colno})", path, err.lineno) from err
