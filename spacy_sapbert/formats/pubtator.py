"""PubTator documents: the block grammar, read the same way by training and by annotation.

A document is a block of non-blank lines, ended by a blank line or the end of the file:

- ``PMID|t|title`` first;
- at most one ``PMID|a|abstract`` line (a document without one is its title alone);
- tab-separated annotation lines whose first column is the same PMID
  (``PMID start end text type ids`` mentions, BC5CDR's ``PMID CID chemical disease`` relations).

Offsets in annotation lines index ``title + " " + abstract`` (:attr:`Block.text`).

This module knows the blocks only. What an annotation line means is its reader's business:
:mod:`spacy_sapbert.training.corpora` turns them into gold mentions, and
:mod:`spacy_sapbert.annotate.readers` carries them along as they are. Both read blocks
here so that a file one of them accepts is never refused by the other; a broken block
is an :class:`~spacy_sapbert.errors.InputError` naming its file and line, which the
training reader lets stop the run and the annotation reader turns into one malformed
record.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError

PathLike = Union[str, Path]
Line = Tuple[int, str]
"""(line number, text without its line ending)."""
TEXT_LINE = re.compile(r"^([^|\t]+)\|([ta])\|(.*)$")
"""A title (``t``) or abstract (``a``) line: PMID, kind, text."""
MAX_QUOTED = 60
"""Characters of an unexpected line quoted in its error."""


@dataclass
class Block:
    """One document's lines, split into title, abstract and annotation lines."""

    pmid: str
    title: str
    abstract: Optional[str]
    """None when the block has no abstract line."""
    line: int
    """Line number of the title line."""
    annotations: List[Line] = field(default_factory=list)
    """The annotation lines as written, with their line numbers."""

    @property
    def text(self) -> str:
        """What the offsets index: ``title + " " + abstract``, or the title without an abstract."""
        return self.title if self.abstract is None else f"{self.title} {self.abstract}"


def looks_like_pubtator(line: str) -> bool:
    """Whether ``line`` (a file's first non-blank line) is a PubTator title or abstract line."""
    return bool(TEXT_LINE.match(line.rstrip("\r\n")))


def split_blocks(lines: Iterable[Line]) -> Iterator[List[Line]]:
    """Runs of non-blank lines (blank: empty or only whitespace), in file order."""
    block: List[Line] = []
    for number, text in lines:
        if text.strip():
            block.append((number, text))
        elif block:
            yield block
            block = []
    if block:
        yield block


def parse_block(lines: Sequence[Line], path: Optional[PathLike] = None) -> Block:
    """The document of one block; a line that breaks the grammar is an :class:`InputError` at that line."""
    first, head = lines[0]
    title_match = TEXT_LINE.match(head)
    if not title_match or title_match.group(2) != "t":
        raise InputError("a PubTator document starts with a 'PMID|t|title' line", path, first)
    pmid, _, title = title_match.groups()
    block = Block(pmid, title, None, first)
    for number, text in lines[1:]:
        match = TEXT_LINE.match(text)
        if match and match.group(2) == "a":
            if match.group(1) != pmid:
                raise InputError(f"abstract line of PMID {match.group(1)} inside the document of PMID {pmid} "
                                 "(missing blank line?)", path, number)
            if block.abstract is not None:
                raise InputError(f"second abstract line for PMID {pmid}", path, number)
            block.abstract = match.group(3)
        elif "\t" in text and text.split("\t", 1)[0] == pmid:
            block.annotations.append((number, text))
        else:
            raise InputError(f"expected '{pmid}|a|…' or a tab-separated annotation line of PMID {pmid}, "
                             f"found {text[:MAX_QUOTED]!r}", path, number)
    return block


def read_blocks(lines: Iterable[Line], path: Optional[PathLike] = None) -> Iterator[Block]:
    """Every block of ``lines`` parsed; the first broken one raises."""
    for lines_of_block in split_blocks(lines):
        yield parse_block(lines_of_block, path)


__all__ = ["Block", "TEXT_LINE", "looks_like_pubtator", "parse_block", "read_blocks", "split_blocks"]
