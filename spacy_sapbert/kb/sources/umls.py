"""UMLS Metathesaurus RRF files, for users who hold a UMLS licence.

``MRCONSO.RRF``: 18 ``|``-separated fields and a trailing ``|``:
CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF|.
``MRSTY.RRF`` (types): CUI|TUI|STN|STY|ATUI|CVF|. ``MRDEF.RRF`` (definitions, optional):
CUI|AUI|ATUI|SATUI|SAB|DEF|SUPPRESS|CVF|.

Kept: strings in the wanted languages (English by default) whose SUPPRESS flag is N.
Suppressed (O obsolete, E editor, Y vocabulary-suppressed) and other-language strings
are counted per reason. The canonical name is the UMLS preferred string (TS=P, STT=PF,
ISPREF=Y), the rule scispaCy's UMLS KB uses; the types are TUIs, as in scispaCy.
Concept IDs are ``UMLS:C0011849`` (a bare CUI would read as a MeSH supplementary ID).

A release lists every file in ``MRFILES.RRF`` (FIL|DES|FMT|CLS|RWS|BTS|: columns, rows,
bytes). When it lies beside the file being read, the columns must be the ones this
reader expects and the size and row count must match, so a copy cut at a line boundary
(every row still well-formed) is an error rather than a smaller UMLS.
"""
from __future__ import annotations

import logging
import re
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import is_gzip, iter_lines

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
MRCONSO_FIELDS = ("CUI", "LAT", "TS", "LUI", "STT", "SUI", "ISPREF", "AUI", "SAUI", "SCUI", "SDUI", "SAB", "TTY",
                  "CODE", "STR", "SRL", "SUPPRESS", "CVF")
MRSTY_FIELDS = ("CUI", "TUI", "STN", "STY", "ATUI", "CVF")
MRDEF_FIELDS = ("CUI", "AUI", "ATUI", "SATUI", "SAB", "DEF", "SUPPRESS", "CVF")
#: definition sources preferred when a concept has several (scispaCy's list)
PREFERRED_DEFINITION_SOURCES = frozenset({"NCI_BRIDG", "NCI_NCI-GLOSS", "NCI", "GO", "MSH", "NCI_FDA"})
MRFILES = "MRFILES.RRF"
_CUI = re.compile(r"^C\d{7}$")
_TUI = re.compile(r"^T\d{3}$")


class _Listed(NamedTuple):
    """What MRFILES.RRF says about one file."""

    columns: Tuple[str, ...]
    rows: int
    size: int
    line: int


def _listed(path: Path) -> Optional[_Listed]:
    """The MRFILES.RRF entry of ``path`` when that listing lies beside it, else None."""
    listing = path.parent / MRFILES
    if path.name == MRFILES or not listing.is_file():
        return None
    for line_no, text in iter_lines(listing, require_line_end=True):
        cols = text.split("|")
        if cols[0] != path.name:
            continue
        if len(cols) != 7 or cols[-1] != "":
            raise InputError("expected 6 '|'-terminated fields (FIL|DES|FMT|CLS|RWS|BTS|)", listing, line_no)
        try:
            rows, size = int(cols[4]), int(cols[5])
        except ValueError as err:
            raise InputError(f"RWS and BTS must be whole numbers, got {cols[4]!r} and {cols[5]!r}", listing,
                             line_no) from err
        return _Listed(tuple(cols[2].split(",")), rows, size, line_no)
    return None


def _rows(path: PathLike, fields: Sequence[str], progress: bool = False) -> Iterator[tuple]:
    """(line number, field → value) for each row of an RRF file, checking the field count
    and, when MRFILES.RRF lists the file, its columns, size and row count."""
    path = Path(path)
    name = path.name
    listed = _listed(path)
    if listed is not None:
        if listed.columns != tuple(fields):
            raise InputError(f"{name} has the columns {','.join(listed.columns)}, but this reader expects "
                             f"{','.join(fields)} (a release in another layout?)", path.parent / MRFILES,
                             listed.line, "FMT")
        size = path.stat().st_size
        if not is_gzip(path) and size != listed.size:
            raise InputError(f"{size:,} bytes, but {MRFILES} (line {listed.line}) lists {listed.size:,}: the "
                             "file is incomplete (cut short?) or from another release; copy it again", path)
    rows = last = 0
    for line_no, text in iter_lines(path, progress=progress, desc=name, require_line_end=True):
        last = line_no
        if not text:
            continue
        rows += 1
        cols = text.split("|")
        if len(cols) != len(fields) + 1 or cols[-1] != "":
            raise InputError(f"expected {len(fields)} '|'-terminated fields ({'|'.join(fields)}|), "
                             f"found {len(cols) - (cols[-1] == '')}", path, line_no)
        row = dict(zip(fields, cols))
        if not _CUI.match(row["CUI"]):
            raise InputError(f"not a UMLS CUI: {row['CUI']!r}", path, line_no, "CUI")
        yield line_no, row
    if listed is not None and rows != listed.rows:
        raise InputError(f"the file ends after {rows:,} rows, but {MRFILES} (line {listed.line}) lists "
                         f"{listed.rows:,}: it is incomplete (cut short?) or from another release; copy it again",
                         path, last)


def read_umls_types(path: PathLike) -> Dict[str, List[str]]:
    """CUI → its semantic type IDs (TUIs), from ``MRSTY.RRF``."""
    types: Dict[str, List[str]] = {}
    for line_no, row in _rows(path, MRSTY_FIELDS):
        if not _TUI.match(row["TUI"]):
            raise InputError(f"not a semantic type ID: {row['TUI']!r}", path, line_no, "TUI")
        values = types.setdefault(row["CUI"], [])
        if row["TUI"] not in values:
            values.append(row["TUI"])
    return types


def read_umls_definitions(path: PathLike) -> Dict[str, str]:
    """CUI → one definition from ``MRDEF.RRF``: non-suppressed, a preferred source first."""
    definitions: Dict[str, str] = {}
    preferred: Dict[str, bool] = {}
    for _, row in _rows(path, MRDEF_FIELDS):
        if row["SUPPRESS"] != "N" or not row["DEF"].strip():
            continue
        is_preferred = row["SAB"] in PREFERRED_DEFINITION_SOURCES
        if row["CUI"] not in definitions or (is_preferred and not preferred[row["CUI"]]):
            definitions[row["CUI"]] = row["DEF"].strip()
            preferred[row["CUI"]] = is_preferred
    return definitions


def read_umls(mrconso: PathLike, mrsty: Optional[PathLike] = None, mrdef: Optional[PathLike] = None,
              languages: Sequence[str] = ("ENG",), sources: Optional[Sequence[str]] = None,
              stats: Optional[ReadStats] = None, progress: bool = False) -> Iterator[Concept]:
    """Concepts of a UMLS release (or any subset in the same layout), one per CUI.

    ``sources`` keeps only strings of those source vocabularies (SAB, e.g. ``["MSH"]``).
    Rows of a CUI need not be adjacent; concepts come out in order of first appearance.
    """
    stats = ensure_stats(stats, "umls", mrconso)
    types = read_umls_types(mrsty) if mrsty is not None else {}
    definitions = read_umls_definitions(mrdef) if mrdef is not None else {}
    wanted_sources = set(sources) if sources is not None else None
    names: "OrderedDict[str, List[str]]" = OrderedDict()
    canonical: Dict[str, str] = {}
    for line_no, row in _rows(mrconso, MRCONSO_FIELDS, progress=progress):
        stats.records += 1
        if row["LAT"] not in languages:
            stats.skip("string_other_language")
            continue
        if row["SUPPRESS"] != "N":
            stats.skip(f"string_suppressed_{row['SUPPRESS'] or 'blank'}")
            continue
        if wanted_sources is not None and row["SAB"] not in wanted_sources:
            stats.skip("string_other_source")
            continue
        text = row["STR"].strip()
        if not text:
            raise InputError("empty string", mrconso, line_no, "STR")
        cui = row["CUI"]
        names.setdefault(cui, []).append(text)
        if cui not in canonical and row["ISPREF"] == "Y" and row["TS"] == "P" and row["STT"] == "PF":
            canonical[cui] = text
    for cui, strings in names.items():
        unique = list(OrderedDict.fromkeys(strings))
        first = canonical.get(cui, unique[0])
        aliases = [s for s in unique if s != first]
        stats.kept(1 + len(aliases))
        yield Concept(f"UMLS:{cui}", first, aliases, list(types.get(cui, [])), definitions.get(cui))
    logger.debug("%s", stats.summary())
