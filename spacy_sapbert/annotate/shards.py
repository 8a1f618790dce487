"""An input cut into shards: the units of work of the distributed engine (:mod:`.ray_engine`).

A shard is keyed by where its records are, not by their numbers: an input file and a
byte range of it that starts at a record (a line; for PubTator, a block after a blank
line), or a range of a folder's ``.txt`` documents. Cutting is deterministic (the same
input and shard size give the same shards), so a re-run finds the shards a killed run
finished by their keys. A gzip file cannot be entered in the middle, nor a PubMed XML
file, and each is one shard; PubMed's baseline is some 1,200 ``.xml.gz`` files, plenty
of shards for a cluster.

Each shard also carries the line number and ordinal its first record has in its file,
found by one read of the file with the annotation readers while cutting (a minute or two
per GB, against days of annotation), so records, line numbers in messages and ordinals in
the output are those the local engine gives for the same file, and shards start where
the local engine's batches start (see :func:`_cut_file`).

Inputs: a file, a folder, or a glob (``'baseline/*.jsonl.gz'``). A folder that holds
``.txt`` files is read as the local engine reads it, one document per ``.txt`` file
(other files ignored); a folder without any is a folder of input files, each read in
its own format (``auto`` detects it per file).
"""
from __future__ import annotations

import glob
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from tqdm import tqdm

from spacy_sapbert.annotate.readers import FORMATS, Record, Span, folder_documents, read_records
from spacy_sapbert.annotate.sniff import check_text_file, detect_format
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.textfile import is_gzip

PathLike = Union[str, Path]
DEFAULT_SHARD_BYTES = 4 << 20
"""≈2,500 PubMed abstracts as JSONL: about two minutes of one CPU actor, a minute of a GPU's."""
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Shard:
    """One unit of work: the records of ``span`` of ``path`` (read as ``fmt``), written to ``part``."""

    part: str
    path: str
    fmt: str
    span: Span

    @property
    def key(self) -> str:
        """What the shard is, independent of its number: input file and byte (or file) range."""
        end = "end" if self.span.end is None else self.span.end
        return f"{self.path}:{self.span.start}-{end}"

    def as_dict(self) -> Dict[str, Any]:
        return {"part": self.part, "path": self.path, "format": self.fmt, **asdict(self.span)}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Shard":
        span = Span(int(data["start"]), None if data["end"] is None else int(data["end"]), int(data["first_line"]),
                    int(data["first_ordinal"]))
        return cls(str(data["part"]), str(data["path"]), str(data["format"]), span)


def input_files(source: PathLike) -> Tuple[List[Path], bool]:
    """The files ``source`` names, and whether they are one folder's ``.txt`` documents."""
    text = str(source)
    path = Path(source)
    if path.is_dir():
        documents = folder_documents(path)
        if documents:
            return [path], True
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files:
            raise InputError("the input folder holds no files", path)
        return files, False
    if path.is_file():
        return [path], False
    if _GLOB_CHARS & set(text):
        files = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
        if not files:
            raise InputError("no file matches this pattern", text)
        return files, False
    raise InputError("input not found", path)


def plan(source: PathLike, fmt: str = "auto", shard_bytes: int = DEFAULT_SHARD_BYTES, batch_size: int = 32,
         text_field: str = "text", id_field: Optional[str] = "id", show_progress: bool = False) -> List[Shard]:
    """The shards of ``source``, in input order (see the module's docstring); ``batch_size`` and the
    fields are the run's, so that shards start where the local engine's batches do."""
    if fmt not in FORMATS:
        raise InputError(f"unknown input format {fmt!r}: use one of {', '.join(FORMATS)}", field="format")
    if not isinstance(shard_bytes, int) or shard_bytes < 1:
        raise InputError(f"expected a positive number of bytes, got {shard_bytes!r}", field="shard_bytes")
    files, documents = input_files(source)
    if documents:
        if fmt not in ("auto", "text"):
            raise InputError(f"a folder of .txt files is read as one document per file, not as {fmt}", files[0],
                             field="format")
        return _numbered([(files[0], "text", span) for span in _cut_folder(files[0], shard_bytes, batch_size)])
    cuts = []
    for file in tqdm(files, desc="planning shards", unit="file", disable=not show_progress):
        check_text_file(file)
        file_fmt = detect_format(file) if fmt == "auto" else fmt
        cuts.extend((file, file_fmt, span)
                    for span in _cut_file(file, file_fmt, shard_bytes, batch_size, text_field, id_field))
    return _numbered(cuts)


def _numbered(cuts: List[Tuple[Path, str, Span]]) -> List[Shard]:
    return [Shard(f"part-{i:05d}.jsonl", str(path.resolve()), fmt, span) for i, (path, fmt, span) in enumerate(cuts)]


def _cut_folder(folder: Path, shard_bytes: int, batch_size: int) -> Iterator[Span]:
    """Ranges of the folder's documents, cut at multiples of ``batch_size`` (an unreadable file,
    which would shift the local engine's batches, is rare enough to cost only last bits)."""
    documents = folder_documents(folder)
    start, size = 0, 0
    for index, file in enumerate(documents):
        if size >= shard_bytes and index % batch_size == 0:
            yield Span(start, index, 1, start)
            start, size = index, 0
        size += file.stat().st_size
    yield Span(start, None, 1, start)


def _cut_file(path: Path, fmt: str, shard_bytes: int, batch_size: int, text_field: str,
              id_field: Optional[str]) -> List[Span]:
    """Byte ranges of about ``shard_bytes``, each starting at a record that starts a batch.

    The file is read once with the annotation readers, so a cut is where they see a record and
    its line number and ordinal are theirs. Cuts fall every ``batch_size`` readable records, as
    the local engine's batches do: a shard's batches are then the local engine's batches, and
    so are its bf16 sums, whose last bits depend on which documents share a batch.
    """
    if is_gzip(path) or fmt == "pubmed" or path.stat().st_size <= shard_bytes:
        return [Span()]  # a gzip stream cannot be entered in the middle, nor an XML document
    spans: List[Span] = []
    start, first_line, first_ordinal, readable = 0, 1, 0, 0
    for item in read_records(path, fmt, text_field, id_field):
        if not isinstance(item, Record):
            continue
        if readable % batch_size == 0 and item.offset - start >= shard_bytes:
            spans.append(Span(start, item.offset, first_line, first_ordinal))
            start, first_line, first_ordinal = item.offset, item.line, item.ordinal
        readable += 1
    spans.append(Span(start, None, first_line, first_ordinal))
    return spans


__all__ = ["DEFAULT_SHARD_BYTES", "Shard", "input_files", "plan"]
