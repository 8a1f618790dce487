"""OBO flat files (``hp.obo``): ``[Term]`` stanzas of ``tag: value`` lines.

Kept per term: ``name`` (canonical), ``synonym`` lines whose scope is wanted (EXACT by
default: RELATED/BROAD/NARROW are not the same concept, and SapBERT pairs must be
synonyms), ``def``, and ``xref`` lines (handed to the caller's ``xrefs`` list for the
cross-vocabulary merge). Obsolete terms, terms outside the wanted roots, synonyms of
other scopes and synonyms typed ``obsolete_synonym`` are counted, not kept.
"""
from __future__ import annotations

import logging
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.ids import normalize_curie, parse_id
from spacy_sapbert.kb.knowledge_base import Concept
from spacy_sapbert.kb.sources.hierarchy import descendants
from spacy_sapbert.kb.sources.sssom import Mapping
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import iter_lines

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
SCOPES = ("EXACT", "RELATED", "BROAD", "NARROW")
_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"(.*)$')
_ESCAPES = re.compile(r"\\(.)")
_STANZA = re.compile(r"^\[(\w+)\]\s*$")
OBSOLETE_SYNONYM_TYPES = frozenset({"obsolete_synonym"})


@dataclass
class OboTerm:
    """The tags of one ``[Term]`` stanza that a KB needs."""

    id: str
    line: int
    name: str = ""
    definition: Optional[str] = None
    synonyms: List[Tuple[str, str, str]] = field(default_factory=list)  # (text, scope, type)
    xrefs: List[str] = field(default_factory=list)
    parents: List[str] = field(default_factory=list)
    obsolete: bool = False


def _unquote(value: str, path: PathLike, line: int, tag: str) -> Tuple[str, str]:
    """``"text" rest`` → (text with escapes resolved, rest)."""
    match = _QUOTED.match(value)
    if not match:
        raise InputError(f"{tag} value must start with a double-quoted string: {value!r}", path, line, tag)
    text = _ESCAPES.sub(lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), match.group(1))
    return text, match.group(2).strip()


def _strip_comment(value: str) -> str:
    return value.split(" !", 1)[0].strip()


def iter_obo_terms(path: PathLike) -> Iterator[OboTerm]:
    """Every ``[Term]`` stanza of an OBO file; other stanzas (``[Typedef]``) are passed over."""
    term: Optional[OboTerm] = None
    kind: Optional[str] = None
    start = 0
    for line_no, text in iter_lines(path, require_line_end=True):
        line = text.strip()
        if not line or line.startswith("!"):
            continue
        stanza = _STANZA.match(line)
        if stanza:
            if term is not None:
                yield term
            term, kind, start = None, stanza.group(1), line_no
            continue
        tag, sep, value = line.partition(":")
        if not sep or not tag or " " in tag:
            raise InputError(f"expected 'tag: value', got {line[:60]!r}", path, line_no)
        value = value.strip()
        if kind != "Term":
            continue  # header lines and [Typedef]/[Instance] stanzas
        if tag == "id":
            if term is not None:
                raise InputError("a second id in one [Term] stanza", path, line_no, "id")
            term = OboTerm(_strip_comment(value), line_no)
            continue
        if term is None:
            raise InputError(f"[Term] stanza starting at line {start} has '{tag}' before its id", path, line_no, "id")
        if tag == "name":
            term.name = value
        elif tag == "def":
            term.definition = _unquote(value, path, line_no, "def")[0]
        elif tag == "synonym":
            text_, rest = _unquote(value, path, line_no, "synonym")
            words = rest.split()
            if not words or words[0] not in SCOPES:
                raise InputError(f"synonym scope must be one of {SCOPES}: {rest[:40]!r}", path, line_no, "synonym")
            syn_type = words[1] if len(words) > 1 and not words[1].startswith("[") else ""
            term.synonyms.append((text_, words[0], syn_type))
        elif tag == "xref":
            term.xrefs.append(_strip_comment(value).split(" ", 1)[0])
        elif tag == "is_a":
            term.parents.append(_strip_comment(value).split(" ", 1)[0])
        elif tag == "is_obsolete":
            term.obsolete = value.lower().startswith("true")
    if kind == "Term" and term is None:
        raise InputError("[Term] stanza without an id", path, start, "id")
    if term is not None:
        yield term


def read_obo(path: PathLike, id_prefixes: Optional[Sequence[str]] = None, roots: Sequence[str] = (),
             synonym_scopes: Sequence[str] = ("EXACT",), types: Sequence[str] = (), source: str = "obo",
             stats: Optional[ReadStats] = None, xrefs: Optional[List[Mapping]] = None) -> Iterator[Concept]:
    """Concepts from an OBO file.

    ``id_prefixes`` keeps terms of those ID spaces (others are counted as imported);
    ``roots`` keeps only terms under those terms by ``is_a`` (HPO: HP:0000118, the
    phenotypic abnormalities). Cross-references with a prefix we know go to ``xrefs``.
    """
    stats = ensure_stats(stats, source, path)
    terms = list(iter_obo_terms(path))
    parents: Dict[str, List[str]] = {t.id: t.parents for t in terms}
    keep: Optional[Set[str]] = descendants(parents, roots) if roots else None
    for term in terms:
        stats.records += 1
        prefix = term.id.partition(":")[0]
        if id_prefixes is not None and prefix not in id_prefixes:
            stats.skip("term_of_other_ontology")
            continue
        concept_id = parse_id(term.id, path, term.line, "id")
        if term.obsolete:
            stats.skip("obsolete_term")
            continue
        if keep is not None and term.id not in keep:
            stats.skip("term_outside_roots")
            continue
        if not term.name:
            stats.skip("term_without_name")
            continue
        names = [term.name]
        for text_, scope, syn_type in term.synonyms:
            if syn_type in OBSOLETE_SYNONYM_TYPES:
                stats.skip("synonym_obsolete")
            elif scope not in synonym_scopes:
                stats.skip(f"synonym_{scope.lower()}")
            else:
                names.append(text_)
        names = list(OrderedDict.fromkeys(n.strip() for n in names if n.strip()))
        if xrefs is not None:
            for xref in term.xrefs:
                try:
                    target = normalize_curie(xref)
                except ValueError:
                    stats.skip("xref_malformed")
                    continue
                if target is not None and target != concept_id:
                    xrefs.append(Mapping(concept_id, target, "oboInOwl:hasDbXref", source=source))
        stats.kept(len(names))
        yield Concept(concept_id, names[0], names[1:], list(types), term.definition)
    logger.debug("%s", stats.summary())
