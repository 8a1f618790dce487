"""One KB concept, in scispaCy's shape, and the rules for its identifiers and for merging two
records of it.

A ``concept_id`` may hold several equivalent identifiers joined by ``|`` (MEDIC concepts
that carry both a MeSH and an OMIM ID, concepts merged across vocabularies); the first one
is the primary ID.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

ID_SEPARATOR = "|"


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
        return ordered_union([self.canonical_name], self.aliases)

    def to_dict(self) -> Dict[str, object]:
        return {
            "concept_id": self.concept_id,
            "canonical_name": self.canonical_name,
            "aliases": list(self.aliases),
            "types": list(self.types),
            "definition": self.definition,
        }


def ordered_union(*lists: Iterable[str]) -> List[str]:
    """The non-empty values of ``lists``, each once, in order of first appearance."""
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
    aliases = [a for a in ordered_union(first.aliases, [second.canonical_name], second.aliases)
               if a != first.canonical_name]
    return Concept(
        concept_id=first.concept_id,
        canonical_name=first.canonical_name,
        aliases=aliases,
        types=ordered_union(first.types, second.types),
        definition=first.definition or second.definition,
    )


def id_problem(concept_id: object) -> Optional[str]:
    """Why ``concept_id`` is no usable ID, or None: every ``|``-joined part must be a non-empty
    string without surrounding spaces, or a lookup by ID could never find it."""
    if not isinstance(concept_id, str) or not concept_id.strip():
        return "missing or not a non-empty string"
    if ID_SEPARATOR not in concept_id and concept_id == concept_id.strip():
        return None  # one ID, no padding: most records (the check runs on each of a KB's records)
    parts = concept_id.split(ID_SEPARATOR)
    if any(not part or part != part.strip() for part in parts):
        return (f"{concept_id!r} has an empty or space-padded ID between its '{ID_SEPARATOR}' separators "
                f"(IDs are joined as 'D012174{ID_SEPARATOR}OMIM:268000')")
    return None


__all__ = ["Concept", "ID_SEPARATOR", "id_problem", "merge_concepts", "ordered_union"]
