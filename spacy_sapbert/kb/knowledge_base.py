"""KnowledgeBase: the concepts a linker links to, found by ID (any of a concept's equivalent
IDs) and by normalised name.

A concept is a :class:`~spacy_sapbert.kb.concept.Concept` (scispaCy's ``Entity``); KB files are
scispaCy's JSONL (:mod:`spacy_sapbert.kb.files`). :meth:`KnowledgeBase.resolve` finds a
concept by any of its ``|``-joined IDs, or by the whole joined string (what ``span.kb_id_`` holds).

A KB file holds one record per concept: a ``concept_id`` that appears twice is an error
naming both lines, since a silent merge would hide a broken export. Building a KB in
code merges records of one concept on purpose, and counts them
(:attr:`KnowledgeBase.merged_records`) so a build can report the merges.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import ID_SEPARATOR, Concept, id_problem, merge_concepts, ordered_union
from spacy_sapbert.kb.files import KB_FIELDS, kb_name_of, read_bytes, read_concepts, read_records, write_jsonl
from spacy_sapbert.kb.ids import normalize_curie
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.kb.stored import StoredConcepts
from spacy_sapbert.util.gc_pause import gc_paused

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
MAX_PAIRS_PER_CONCEPT = 50


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
        self._concepts: Mapping[str, Concept] = {}
        """A dict; a KB read from its own file keeps :class:`StoredConcepts` until something is added."""
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
        problem = id_problem(concept.concept_id)
        if problem is not None:
            raise ValueError(f"concept_id {problem}: {concept!r}")
        if not isinstance(concept.canonical_name, str) or not concept.canonical_name.strip():
            raise ValueError(f"concept without a canonical name: {concept!r}")
        self._insert(concept)

    def _insert(self, concept: Concept) -> None:
        """:meth:`add` without its checks, for concepts checked already (a KB file's records, by
        :func:`~spacy_sapbert.kb.files.concept_from_record`: the same ID and name rules)."""
        if not isinstance(self._concepts, dict):  # its own dicts: a copy of the KB made before this is left as it was
            self._concepts, self._id_to_concept = dict(self._concepts.items()), dict(self._id_to_concept)
        existing = self._concepts.get(concept.concept_id)
        if existing is None:
            concept = Concept(
                concept.concept_id,
                concept.canonical_name,
                [a for a in ordered_union(concept.aliases) if a != concept.canonical_name],
                ordered_union(concept.types),
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

    def types_of(self, concept_id: str) -> Optional[Tuple[str, ...]]:
        """The types of the concept whose ``concept_id`` this is (None: no such concept); for a KB read
        from its own file, without reading the concept's record."""
        if isinstance(self._concepts, StoredConcepts):
            return self._concepts.types_of(concept_id)
        concept = self._concepts.get(concept_id)
        return None if concept is None else tuple(concept.types)

    def all_types(self) -> FrozenSet[str]:
        """Every type some concept has."""
        if isinstance(self._concepts, StoredConcepts):
            return self._concepts.all_types()
        return frozenset(t for concept in self._concepts.values() for t in concept.types)

    def add_former_id(self, former_id: str, concept_id: str) -> bool:
        """Let :meth:`resolve` find ``concept_id``'s concept by ``former_id``, an identifier another
        version of the vocabulary gave it (BC5CDR's annotations name MeSH 2015 supplementary
        records that MeSH 2024 has as descriptors). Not saved, not in the fingerprint: names and
        rows do not change. An ID the KB already resolves is left alone (False)."""
        if concept_id not in self._concepts or self.resolve_id(former_id) is not None:
            return False
        self._id_to_concept[former_id] = concept_id
        return True

    def resolve(self, any_id: str) -> Optional[Concept]:
        """The concept that carries ``any_id`` as its primary or an equivalent ID.

        ``any_id`` may be a joined ID (``D012174|OMIM:268000``, what ``span.kb_id_`` holds):
        the whole string is tried first, then each ``|``-separated part in order. Each is
        looked up as written, then in the canonical spelling of
        :func:`~spacy_sapbert.kb.ids.normalize_curie` (``MESH:D012174`` → ``D012174``).
        """
        owner = self.resolve_id(any_id)
        return None if owner is None else self._concepts[owner]

    def resolve_id(self, any_id: str) -> Optional[str]:
        """The ``concept_id`` of the concept :meth:`resolve` finds, without reading its record."""
        if not isinstance(any_id, str):
            return None
        candidates = [any_id]
        if ID_SEPARATOR in any_id:
            candidates.extend(any_id.split(ID_SEPARATOR))
        for candidate in candidates:
            owner = self._resolve_one(candidate.strip())
            if owner is not None:
                return owner
        return None

    def _resolve_one(self, cid: str) -> Optional[str]:
        if not cid:
            return None
        found = self._owner(cid)
        if found is None:  # the canonical spelling only when the ID as written is unknown (most are known)
            key = _canonical_id(cid)
            if key is not None and key != cid:
                found = self._owner(key)
        return found

    def _owner(self, key: str) -> Optional[str]:
        if key in self._concepts:  # a concept whose whole ID this is wins over one that lists it
            return key
        return self._id_to_concept.get(key)

    @property
    def alias_to_concepts(self) -> Dict[str, List[str]]:
        """Normalised name → concept IDs (in KB order)."""
        if self._alias_index is None:
            index: Dict[str, List[str]] = defaultdict(list)
            for name, cid in self.name_concept_pairs():
                index[name].append(cid)
            self._alias_index = dict(index)
        return self._alias_index

    @staticmethod
    def normalized_names(concept: Concept) -> List[str]:
        return ordered_union(normalize(n) for n in concept.names)

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

    @classmethod
    def from_own_jsonl(cls, path: PathLike, fingerprint: str, name: Optional[str] = None) -> "KnowledgeBase":
        """A KB file that :meth:`to_jsonl` wrote, known to be unchanged since (its digest is the one
        recorded when it was written: :func:`~spacy_sapbert.pipes.linker_parts.saved_kb`): its records
        are this class's concepts already (checked, merged, de-duplicated), so they are taken as they
        are, with the fingerprint recorded for them. Any other file goes through :meth:`from_jsonl`."""
        path = Path(path)
        kb = cls(name=name if name is not None else kb_name_of(path))
        raw = read_bytes(path)
        stored = StoredConcepts.parse(raw)
        if stored is not None:  # records read when asked for; an ID is found by its own key first (_owner)
            kb._concepts = stored
            for concept_id in stored:  # the first concept that lists an ID keeps it, as _insert does
                if ID_SEPARATOR in concept_id:
                    for cid in concept_id.split(ID_SEPARATOR):
                        kb._id_to_concept.setdefault(cid, concept_id)
            kb._fingerprint = fingerprint
            return kb
        concepts, id_to_concept = kb._concepts, kb._id_to_concept
        assert isinstance(concepts, dict)
        with gc_paused():
            for _, record in read_records(path, raw):
                concept_id = record["concept_id"]
                concepts[concept_id] = Concept(concept_id, record["canonical_name"], record["aliases"], record["types"],
                                               record["definition"])
                if ID_SEPARATOR in concept_id:  # most have one ID: no split, no tuple (45,125 records of the default)
                    for cid in concept_id.split(ID_SEPARATOR):
                        id_to_concept.setdefault(cid, concept_id)
                else:
                    id_to_concept.setdefault(concept_id, concept_id)
        kb._fingerprint = fingerprint
        return kb

    # -- files ----------------------------------------------------------------------
    def to_jsonl(self, path: PathLike) -> Path:
        """Write scispaCy's JSONL (gzip-compressed when the name ends in ``.gz``), atomically:
        a crash leaves the old file or the complete new one (:func:`~spacy_sapbert.kb.files.write_jsonl`)."""
        return write_jsonl(self._concepts.values(), path)

    @classmethod
    def from_jsonl(cls, path: PathLike, name: Optional[str] = None) -> "KnowledgeBase":
        """Read scispaCy's KB format: JSONL (``.jsonl``/``.jsonl.gz``) or a JSON list (``.json``)."""
        path = Path(path)
        if not path.is_file():
            raise InputError("knowledge base file not found", path)
        kb = cls(name=name if name is not None else kb_name_of(path))
        first_line: Dict[str, int] = {}
        with gc_paused():
            for line_no, concept in read_concepts(path):
                first = first_line.setdefault(concept.concept_id, line_no)
                if first != line_no:
                    raise InputError(f"duplicate concept_id {concept.concept_id!r} (first at line {first}); a KB "
                                     "file holds one record per concept: merge the two records or remove one",
                                     path, line_no, "concept_id")
                kb._insert(concept)
        return kb


def _canonical_id(cid: str) -> Optional[str]:
    """``cid`` in this project's canonical spelling (:mod:`spacy_sapbert.kb.ids` holds the ID grammar), or None."""
    try:
        return normalize_curie(cid)
    except ValueError:  # a known prefix with a malformed local part: no such concept
        return None


__all__ = ["Concept", "ID_SEPARATOR", "KB_FIELDS", "KBStats", "KnowledgeBase", "MAX_PAIRS_PER_CONCEPT", "merge_concepts",
           "pair_count"]
