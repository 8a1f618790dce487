"""MeSH: the mirror's descriptor TSV and NLM's own XML (``desc20XX.xml``, ``supp20XX.xml``).

A descriptor is kept when one of its tree numbers falls in a wanted category (by
default C diseases, F03 mental disorders, D chemicals and drugs) and gets that
category's type. Permuted terms (NLM's word-order and inflection variants such as
"A23187, Antibiotic") are left out unless asked for: measured on BC5CDR dev, they make 3
more of 4,716 chemical mentions an exact name of their gold concept (3,948 → 3,951)
while growing the KB's normalised names by 64% (81,933 → 134,779).
Supplementary concept records (``C…`` IDs) have no tree numbers; their SCRClass
(1 chemical, 3 disease, ...) says what they are.
"""
from __future__ import annotations

import logging
import re
import xml.etree.ElementTree as ET
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import iter_lines

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]

#: tree-number prefix → concept type; the longest matching prefix wins
MESH_CATEGORIES: Mapping[str, str] = {"C": "Disease", "F03": "Disease", "D": "Chemical"}
#: SCRClass of a supplementary record → concept type (2 protocol, 4 organism, 5 population, 6 anatomy: left out)
SCR_CLASSES: Mapping[str, str] = {"1": "Chemical", "3": "Disease"}
TERM_COLUMNS = ("DescriptorUI", "DescriptorName", "TermName", "IsPermutedTermYN")
#: ReadStats.filled reason: a descriptor the tree table lacks, placed by ``extra_tree_numbers``
TREE_NUMBERS_FROM_EXTRA = "tree_numbers_from_extra_table"
_DESCRIPTOR_UI = re.compile(r"^D\d{6}(\d{3})?$")
SUPPLEMENTARY_UI = re.compile(r"^C\d{6}(\d{3})?$")


def under_tree(tree: str, prefix: str) -> bool:
    """Is tree number ``tree`` in the branch ``prefix`` (a category letter such as ``C`` or a
    tree number such as ``F03``)?"""
    return tree == prefix or tree.startswith(prefix + ".") or (len(prefix) == 1 and tree.startswith(prefix))


def category_types(tree_numbers: Iterable[str], categories: Mapping[str, str]) -> List[str]:
    """Types of a descriptor from its tree numbers (``C04.557`` → ``Disease``), in category order."""
    found = set()
    for tree in tree_numbers:
        matches = [p for p in categories if under_tree(tree, p)]
        if matches:
            found.add(categories[max(matches, key=len)])
    return [t for t in OrderedDict.fromkeys(categories.values()) if t in found]


def read_mesh_trees(path: PathLike) -> Dict[str, List[str]]:
    """``DescriptorUI<TAB>TreeNumber`` rows (with a header) → descriptor → tree numbers."""
    trees: Dict[str, List[str]] = {}
    header: Optional[List[str]] = None
    for line_no, text in iter_lines(path, require_line_end=True):
        if not text.strip():
            continue
        cols = text.split("\t")
        if header is None:
            header = cols
            if "DescriptorUI" not in cols or "TreeNumber" not in cols:
                raise InputError("header must name the columns DescriptorUI and TreeNumber", path, line_no)
            continue
        if len(cols) != len(header):
            raise InputError(f"expected {len(header)} tab-separated columns, found {len(cols)}", path, line_no)
        row = dict(zip(header, cols))
        ui = row["DescriptorUI"].strip()
        if not _DESCRIPTOR_UI.match(ui):
            raise InputError(f"not a MeSH descriptor UI: {ui!r}", path, line_no, "DescriptorUI")
        trees.setdefault(ui, []).append(row["TreeNumber"].strip())
    return trees


def _select(ui: str, tree_numbers: Sequence[str], categories: Optional[Mapping[str, str]],
            stats: ReadStats) -> Optional[List[str]]:
    """The descriptor's types, or None (counted) when it is outside the wanted categories."""
    if categories is None:
        return []
    if not tree_numbers:
        stats.skip("descriptor_without_tree_number")
        return None
    types = category_types(tree_numbers, categories)
    if not types:
        stats.skip("descriptor_outside_categories")
        return None
    return types


def read_mesh_tsv(terms_path: PathLike, trees_path: Optional[PathLike] = None,
                  categories: Optional[Mapping[str, str]] = MESH_CATEGORIES, include_permuted: bool = False,
                  extra_tree_numbers: Optional[Mapping[str, Sequence[str]]] = None,
                  stats: Optional[ReadStats] = None) -> Iterator[Concept]:
    """MeSH descriptors from the term table (one row per term, as in the mirror) and its tree table.

    ``extra_tree_numbers`` fills in descriptors the tree table has no row for (the mirror's
    export drops top-level headings such as Neoplasms, C04; CTD's MEDIC still has them).
    ``categories=None`` keeps every descriptor, untyped.
    """
    stats = ensure_stats(stats, "mesh", terms_path)
    trees = read_mesh_trees(trees_path) if trees_path is not None else {}
    if categories is not None and trees_path is None and not extra_tree_numbers:
        raise InputError("selecting MeSH categories needs the tree-number table", terms_path)
    records: "OrderedDict[str, Tuple[str, List[str]]]" = OrderedDict()
    header: Optional[List[str]] = None
    for line_no, text in iter_lines(terms_path, require_line_end=True):
        if not text.strip():
            continue
        cols = text.split("\t")
        if header is None:
            header = cols
            missing = [c for c in TERM_COLUMNS if c not in header]
            if missing:
                raise InputError(f"header lacks the column(s) {missing}", terms_path, line_no)
            continue
        if len(cols) != len(header):
            raise InputError(f"expected {len(header)} tab-separated columns, found {len(cols)}", terms_path, line_no)
        row = dict(zip(header, cols))
        stats.records += 1
        ui = row["DescriptorUI"].strip()
        if not _DESCRIPTOR_UI.match(ui):
            raise InputError(f"not a MeSH descriptor UI: {ui!r}", terms_path, line_no, "DescriptorUI")
        name, term = row["DescriptorName"].strip(), row["TermName"].strip()
        if not name:
            raise InputError("empty descriptor name", terms_path, line_no, "DescriptorName")
        if row["IsPermutedTermYN"] not in ("Y", "N"):
            raise InputError(f"expected Y or N, got {row['IsPermutedTermYN']!r}", terms_path, line_no,
                             "IsPermutedTermYN")
        entry = records.setdefault(ui, (name, []))
        if row["IsPermutedTermYN"] == "Y" and not include_permuted:
            stats.skip("permuted_term")
            continue
        if term:
            entry[1].append(term)
    extra = extra_tree_numbers or {}
    for ui, (name, terms) in records.items():
        own = trees.get(ui)
        if not own and extra.get(ui) and categories is not None:
            stats.filled[TREE_NUMBERS_FROM_EXTRA] += 1
        types = _select(ui, own or list(extra.get(ui, ())), categories, stats)
        if types is None:
            continue
        names = list(OrderedDict.fromkeys([name] + terms))
        stats.kept(len(names))
        yield Concept(ui, name, names[1:], types, None)
    logger.debug("%s", stats.summary())


# --- NLM XML ---------------------------------------------------------------------------------
def _record_names(record: ET.Element, include_permuted: bool, stats: ReadStats) -> Tuple[List[str], Optional[str]]:
    """Every term string of every concept of a record, and the preferred concept's scope note."""
    names: List[str] = []
    definition = None
    for concept in record.findall("ConceptList/Concept"):
        if concept.get("PreferredConceptYN") == "Y" and definition is None:
            note = (concept.findtext("ScopeNote") or "").strip()
            definition = " ".join(note.split()) or None
        for term in concept.findall("TermList/Term"):
            if term.get("IsPermutedTermYN") == "Y" and not include_permuted:
                stats.skip("permuted_term")
                continue
            value = (term.findtext("String") or "").strip()
            if value:
                names.append(value)
    return names, definition


def _descriptor(record: ET.Element, path: PathLike, line: int, categories: Optional[Mapping[str, str]],
                include_permuted: bool, stats: ReadStats) -> Optional[Concept]:
    ui = (record.findtext("DescriptorUI") or "").strip()
    if not _DESCRIPTOR_UI.match(ui):
        raise InputError(f"DescriptorRecord without a valid DescriptorUI ({ui!r})", path, line, "DescriptorUI")
    name = (record.findtext("DescriptorName/String") or "").strip()
    if not name:
        raise InputError(f"descriptor {ui} has no DescriptorName/String", path, line, "DescriptorName")
    tree_numbers = [(t.text or "").strip() for t in record.findall("TreeNumberList/TreeNumber")]
    types = _select(ui, [t for t in tree_numbers if t], categories, stats)
    if types is None:
        return None
    terms, definition = _record_names(record, include_permuted, stats)
    names = list(OrderedDict.fromkeys([name] + terms))
    return Concept(ui, name, names[1:], types, definition)


def _supplementary(record: ET.Element, path: PathLike, line: int, classes: Optional[Mapping[str, str]],
                   include_permuted: bool, stats: ReadStats) -> Optional[Concept]:
    ui = (record.findtext("SupplementalRecordUI") or "").strip()
    if not SUPPLEMENTARY_UI.match(ui):
        raise InputError(f"SupplementalRecord without a valid SupplementalRecordUI ({ui!r})", path, line,
                         "SupplementalRecordUI")
    name = (record.findtext("SupplementalRecordName/String") or "").strip()
    if not name:
        raise InputError(f"record {ui} has no SupplementalRecordName/String", path, line, "SupplementalRecordName")
    scr_class = record.get("SCRClass", "")
    if classes is not None and scr_class not in classes:
        stats.skip(f"supplementary_class_{scr_class or 'missing'}")
        return None
    terms, definition = _record_names(record, include_permuted, stats)
    if definition is None:
        definition = " ".join((record.findtext("Note") or "").split()) or None
    names = list(OrderedDict.fromkeys([name] + terms))
    return Concept(ui, name, names[1:], [classes[scr_class]] if classes is not None else [], definition)


def read_mesh_xml(path: PathLike, categories: Optional[Mapping[str, str]] = MESH_CATEGORIES,
                  supplementary_classes: Optional[Mapping[str, str]] = SCR_CLASSES, include_permuted: bool = False,
                  stats: Optional[ReadStats] = None, progress: bool = False) -> Iterator[Concept]:
    """Concepts from NLM's descriptor (``desc20XX.xml``) or supplementary (``supp20XX.xml``) XML,
    plain or gzipped, streamed record by record (the 2024 descriptor file is ~300 MB)."""
    stats = ensure_stats(stats, "mesh-xml", path)
    parser = ET.XMLPullParser(events=("start", "end"))
    root: Optional[ET.Element] = None
    depth = 0
    line_no = 0
    for line_no, text in iter_lines(path, progress=progress, desc="MeSH XML"):
        try:
            parser.feed(text + "\n")
            events = list(parser.read_events())
        except ET.ParseError as err:
            raise InputError(f"invalid XML: {err}", path, line_no) from err
        for event, element in events:
            if event == "start":
                depth += 1
                if root is None:
                    root = element
                    if element.tag not in ("DescriptorRecordSet", "SupplementalRecordSet"):
                        raise InputError(f"not a MeSH descriptor or supplementary XML file (root <{element.tag}>)",
                                         path, line_no)
                continue
            depth -= 1
            if depth != 1:
                continue
            if element.tag == "DescriptorRecord":
                stats.records += 1
                concept = _descriptor(element, path, line_no, categories, include_permuted, stats)
            elif element.tag == "SupplementalRecord":
                stats.records += 1
                concept = _supplementary(element, path, line_no, supplementary_classes, include_permuted, stats)
            else:
                stats.skip(f"other_record_{element.tag}")
                concept = None
            root.remove(element)  # keep memory flat while streaming
            if concept is not None:
                stats.kept(len(concept.names))
                yield concept
    if root is not None and depth > 0:
        # NLM's files have no record count; the closing tag of the record set is the check
        raise InputError(f"the file ends inside <{root.tag}>, after {stats.records:,} record(s) and without its "
                         f"closing </{root.tag}>: it is truncated; fetch it again", path, line_no)
    try:
        parser.close()
    except ET.ParseError as err:
        raise InputError(f"invalid XML: {err}", path, line_no) from err
    if root is None:
        raise InputError("no XML element found", path)
    logger.debug("%s", stats.summary())
