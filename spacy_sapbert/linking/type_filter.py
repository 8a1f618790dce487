"""Which KB concepts a mention may link to, by their ``types``.

A DISEASE span linked to a chemical is wrong whatever its score, and name similarity alone
cannot tell them apart ("cocaine" is a name of the drug and the start of "cocaine abuse").
KB concepts carry types (mesh-medic: ``Disease``, ``Chemical``; open-biomed adds
``Phenotype``), and the ``label_to_types`` setting says which types each span label may link
to. This module turns type sets into row filters of a name index (:class:`TypeFilters`, built
once per type set) and span labels into type sets (:func:`label_type_sets`).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence

from spacy_sapbert.errors import InputError
from spacy_sapbert.index.row_filter import RowFilter
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.kb.concept import ID_SEPARATOR
from spacy_sapbert.kb.ids import is_newer_mesh
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

TypeSet = FrozenSet[str]
"""The types a mention may link to: a concept qualifies when it has any of them."""


def as_type_set(types: Any, position: int) -> Optional[TypeSet]:
    """``types`` (a collection of type names, or None for any type) as a :data:`TypeSet`.
    A bare string is refused rather than read as its letters; an empty collection too, since
    it would allow nothing (None is "any")."""
    if types is None:
        return None
    if isinstance(types, (str, bytes)) or not isinstance(types, Iterable):
        raise InputError(f"types of mention {position} must be a collection of type names or None, got "
                         f"{types!r} ({type(types).__name__}); wrap a single type in a list", field="types")
    found = frozenset(types)
    if not found or not all(isinstance(t, str) and t for t in found):
        raise InputError(f"types of mention {position} must be non-empty type names (None allows every type), "
                         f"got {types!r}", field="types")
    return found


class TypeFilters:
    """The :class:`RowFilter` of each type set over one index's rows, each built once (a pass
    over the KB's concepts and a mask over the rows) and kept: a pipe sees a handful of type
    sets, one per span label.

    ``skip_newer_mesh``: KB types whose concepts with a MeSH record of ten-character UI as primary ID
    (:func:`~spacy_sapbert.kb.ids.is_newer_mesh`) no search returns; a concept that also has another
    type searched for stays. BC5CDR, NCBI disease and CTD's MEDIC annotate with the MeSH of 2015 and
    before: where MeSH 2024 has a newer, narrower descriptor ("Hemorrhagic Stroke", D000083302), the
    search then finds the concept they use ("Stroke")."""

    def __init__(self, kb: KnowledgeBase, index: NameIndex, skip_newer_mesh: Iterable[str] = ()) -> None:
        self.kb = kb
        self.index = index
        self.skip_newer_mesh = frozenset(skip_newer_mesh)
        self._filters: Dict[Optional[TypeSet], RowFilter] = {}

    def rows(self, types: Optional[TypeSet]) -> Optional[RowFilter]:
        """The rows a search for concepts of ``types`` (None: any) may return; None when that is every row."""
        if types is None and not self.skip_newer_mesh:
            return None
        found = self._filters.get(types)
        if found is None:
            skipped = self.skip_newer_mesh

            def allowed(concept_id: str) -> bool:
                found = self.kb.types_of(concept_id)
                if found is None:
                    return False
                if skipped and is_newer_mesh(concept_id.partition(ID_SEPARATOR)[0]):  # its primary ID
                    found = tuple(t for t in found if t not in skipped)
                    if not found:
                        return False
                return types is None or not types.isdisjoint(found)

            found = RowFilter(self.index.row_mask(allowed))
            if found.count == 0 and types is not None:
                logger.warning("no concept of KB %r has any of the types %s (its types: %s): mentions restricted "
                               "to them get no candidates", self.kb.name, sorted(types), sorted(self.kb.all_types()))
            self._filters[types] = found
        return found

    def __len__(self) -> int:
        return len(self._filters)


def label_type_sets(label_to_types: Mapping[str, Sequence[str]], types_in_kb: FrozenSet[str],
                    kb_name: str) -> Dict[str, TypeSet]:
    """Span label → the type set its spans are searched with.

    A label mapped only to types that no concept of the KB has is left out, so its spans
    search every concept like an unmapped label, and this is logged (a warning, once per
    load): filtering them would link nothing, silently and forever, and the usual cause is a
    KB with other type names (the default map on a KB typed by UMLS semantic types). Types
    of a label that the KB lacks next to ones it has are just not found (DISEASE's
    ``Phenotype`` on mesh-medic): logged at debug level."""
    found: Dict[str, TypeSet] = {}
    for label, types in label_to_types.items():
        present = frozenset(types) & types_in_kb
        if not present:
            logger.warning("label_to_types maps span label %r to %s, which no concept of KB %r has (its types: "
                           "%s); %r spans are linked to every concept, unfiltered", label, list(types),
                           kb_name, sorted(types_in_kb) or "none", label)
            continue
        if len(present) < len(set(types)):
            logger.debug("KB %r has no concept of type(s) %s of label %r", kb_name,
                         sorted(set(types) - present), label)
        found[label] = present  # the same filter for labels that differ only by absent types
    return found


def types_of_labels(labels: Sequence[str], type_sets: Mapping[str, TypeSet]) -> List[Optional[TypeSet]]:
    """Per label its type set, None (every concept) for a label the map leaves out."""
    return [type_sets.get(label) for label in labels]


__all__ = ["TypeFilters", "TypeSet", "as_type_set", "label_type_sets", "types_of_labels"]
