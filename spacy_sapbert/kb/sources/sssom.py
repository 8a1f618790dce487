"""SSSOM mapping tables (MONDO's ``mondo_exactmatch_*.sssom.tsv``) and the mapping record
that every reader's cross-references share.

An SSSOM TSV starts with ``#``-prefixed YAML metadata (curie_map, licence, ...), then a
header row naming at least ``subject_id``, ``predicate_id`` and ``object_id``. Only the
wanted predicates (``skos:exactMatch`` by default) are kept: a broad or close match says
two concepts differ, and merging them would mix their synonyms.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator, List, NamedTuple, Optional, Sequence, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.ids import MalformedId, parse_id
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import iter_lines

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
REQUIRED_COLUMNS = ("subject_id", "predicate_id", "object_id")
EXACT_MATCH = "skos:exactMatch"


class Mapping(NamedTuple):
    """``subject_id`` and ``object_id`` (canonical IDs) are said to name the same concept."""

    subject_id: str
    object_id: str
    predicate_id: str = EXACT_MATCH
    subject_label: str = ""
    object_label: str = ""
    source: str = ""
    """Which table or which vocabulary's xrefs the mapping comes from (guards work per source)."""


def read_sssom(path: PathLike, predicates: Sequence[str] = (EXACT_MATCH,), source: Optional[str] = None,
               stats: Optional[ReadStats] = None) -> Iterator[Mapping]:
    """Mappings of an SSSOM TSV with a wanted predicate; IDs in this project's canonical form.

    Mappings whose subject is obsolete (MONDO keeps mappings of its obsolete terms, labelled
    "obsolete ...") are counted and left out.
    """
    source = source or Path(path).name.split(".")[0]
    stats = ensure_stats(stats, source, path, unit="mappings")
    header: Optional[List[str]] = None
    for line_no, text in iter_lines(path, require_line_end=True):
        if text.startswith("#") or not text.strip():
            continue
        cols = text.split("\t")
        if header is None:
            header = [c.strip() for c in cols]
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            if missing:
                raise InputError(f"SSSOM header lacks the column(s) {missing}", path, line_no)
            continue
        if len(cols) != len(header):
            raise InputError(f"expected {len(header)} tab-separated columns, found {len(cols)}", path, line_no)
        row = dict(zip(header, cols))
        stats.records += 1
        if row["predicate_id"].strip() not in predicates:
            stats.skip(f"predicate_{row['predicate_id'].strip() or 'missing'}")
            continue
        subject_label = row.get("subject_label", "").strip()
        if subject_label.lower().startswith("obsolete"):
            stats.skip("obsolete_subject")
            continue
        try:
            subject = parse_id(row["subject_id"], path, line_no, "subject_id", strict_local=False)
            obj = parse_id(row["object_id"], path, line_no, "object_id", strict_local=False)
        except MalformedId as err:
            # a typo in one row of a curated table (MONDO has mesh:D00007727) must not stop a
            # build: the row is counted and named in the log
            logger.warning("%s:%d: skipped mapping: %s", path, line_no, err)
            stats.skip("malformed_id")
            continue
        stats.concepts += 1
        yield Mapping(subject, obj, row["predicate_id"].strip(), subject_label, row.get("object_label", "").strip(),
                      source)
    if header is None:
        raise InputError("no SSSOM header row (subject_id, predicate_id, object_id)", path)
    logger.debug("%s", stats.summary())
