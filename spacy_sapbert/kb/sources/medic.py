"""MEDIC, CTD's disease vocabulary, in its two published forms.

* BioSyn's text form (``medic_06Jul2012.txt``, what BioSyn/SapBERT evaluate NCBI disease
  with): ``C567755|613097||Tooth Agenesis, Selective, 6|STHAG6``.
* CTD's TSV (``CTD_diseases.tsv.gz``): ``#`` comment header naming the fields, then
  DiseaseName, DiseaseID (``MESH:``/``OMIM:``), AltDiseaseIDs, Definition, ParentIDs,
  TreeNumbers, ParentTreeNumbers, Synonyms, SlimMappings.

Concept IDs are written as the corpora write them: bare MeSH, ``OMIM:613097``; a concept
with several IDs gets them all, ``|``-joined with its primary ID first, so a gold ID in
either vocabulary resolves to it.
"""
from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.ids import is_bare_mesh, parse_id
from spacy_sapbert.kb.knowledge_base import ID_SEPARATOR, Concept
from spacy_sapbert.kb.sources.biosyn import read_biosyn_records
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import iter_lines

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
DISEASE = "Disease"
CTD_FIELDS = ("DiseaseName", "DiseaseID", "AltDiseaseIDs", "Definition", "ParentIDs", "TreeNumbers",
              "ParentTreeNumbers", "Synonyms", "SlimMappings")
REQUIRED_CTD_FIELDS = ("DiseaseName", "DiseaseID")


def read_medic_biosyn(path: PathLike, stats: Optional[ReadStats] = None) -> Iterator[Concept]:
    """MEDIC in BioSyn's text form: ``IDs||name|synonym|...`` per line."""
    return read_biosyn_records(path, split_names=True, source="medic", types=[DISEASE], stats=stats)


def _ctd_rows(path: PathLike) -> Iterator[Tuple[int, Dict[str, str]]]:
    """Data rows of a CTD TSV as field → value, the field names taken from the ``# Fields:`` header."""
    fields: Sequence[str] = CTD_FIELDS
    expect_header = False
    header_seen = False
    for line_no, text in iter_lines(path, require_line_end=True):
        if text.startswith("#"):
            body = text[1:].strip()
            if expect_header and body:
                fields = tuple(f.strip() for f in body.split("\t"))
                header_seen = True
                expect_header = False
            elif body.startswith("Fields:"):
                expect_header = True
            continue
        if not text.strip():
            continue
        if not header_seen:
            header_seen = True  # no header comment: CTD's documented column order
        missing = [f for f in REQUIRED_CTD_FIELDS if f not in fields]
        if missing:
            raise InputError(f"CTD header lacks the column(s) {missing}", path, line_no)
        cols = text.split("\t")
        if len(cols) != len(fields):
            raise InputError(f"expected {len(fields)} tab-separated columns ({', '.join(fields)}), found {len(cols)}",
                             path, line_no)
        yield line_no, dict(zip(fields, cols))


def _is_category_root(disease_id: str) -> bool:
    """CTD lists the MeSH category itself (``Diseases``, ``MESH:C``) as a row; it is no concept."""
    prefix, _, local = disease_id.strip().partition(":")
    return prefix == "MESH" and len(local) == 1 and local.isalpha()


def read_ctd_diseases(path: PathLike, stats: Optional[ReadStats] = None) -> Iterator[Concept]:
    """MEDIC from CTD's ``CTD_diseases.tsv(.gz)``: one concept per row, AltDiseaseIDs after the primary ID.

    An alternative ID that several rows claim (CTD gives DOID:14450 to six diseases) says
    "related", not "the same": it is dropped from all of them and counted, so that
    resolving it never picks one of the six at random.
    """
    stats = ensure_stats(stats, "medic-ctd", path)
    rows: List[Tuple[str, List[str], Concept]] = []
    for line_no, row in _ctd_rows(path):
        stats.records += 1
        if _is_category_root(row["DiseaseID"]):
            stats.skip("category_root_row")
            continue
        name = row["DiseaseName"].strip()
        if not name:
            raise InputError("empty disease name", path, line_no, "DiseaseName")
        primary = parse_id(row["DiseaseID"], path, line_no, "DiseaseID")
        alt = [parse_id(a, path, line_no, "AltDiseaseIDs") for a in row.get("AltDiseaseIDs", "").split("|") if a.strip()]
        synonyms = [s.strip() for s in row.get("Synonyms", "").split("|") if s.strip()]
        definition = row.get("Definition", "").strip() or None
        rows.append((primary, alt, Concept(primary, name, synonyms, [DISEASE], definition)))
    claims = Counter(i for primary, alt, _ in rows for i in OrderedDict.fromkeys([primary] + alt))
    seen: "OrderedDict[str, Concept]" = OrderedDict()
    for primary, alt, concept in rows:
        shared = [a for a in OrderedDict.fromkeys(alt) if a != primary and claims[a] > 1]
        if shared:
            stats.skip("alt_id_claimed_by_several_rows", len(shared))
        ids = [primary] + [a for a in OrderedDict.fromkeys(alt) if a != primary and claims[a] == 1]
        concept = concept._replace(concept_id=ID_SEPARATOR.join(ids))
        if concept.concept_id in seen:
            stats.skip("duplicate_row_merged")
            continue
        seen[concept.concept_id] = concept
    for concept in seen.values():
        stats.kept(len(concept.names))
        yield concept
    logger.debug("%s", stats.summary())


def read_ctd_tree_numbers(path: PathLike) -> Dict[str, List[str]]:
    """MeSH disease ID → its tree numbers, from CTD's TreeNumbers column.

    CTD keeps the top-level tree numbers (``C04`` for Neoplasms) that some MeSH
    exports drop; the mesh KB uses this to place those descriptors in their category.
    """
    trees: Dict[str, List[str]] = {}
    for line_no, row in _ctd_rows(path):
        if _is_category_root(row["DiseaseID"]):
            continue
        cid = parse_id(row["DiseaseID"], path, line_no, "DiseaseID")
        if not is_bare_mesh(cid):
            continue
        numbers = [t.split("/")[0].strip() for t in row.get("TreeNumbers", "").split("|") if t.strip()]
        # CTD writes a supplementary concept's place as PARENT_TREE/C123456; keep the tree part
        trees[cid] = list(OrderedDict.fromkeys(numbers))
    return trees


def read_medic(path: PathLike, stats: Optional[ReadStats] = None) -> Iterator[Concept]:
    """Either MEDIC form, told apart by the first data line (tabs: CTD TSV; ``||``: BioSyn form)."""
    for line_no, text in iter_lines(path):
        if text.startswith("#"):
            return read_ctd_diseases(path, stats)
        if not text.strip():
            continue
        if "||" in text:
            return read_medic_biosyn(path, stats)
        if "\t" in text:
            return read_ctd_diseases(path, stats)
        raise InputError("neither MEDIC form: expected 'IDs||names' lines or CTD's tab-separated columns",
                         path, line_no)
    raise InputError("empty file", path)
