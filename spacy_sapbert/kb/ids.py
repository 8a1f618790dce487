"""Concept identifiers as this project writes them, from the many spellings upstream uses.

MeSH IDs are bare (``D012345``, ``C567755``), as the NCBI disease and BC5CDR corpora
write them; every other vocabulary is ``PREFIX:ID`` with one canonical prefix
(``OMIM:613097``, ``DOID:9352``, ``HP:0001250``, ``MONDO:0005148``, ``Orphanet:558``,
``NCIT:C2852``, ``UMLS:C0011849``). Upstream files spell the same prefix many ways
(``MESH:``/``MSH:``/``mesh:``, ``ORDO:``/``ORPHA:``/``Orphanet_``, ``NCI:``,
``UMLS_CUI:``/``CUI:``, CTD's ``DO:DOID:``, OBO PURLs); they all end up here.

This is the one ID grammar of the project: the KB builders (:mod:`spacy_sapbert.kb.sources`),
the gold IDs of the PubTator corpora (:mod:`spacy_sapbert.training.corpora`) and
:meth:`spacy_sapbert.kb.knowledge_base.KnowledgeBase.resolve` all parse here, so a gold ``CUI:C0011849``,
``MSH:D012174`` or ``ORPHA:558`` is the very string a KB holds (``UMLS:C0011849``,
``D012174``, ``Orphanet:558``) instead of an ID no concept carries.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Optional, Union

from spacy_sapbert.errors import InputError

MESH = "MESH"
#: upper-cased upstream prefix → canonical prefix ("MESH" means: write the ID bare)
PREFIX_ALIASES: Dict[str, str] = {
    "MESH": MESH, "MSH": MESH, "MESHID": MESH,
    "OMIM": "OMIM", "MIM": "OMIM",
    "DOID": "DOID", "DO": "DOID",
    "ORPHANET": "Orphanet", "ORDO": "Orphanet", "ORPHA": "Orphanet",
    "NCIT": "NCIT", "NCI": "NCIT",
    "HP": "HP", "HPO": "HP",
    "MONDO": "MONDO",
    "UMLS": "UMLS", "UMLS_CUI": "UMLS", "CUI": "UMLS",
}
#: canonical prefix → pattern its local part must match
LOCAL_PATTERNS: Dict[str, re.Pattern] = {
    MESH: re.compile(r"^[CD]\d{6}(\d{3})?$"),
    "OMIM": re.compile(r"^(PS)?\d{6}$"),
    "DOID": re.compile(r"^\d+$"),
    "Orphanet": re.compile(r"^C?\d+$"),
    "NCIT": re.compile(r"^C\d+$"),
    "HP": re.compile(r"^\d{7}$"),
    "MONDO": re.compile(r"^\d{7}$"),
    "UMLS": re.compile(r"^C\d{7}$"),
}
_BARE_MESH = LOCAL_PATTERNS[MESH]


class MalformedId(ValueError):
    """A known prefix with a local part that breaks its pattern (``MESH:X12``)."""


_URI_TAIL = re.compile(r"([A-Za-z][A-Za-z0-9]*)_([A-Za-z0-9]+)$")


def is_bare_mesh(value: str) -> bool:
    return bool(_BARE_MESH.match(value))


def is_newer_mesh(concept_id: str) -> bool:
    """Whether ``concept_id`` is a MeSH record with a ten-character UI (``D000075222``, ``C000591739``):
    one MeSH made after the records with seven (the last descriptor with seven in MeSH 2024 is D066331,
    the highest in BC5CDR D066126). BC5CDR (annotated with MeSH 2015) and NCBI disease (with MEDIC 2012)
    name no such record: every MeSH ID of theirs has seven characters; BioRED (2022) names some."""
    return len(concept_id) == 10 and is_bare_mesh(concept_id)


def normalize_curie(raw: str) -> Optional[str]:
    """The canonical form of ``raw``, or None when its prefix is not one we know.

    Raises :class:`MalformedId` when the prefix is known but the local part is malformed
    (``MESH:X12``), since that is a broken record rather than another vocabulary.
    """
    value = raw.strip()
    if is_bare_mesh(value):
        return value
    prefix, sep, local = value.partition(":")
    if not sep:
        return None
    canonical = PREFIX_ALIASES.get(prefix.upper())
    if canonical == "DOID" and local.upper().startswith("DOID:"):  # CTD writes DO:DOID:0060395
        local = local[5:]
    if canonical is None:
        return None
    local = local.strip()
    if canonical == "UMLS" or canonical == "NCIT":
        local = local.upper()
    if not LOCAL_PATTERNS[canonical].match(local):
        raise MalformedId(f"malformed {canonical} identifier {raw!r}")
    return local if canonical == MESH else f"{canonical}:{local}"


def parse_id(raw: str, path: Optional[Union[str, Path]] = None, line: Optional[int] = None,
             field: Optional[str] = None, bare_numeric: Optional[str] = None, strict_local: bool = True) -> str:
    """Like :func:`normalize_curie` but an unknown prefix is an :class:`InputError`, and so is
    a malformed ID unless ``strict_local`` is False (then :class:`MalformedId` propagates for
    the caller to count). ``bare_numeric`` names the vocabulary of IDs written as bare digits
    (MEDIC writes OMIM numbers bare)."""
    value = raw.strip()
    if bare_numeric and value.isdigit():
        value = f"{bare_numeric}:{value}"
    try:
        parsed = normalize_curie(value)
    except MalformedId as err:
        if not strict_local:
            raise
        raise InputError(str(err), path, line, field) from err
    if parsed is None:
        known = ", ".join(sorted(set(PREFIX_ALIASES.values()) - {MESH}))
        raise InputError(f"unknown identifier {raw!r} (expected bare MeSH or one of the prefixes {known})",
                         path, line, field)
    return parsed


def uri_to_curie(uri: str) -> str:
    """``http://purl.obolibrary.org/obo/DOID_4`` → ``DOID:4``; other strings are returned unchanged."""
    if uri.startswith(("http://", "https://")):
        tail = uri.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1]
        match = _URI_TAIL.match(tail)
        if match:
            return f"{match.group(1)}:{match.group(2)}"
        return tail
    return uri


def vocabulary(concept_id: str) -> str:
    """The vocabulary of one canonical ID: ``MESH`` for bare MeSH, else its prefix."""
    if is_bare_mesh(concept_id):
        return MESH
    return concept_id.partition(":")[0]
