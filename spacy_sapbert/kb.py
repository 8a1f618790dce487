"""Concepts and knowledge bases, in scispaCy's JSONL schema.

A KB file is one JSON object per line with the fields of scispaCy's ``Entity``:
``concept_id``, ``canonical_name``, ``aliases``, ``types``, ``definition``. A file we
write (plain ``.jsonl``) loads in ``scispacy.linking_utils.KnowledgeBase`` and a
scispaCy KB file loads here; ``.gz`` is supported on both read and write.

A ``concept_id`` may hold several equivalent identifiers joined by ``|`` (MEDIC
concepts that carry both a MeSH and an OMIM ID, concepts merged across vocabularies);
the first one is the primary ID and :meth:`KnowledgeBase.resolve` finds the concept
by any of them, or by the whole joined string (what ``span.kb_id_`` holds).

A KB file holds one record per concept: a ``concept_id`` that appears twice is an error
naming both lines, since a silent merge would hide a broken export. Building a KB in
code merges records of one concept on purpose, and counts them
(:attr:`KnowledgeBase.merged_records`) so a build can report the merges.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from .atomic import atomic_open
from .errors import InputError
from .normalize import normalize

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
ID_SEPARATOR = "|"
MAX_PAIRS_PER_CONCEPT = 50
KB_FIELDS = ("concept_id", "canonical_name", "aliases", "types", "definition")


class Concept(NamedTuple):
    """One KB concept; field for field scispaCy's ``linking_utils.Entity``."""

    concept_id: str
    canonical_name: str
    aliases: List[str] = []
    types: List[str] = []
    definition: Optional[str] = None

    @property
    def ids(self) -> Tuple[str, ...]:
        """Every identifier of the concept, the primary one first."""
        return tuple(self.concept_id.split(ID_SEPARATOR))

    @property
    def names(self) -> List[str]:
        """Canonical name then aliases, without exact duplicates."""
        return _ordered_union([self.canonical_name], self.aliases)

    def to_dict(self) -> Dict[str, object]:
        return {
            "concept_id": self.concept_id,
            "canonical_name": self.canonical_name,
            "aliases": list(self.aliases),
            "types": list(self.types),
            "definition": self.definition,
        }


def _ordered_union(*lists: Iterable[str]) -> List[str]:
    seen = set()
    out = []
    for values in lists:
        for value in values:
            if value and value not in seen:
                seen.add(value)
                out.append(value)
    return out


def merge_concepts(first: Concept, second: Concept) -> Concept:
    """Merge two records of one concept deterministically: the first record's canonical
    name and definition win, aliases and types are unioned in order of appearance."""
    aliases = [a for a in _ordered_union(first.aliases, [second.canonical_name], second.aliases) if a != first.canonical_name]
    return Concept(
        concept_id=first.concept_id,
        canonical_name=first.canonical_name,
        aliases=aliases,
        types=_ordered_union(first.types, second.types),
        definition=first.definition or second.definition,
    )


def pair_count(n_names: int) -> int:
    """Positive pairs the trainer takes from a concept with ``n_names`` distinct names."""
    return min(n_names * (n_names - 1) // 2, MAX_PAIRS_PER_CONCEPT)


@dataclass(frozen=True)
class KBStats:
    concepts: int
    names: int
    concepts_with_synonyms: int
    positive_pairs: int

    def as_dict(self) -> Dict[str, int]:
        return {
            "concepts": self.concepts,
            "names": self.names,
            "concepts_with_2plus_names": self.concepts_with_synonyms,
            "positive_pairs": self.positive_pairs,
        }


class KnowledgeBase:
    """Concept lookup by ID, and normalised alias → concept IDs.

    Records with the same ``concept_id`` are merged (:func:`merge_concepts`), so a KB can
    be built from several sources in any order and comes out the same for the same order;
    :attr:`merged_records` counts them, for the build report.
    """

    def __init__(self, concepts: Iterable[Concept] = (), name: str = "") -> None:
        self.name = name
        self._concepts: Dict[str, Concept] = {}
        self._id_to_concept: Dict[str, str] = {}
        self._alias_index: Optional[Dict[str, List[str]]] = None
        self._fingerprint: Optional[str] = None
        #: records merged into a concept added before them (same concept_id)
        self.merged_records = 0
        for concept in concepts:
            self.add(concept)

    # -- building -----------------------------------------------------------------
    def add(self, concept: Concept) -> None:
        """Add ``concept``, merging it into an existing concept with the same ``concept_id``."""
        problem = _id_problem(concept.concept_id)
        if problem is not None:
            raise ValueError(f"concept_id {problem}: {concept!r}")
        if not isinstance(concept.canonical_name, str) or not concept.canonical_name.strip():
            raise ValueError(f"concept without a canonical name: {concept!r}")
        existing = self._concepts.get(concept.concept_id)
        if existing is None:
            concept = Concept(
                concept.concept_id,
                concept.canonical_name,
                [a for a in _ordered_union(concept.aliases) if a != concept.canonical_name],
                _ordered_union(concept.types),
                concept.definition or None,
            )
        else:
            concept = merge_concepts(existing, concept)
            self.merged_records += 1
        self._concepts[concept.concept_id] = concept
        for cid in concept.ids:
            self._id_to_concept.setdefault(cid, concept.concept_id)
        self._alias_index = None
        self._fingerprint = None

    # -- lookup ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._concepts)

    def __iter__(self) -> Iterator[Concept]:
        return iter(self._concepts.values())

    def __contains__(self, concept_id: object) -> bool:
        return concept_id in self._concepts

    def __getitem__(self, concept_id: str) -> Concept:
        return self._concepts[concept_id]

    def get(self, concept_id: str) -> Optional[Concept]:
        return self._concepts.get(concept_id)

    def resolve(self, any_id: str) -> Optional[Concept]:
        """The concept that carries ``any_id`` as its primary or an equivalent ID.

        ``any_id`` may be a joined ID (``D012174|OMIM:268000``, what ``span.kb_id_`` holds):
        the whole string is tried first, then each ``|``-separated part in order. Each is
        looked up as written, then in the canonical spelling of
        :func:`~spacy_sapbert.sources.ids.normalize_curie` (``MESH:D012174`` → ``D012174``).
        """
        if not isinstance(any_id, str):
            return None
        candidates = [any_id]
        if ID_SEPARATOR in any_id:
            candidates.extend(any_id.split(ID_SEPARATOR))
        for candidate in candidates:
            concept = self._resolve_one(candidate.strip())
            if concept is not None:
                return concept
        return None

    def _resolve_one(self, cid: str) -> Optional[Concept]:
        if not cid:
            return None
        for key in (cid, _canonical_id(cid)):
            if key is None:
                continue
            if key in self._concepts:  # a concept whose whole ID this is wins over one that lists it
                return self._concepts[key]
            owner = self._id_to_concept.get(key)
            if owner is not None:
                return self._concepts[owner]
        return None

    @property
    def alias_to_concepts(self) -> Dict[str, List[str]]:
        """Normalised name → concept IDs (in KB order)."""
        if self._alias_index is None:
            index: Dict[str, List[str]] = defaultdict(list)
            for name, cid in self.name_concept_pairs():
                index[name].append(cid)
            self._alias_index = dict(index)
        return self._alias_index

    def lookup(self, name: str) -> List[str]:
        """Concept IDs that have ``name`` (after normalisation) as a name."""
        return list(self.alias_to_concepts.get(normalize(name), []))

    @staticmethod
    def normalized_names(concept: Concept) -> List[str]:
        return _ordered_union(normalize(n) for n in concept.names)

    def name_concept_pairs(self) -> Iterator[Tuple[str, str]]:
        """Every distinct (normalised name, concept ID), in KB order: what an index encodes."""
        for concept in self._concepts.values():
            for name in self.normalized_names(concept):
                yield name, concept.concept_id

    # -- summaries ------------------------------------------------------------------
    def stats(self) -> KBStats:
        names = with_syn = pairs = 0
        for concept in self._concepts.values():
            n = len(self.normalized_names(concept))
            names += n
            with_syn += n >= 2
            pairs += pair_count(n)
        return KBStats(len(self._concepts), names, with_syn, pairs)

    def fingerprint(self) -> str:
        """A content hash, independent of record order: what an index is tied to (computed
        once; adding a concept recomputes it)."""
        if self._fingerprint is not None:
            return self._fingerprint
        digest = hashlib.sha256()
        for cid in sorted(self._concepts):
            digest.update(json.dumps(self._concepts[cid].to_dict(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
            digest.update(b"\n")
        self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    # -- files ----------------------------------------------------------------------
    def to_jsonl(self, path: PathLike) -> Path:
        """Write scispaCy's JSONL (gzip-compressed when the name ends in ``.gz``).

        Atomically (:func:`~spacy_sapbert.atomic.atomic_open`): a crash leaves the old file
        or the complete new one, never a shorter KB that still loads.
        """
        path = Path(path)
        with atomic_open(path, "wb") as raw:
            # gzip with mtime 0: the same KB gives the same bytes (a shipped KB does not change in git on a rebuild)
            stream = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if path.suffix == ".gz" else raw
            out = io.TextIOWrapper(stream, encoding="utf-8", newline="\n")
            for concept in self._concepts.values():
                out.write(json.dumps(concept.to_dict(), ensure_ascii=False) + "\n")
            out.flush()
            out.detach()  # leaves ``raw`` open: atomic_open syncs and closes it
            if stream is not raw:
                stream.close()  # the gzip trailer (CRC and length); a GzipFile on a fileobj does not close it
        return path

    @classmethod
    def from_jsonl(cls, path: PathLike, name: Optional[str] = None) -> "KnowledgeBase":
        """Read scispaCy's KB format: JSONL (``.jsonl``/``.jsonl.gz``) or a JSON list (``.json``)."""
        path = Path(path)
        if not path.is_file():
            raise InputError("knowledge base file not found", path)
        kb = cls(name=name if name is not None else _stem(path))
        first_line: Dict[str, int] = {}
        for line_no, record in _read_records(path):
            concept = _concept_from_record(record, path, line_no)
            first = first_line.setdefault(concept.concept_id, line_no)
            if first != line_no:
                raise InputError(f"duplicate concept_id {concept.concept_id!r} (first at line {first}); a KB file "
                                 "holds one record per concept: merge the two records or remove one",
                                 path, line_no, "concept_id")
            kb.add(concept)
        return kb

    # alias kept for symmetry with to_jsonl/from_jsonl
    load = from_jsonl
    save = to_jsonl


def _id_problem(concept_id: object) -> Optional[str]:
    """Why ``concept_id`` is no usable ID, or None: every ``|``-joined part must be a non-empty
    string without surrounding spaces, or resolve() could never find it."""
    if not isinstance(concept_id, str) or not concept_id.strip():
        return "missing or not a non-empty string"
    parts = concept_id.split(ID_SEPARATOR)
    if any(not part or part != part.strip() for part in parts):
        return (f"{concept_id!r} has an empty or space-padded ID between its '{ID_SEPARATOR}' separators "
                f"(IDs are joined as 'D012174{ID_SEPARATOR}OMIM:268000')")
    return None


def _canonical_id(cid: str) -> Optional[str]:
    """``cid`` in this project's canonical spelling (sources.ids holds the ID grammar), or None."""
    from .sources.ids import normalize_curie  # imported here: the sources package imports this module

    try:
        return normalize_curie(cid)
    except ValueError:  # a known prefix with a malformed local part: no such concept
        return None


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def _read_records(path: Path) -> Iterator[Tuple[int, object]]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise InputError(f"corrupt gzip data ({err})", path) from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte {err.start})", path, line) from err
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    if name.endswith(".json") and text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"invalid JSON: {err.msg}", path, err.lineno) from err
        for i, record in enumerate(records, 1):
            yield i, record
        return
    for line_no, line in enumerate(io.StringIO(text), 1):
        if not line.strip():
            continue
        try:
            yield line_no, json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"invalid JSON: {err.msg} (column {err.colno})", path, line_no) from err


def _concept_from_record(record: object, path: Path, line: int) -> Concept:
    if not isinstance(record, dict):
        raise InputError("expected a JSON object", path, line)
    unknown = set(record) - set(KB_FIELDS)
    if unknown:
        raise InputError(f"unknown field(s) {sorted(unknown)}; scispaCy's schema has {list(KB_FIELDS)}", path, line)
    problem = _id_problem(record.get("concept_id"))
    if problem is not None:
        raise InputError(problem, path, line, "concept_id")
    name = record.get("canonical_name")
    if not isinstance(name, str) or not name.strip():
        raise InputError("missing or not a non-empty string", path, line, "canonical_name")
    for field in ("aliases", "types"):
        value = record.get(field, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError("must be a list of strings", path, line, field)
    definition = record.get("definition")
    if definition is not None and not isinstance(definition, str):
        raise InputError("must be a string or null", path, line, "definition")
    return Concept(
        record["concept_id"], record["canonical_name"], list(record.get("aliases", [])),
        list(record.get("types", [])), definition,
    )
