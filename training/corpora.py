"""PubTator corpora (NCBI disease, BC5CDR) → documents and gold mentions.

The blocks (title, abstract, annotation lines) are read by :mod:`spacy_sapbert.formats.pubtator`,
the parser ``sapbert annotate`` uses too. This module gives the annotation lines their
meaning: ``PMID start end text type ids [parts]`` is a mention with offsets into
``title + " " + abstract``; BC5CDR's ``PMID CID chemical disease`` relation lines are
skipped. Mention IDs are split on ``|`` and ``+`` (composite mentions) and ``,`` (BioRED's
mentions of several concepts), ``-1`` (and BioRED's ``-``) means "no ID", and each ID is parsed
by :func:`spacy_sapbert.kb.ids.parse_id`, the grammar
the KB builders use, so a gold ID is spelled as the KBs spell it (``MESH:D012174`` and
``MSH:D012174`` → ``D012174``, ``CUI:C0011849`` → ``UMLS:C0011849``, ``ORPHA:558`` →
``Orphanet:558``) and an unknown or malformed ID stops the run at its line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterable, Iterator, List, Optional, Set, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.formats.pubtator import Block, read_blocks
from spacy_sapbert.kb.ids import parse_id
from spacy_sapbert.util.textfile import iter_lines

PathLike = Union[str, Path]
NO_ID = "-1"
NO_IDS = frozenset({NO_ID, "-"})
"""What an ID column says for a mention without one: BC5CDR's ``-1``, BioRED's ``-``."""
ID_FIELD = "ids"
"""Second column of BC5CDR's relation lines (chemical-induced disease)."""
MENTION_COLUMNS = 6
_COMPOSITE_SPLIT = re.compile(r"[|+,]")


@dataclass(frozen=True)
class Mention:
    """One gold mention: character offsets into :attr:`Document.text`, its text, type and IDs."""

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
    """One PubTator document; an absent abstract is the empty string (offsets index ``title + " " + abstract``)."""

    pmid: str
    title: str
    abstract: str
    mentions: List[Mention] = field(default_factory=list)

    @property
    def text(self) -> str:
        return f"{self.title} {self.abstract}"


def split_ids(raw: str, path: Optional[PathLike] = None, line: Optional[int] = None) -> Tuple[str, ...]:
    """``D1|D2`` / ``D1+D2`` / ``D1,D2`` → (D1, D2), each in the KBs' spelling; ``-1`` or ``-`` (alone or
    as a part) → no ID."""
    parts = [p.strip() for p in _COMPOSITE_SPLIT.split(raw) if p.strip()]
    if not parts or any(p in NO_IDS for p in parts):
        return ()
    return tuple(parse_id(p, path, line, ID_FIELD) for p in parts)


def read_pubtator(path: PathLike, check_text: bool = True, parse_ids: bool = True,
                  id_types: Optional[Collection[str]] = None) -> Iterator[Document]:
    """Yield the documents of a PubTator file; bad lines raise :class:`InputError` with file and line.

    ``check_text``: a mention's text must be the text at its offsets (the corpora's own check
    that offsets and text agree). ``parse_ids`` False leaves every mention without IDs (for NER
    data from a corpus whose IDs are of vocabularies the project does not parse: BioRED's genes);
    ``id_types`` parses the IDs of mentions of those types only (BioRED's diseases, not its genes).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("PubTator file not found", path)
    # iter_lines: gzip or plain, decoded line by line so a bad byte names its line, empty file = error
    for block in read_blocks(iter_lines(path), path):
        yield _document(block, path, check_text, parse_ids, id_types)


def _document(block: Block, path: Path, check_text: bool, parse_ids: bool = True,
              id_types: Optional[Collection[str]] = None) -> Document:
    doc = Document(block.pmid, block.title, block.abstract or "")
    for line_no, line in block.annotations:
        cols = line.split("\t")
        if _is_relation(cols):
            continue
        parse = parse_ids and (id_types is None or len(cols) < MENTION_COLUMNS or cols[4] in id_types)
        doc.mentions.append(_mention(doc.text, cols, path, line_no, check_text, parse))
    return doc


def _is_relation(cols: List[str]) -> bool:
    """A relation line, not a mention: BC5CDR's ``PMID CID chem disease``, BioRED's ``PMID Association ID1 ID2 Novel``
    (a word, not an offset, in column 2)."""
    return len(cols) in (4, 5) and cols[1].isidentifier()


def _mention(text: str, cols: List[str], path: Path, line_no: int, check_text: bool, parse_ids: bool = True
             ) -> Mention:
    """One mention line's columns (``PMID start end text type ids [parts]``) as a :class:`Mention`."""
    if len(cols) < MENTION_COLUMNS:
        raise InputError(f"expected at least {MENTION_COLUMNS} tab-separated columns, found {len(cols)}",
                         path, line_no)
    try:
        start, end = int(cols[1]), int(cols[2])
    except ValueError as err:
        raise InputError(f"offsets must be integers, got {cols[1]!r} {cols[2]!r}", path, line_no, "start/end") from err
    if not 0 <= start < end:
        raise InputError(f"bad span {start}-{end}", path, line_no, "start/end")
    written = cols[3]
    at_offsets = text[start:end]
    if at_offsets != written and at_offsets == written.strip():
        written = written.strip()  # stray spaces after the mention column (seen in NCBI train)
    ids = split_ids(cols[5], path, line_no) if parse_ids else ()
    if check_text and at_offsets != written:
        raise InputError(f"mention {written!r} does not match the text at {start}-{end}: {at_offsets!r}",
                         path, line_no, "text")
    return Mention(start, end, written, cols[4], ids, line_no)


def iter_mentions(documents: Iterable[Document], with_id_only: bool = False) -> Iterator[Tuple[Document, Mention]]:
    """(document, mention) pairs in file order; ``with_id_only`` leaves out mentions without an ID."""
    for doc in documents:
        for mention in doc.mentions:
            if with_id_only and not mention.has_id:
                continue
            yield doc, mention


def check_corpora_and_output(corpora: Iterable[Path], output: Path, overwrite: bool,
                             other_inputs: Iterable[Optional[Path]] = ()) -> None:
    """Before a command reads training files into a new file: every corpus is there, and ``output``
    is none of the files read (the corpora and ``other_inputs``, a KB say) and is new unless ``overwrite``
    (nothing a user has is replaced unasked: :func:`~spacy_sapbert.util.atomic.check_new_file`)."""
    from spacy_sapbert.util.atomic import check_new_file

    corpora = list(corpora)
    check_new_file(output, overwrite, corpora + [p for p in other_inputs if p is not None])
    for corpus in corpora:
        if not Path(corpus).is_file():
            raise InputError("corpus file not found", corpus)


def pmids(paths: Iterable[Optional[PathLike]]) -> Set[str]:
    """PMIDs of the PubTator files given (None entries skipped): the documents a training set must leave out."""
    return {document.pmid for path in paths if path is not None for document in read_pubtator(path, parse_ids=False)}


def pubtator_text(documents: Iterable[Document]) -> str:
    """The documents as a PubTator file that :func:`read_pubtator` reads back: title and abstract lines,
    then one line per mention (IDs joined by ``|``, ``-1`` for none), a blank line after each."""
    out = []
    for doc in documents:
        out.append(f"{doc.pmid}|t|{doc.title}\n{doc.pmid}|a|{doc.abstract}\n")
        out.extend(f"{doc.pmid}\t{m.start}\t{m.end}\t{m.text}\t{m.type}\t{'|'.join(m.ids) or NO_ID}\n"
                   for m in doc.mentions)
        out.append("\n")
    return "".join(out)
