"""PubTator corpora (NCBI disease, BC5CDR) → documents and mentions.

PubTator: ``PMID|t|title``, ``PMID|a|abstract``, then one tab-separated line per
mention ``PMID start end text type ids [parts]`` with offsets into
``title + " " + abstract``; BC5CDR adds relation lines ``PMID CID chem disease``;
a blank line ends a document. Mention IDs are split on ``|`` and ``+`` (composite
mentions), ``-1`` means "no ID", MeSH IDs are written bare (``D012345``) as the
corpora write them (a ``MESH:`` prefix is removed), other vocabularies keep theirs
(``OMIM:612345``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import FrozenSet, Iterable, Iterator, List, Optional, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.sources.textfile import iter_lines

PathLike = Union[str, Path]
NO_ID = "-1"
KNOWN_PREFIXES: FrozenSet[str] = frozenset(
    {"MESH", "OMIM", "UMLS", "DOID", "DO", "HP", "MONDO", "ORDO", "Orphanet", "NCIT", "CHEBI", "CUI"}
)
_BARE_MESH = re.compile(r"^[CD]\d{6,9}$")
_COMPOSITE_SPLIT = re.compile(r"[|+]")


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    text: str
    type: str
    ids: Tuple[str, ...]
    """Gold IDs; several for a composite mention (every part must be linked). Empty: no ID."""
    line: int = 0
    """Line of the mention in its file, for error messages."""

    @property
    def has_id(self) -> bool:
        return bool(self.ids)

    @property
    def is_composite(self) -> bool:
        return len(self.ids) > 1


@dataclass
class Document:
    pmid: str
    title: str
    abstract: str
    mentions: List[Mention] = field(default_factory=list)

    @property
    def text(self) -> str:
        return f"{self.title} {self.abstract}"


def normalize_id(raw: str, path: Optional[PathLike] = None, line: Optional[int] = None,
                 extra_prefixes: Iterable[str] = ()) -> str:
    """One gold ID as the KBs write it: bare MeSH, ``PREFIX:ID`` for the rest."""
    value = raw.strip()
    if _BARE_MESH.match(value):
        return value
    prefix, sep, rest = value.partition(":")
    if sep and rest and (prefix in KNOWN_PREFIXES or prefix in set(extra_prefixes)):
        if prefix == "MESH":
            return rest
        return f"{prefix}:{rest}"
    raise InputError(f"unknown concept ID {raw!r} (expected bare MeSH or PREFIX:ID with a known prefix)",
                     path, line, "ids")


def split_ids(raw: str, path: Optional[PathLike] = None, line: Optional[int] = None,
              extra_prefixes: Iterable[str] = ()) -> Tuple[str, ...]:
    """``D1|D2`` / ``D1+D2`` → (D1, D2); ``-1`` (alone or as a part) → no ID."""
    parts = [p.strip() for p in _COMPOSITE_SPLIT.split(raw) if p.strip()]
    if not parts or any(p == NO_ID for p in parts):
        return ()
    return tuple(normalize_id(p, path, line, extra_prefixes) for p in parts)


def read_pubtator(path: PathLike, check_text: bool = True, extra_prefixes: Iterable[str] = ()) -> Iterator[Document]:
    """Yield the documents of a PubTator file; bad lines raise :class:`InputError` with file and line."""
    path = Path(path)
    if not path.is_file():
        raise InputError("PubTator file not found", path)
    doc: Optional[Document] = None
    # iter_lines: gzip or plain, decoded line by line so a bad byte names its line, empty file = error
    for line_no, line in iter_lines(path):
        if not line.strip():
            if doc is not None:
                yield doc
                doc = None
            continue
        head = line.split("|", 2)
        if len(head) == 3 and head[1] in ("t", "a") and "\t" not in head[0]:
            pmid, kind, text = head
            if kind == "t":
                if doc is not None:
                    yield doc
                doc = Document(pmid, text, "")
            else:
                if doc is None or doc.pmid != pmid:
                    raise InputError(f"abstract line for PMID {pmid} without its title line", path, line_no)
                doc.abstract = text
            continue
        cols = line.split("\t")
        if doc is None:
            raise InputError("annotation line before any title line", path, line_no)
        if cols[0] != doc.pmid:
            raise InputError(f"PMID {cols[0]!r} inside document {doc.pmid}", path, line_no)
        if len(cols) == 4 and cols[1] in ("CID",):
            continue  # a relation line (BC5CDR chemical-induced disease)
        if len(cols) < 6:
            raise InputError(f"expected at least 6 tab-separated columns, found {len(cols)}", path, line_no)
        try:
            start, end = int(cols[1]), int(cols[2])
        except ValueError as err:
            raise InputError(f"offsets must be integers, got {cols[1]!r} {cols[2]!r}", path, line_no, "start/end") from err
        if not 0 <= start < end:
            raise InputError(f"bad span {start}-{end}", path, line_no, "start/end")
        text = cols[3]
        if doc.text[start:end] != text and doc.text[start:end] == text.strip():
            text = text.strip()  # stray spaces after the mention column (seen in NCBI train)
        mention = Mention(start, end, text, cols[4], split_ids(cols[5], path, line_no, extra_prefixes), line_no)
        if check_text and doc.text[start:end] != mention.text:
            raise InputError(
                f"mention {mention.text!r} does not match the text at {start}-{end}: {doc.text[start:end]!r}",
                path, line_no, "text")
        doc.mentions.append(mention)
    if doc is not None:
        yield doc


def iter_mentions(documents: Iterable[Document], with_id_only: bool = False) -> Iterator[Tuple[Document, Mention]]:
    for doc in documents:
        for mention in doc.mentions:
            if with_id_only and not mention.has_id:
                continue
            yield doc, mention
