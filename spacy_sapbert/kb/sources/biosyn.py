"""BioSyn's dictionary form: ``IDs||name`` (one name per line) and the MEDIC text form
``IDs||name|synonym|...`` that BioSyn ships as ``medic_06Jul2012.txt``.

IDs are ``|``-joined equivalent identifiers (``C567755|613097``); MeSH is bare and
OMIM numbers are bare digits, other vocabularies carry a prefix. Lines with the same
IDs are one concept: the first line's first name is its canonical name.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.ids import parse_id
from spacy_sapbert.kb.knowledge_base import ID_SEPARATOR, Concept
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import iter_lines

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
FIELD_SEPARATOR = "||"


def parse_ids(raw: str, path: PathLike, line: int, bare_numeric: str = "OMIM") -> Tuple[str, ...]:
    """``C567755|613097`` → ``("C567755", "OMIM:613097")``, duplicates removed, order kept."""
    parts = [p.strip() for p in raw.split("|")]
    if not parts or any(not p for p in parts):
        raise InputError(f"empty identifier in {raw!r}", path, line, "ids")
    ids = [parse_id(p, path, line, "ids", bare_numeric=bare_numeric) for p in parts]
    return tuple(OrderedDict.fromkeys(ids))


def split_line(text: str, path: PathLike, line: int) -> Tuple[str, str]:
    ids, sep, names = text.partition(FIELD_SEPARATOR)
    if not sep:
        raise InputError("expected 'IDs||names' (no '||' separator)", path, line)
    if not ids.strip():
        raise InputError("missing identifier before '||'", path, line, "ids")
    return ids, names


def _split_ambiguous(concepts: "OrderedDict[Tuple[str, ...], List[str]]", stats: ReadStats) -> None:
    """Give names whose IDs are the union of other entries' IDs back to those entries.

    BioSyn's dictionary_preprocess.py writes a name shared by two concepts once, with both
    concepts' IDs joined by ``|`` (``145250|266140|C563004||hpp``): the same spelling as a
    concept with several equivalent IDs. When the joined IDs split exactly into IDs of
    other entries, the line is an ambiguous name, not a concept of its own.
    """
    for key in [k for k in concepts if len(k) > 1]:
        parts = [k for k in concepts if k != key and set(k) <= set(key)]
        if not parts or set().union(*parts) != set(key):
            continue
        names = concepts.pop(key)
        for part in parts:
            concepts[part].extend(names)
        stats.skip("ambiguous_name_given_to_each_concept", len(names))


def read_biosyn_records(path: PathLike, split_names: bool, source: str, types: Sequence[str] = (),
                        stats: Optional[ReadStats] = None, bare_numeric: str = "OMIM",
                        split_ambiguous: bool = False) -> Iterator[Concept]:
    """Shared reader of both forms; ``split_names`` splits the name field on ``|`` (MEDIC form)."""
    stats = ensure_stats(stats, source, path)
    concepts: "OrderedDict[Tuple[str, ...], List[str]]" = OrderedDict()
    for line_no, text in iter_lines(path, require_line_end=True):
        if not text.strip():
            continue
        stats.records += 1
        raw_ids, raw_names = split_line(text, path, line_no)
        if len(raw_ids.strip()) == 1 and raw_ids.strip().isalpha():
            stats.skip("category_root_row")  # MEDIC lists the MeSH category itself: "C||Diseases"
            continue
        ids = parse_ids(raw_ids, path, line_no, bare_numeric)
        names = [n.strip() for n in (raw_names.split("|") if split_names else [raw_names])]
        empty = sum(1 for n in names if not n)
        names = [n for n in names if n]
        if not names:
            raise InputError("no name after '||'", path, line_no, "names")
        if empty:
            stats.skip("empty_name", empty)
        concepts.setdefault(ids, []).extend(names)
    if split_ambiguous:
        _split_ambiguous(concepts, stats)
    for ids, names in concepts.items():
        unique = list(OrderedDict.fromkeys(names))
        if len(unique) < len(names):
            stats.skip("duplicate_name", len(names) - len(unique))
        stats.kept(len(unique))
        yield Concept(ID_SEPARATOR.join(ids), unique[0], unique[1:], list(types), None)
    logger.debug("%s", stats.summary())


def read_biosyn_dictionary(path: PathLike, types: Sequence[str] = (), stats: Optional[ReadStats] = None,
                           bare_numeric: str = "OMIM") -> Iterator[Concept]:
    """A BioSyn/SapBERT dictionary (``train_dictionary.txt``): ``IDs||name`` per line; the
    name is everything after ``||``. Lines of one concept are merged; an ambiguous name
    (IDs of several concepts joined) goes to each of those concepts."""
    return read_biosyn_records(path, split_names=False, source="biosyn-dictionary", types=types, stats=stats,
                               bare_numeric=bare_numeric, split_ambiguous=True)
