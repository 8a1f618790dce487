"""Names from another knowledge base, given to the concepts it shares an identifier with.

The default KB is built from MeSH, MEDIC and DrugBank; DO, NCIt, ORDO and HPO word the same
diseases and phenotypes otherwise ("Ptosis" for Blepharoptosis, "Hypercalcaemia", "Cardiac
defects"), and ``open-biomed`` has merged those vocabularies with MeSH along exact-match
mappings. :func:`add_names_by_id` lends a KB the names of another's concepts that carry one of
its concept's IDs, without adding a concept or moving a name that already has an owner: the
linker then finds more wordings, and nothing it found before changes owner. Measured on the
embedded default (docs/kb.md): more wordings reach their concept, but on BC5CDR dev and NCBI
dev the extra links also land on spans the annotators leave untagged, so the default does not
carry these names.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Collection, Dict, Optional, Tuple

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize


COUNTS = ("concepts_lending", "concepts_sharing_no_id", "concepts_of_other_types", "concepts_joining_several",
          "names_already_in_base", "names_too_short", "names_for_several_base_concepts")
"""What the report counts, each present (0 when nothing was)."""


def add_names_by_id(base: KnowledgeBase, other: KnowledgeBase, types: Optional[Collection[str]] = None,
                    min_chars: int = 5) -> Tuple[KnowledgeBase, Dict[str, Any]]:
    """``base`` with the names of ``other``'s concepts added to the ``base`` concept they share an ID with,
    and counts of what was added and left out.

    A concept of ``other`` lends its names only when its IDs lead to exactly one ``base`` concept, and that
    one has one of ``types`` (when given; each must be a type of ``base``): one whose IDs lead to two ``base``
    concepts, of any types, is a merge ``base`` does not make, so it lends nothing. A name is left out
    when ``base`` has it already (for any concept: its owner stays), when it normalises to fewer than
    ``min_chars`` characters (abbreviations such as "CHD" or "MD" name other concepts in other texts),
    or when ``other`` would give it to two ``base`` concepts. Names are compared normalised
    (:func:`~spacy_sapbert.kb.normalize.normalize`); the first spelling seen is the one added."""
    wanted = set(types) if types is not None else None
    if wanted is not None and wanted - base.all_types():
        raise InputError(f"{', '.join(sorted(wanted - base.all_types()))}: no concept of {base.name or 'the KB'} has "
                         f"this type; its types are {', '.join(sorted(base.all_types()))}", field="--types")
    counts: Counter = Counter({key: 0 for key in COUNTS})
    proposed: Dict[str, Dict[str, str]] = defaultdict(dict)  # normalised name -> {base concept: spelling}
    known = base.alias_to_concepts
    for concept in other:
        shared = {base.resolve_id(cid) for cid in concept.ids} - {None}
        if len(shared) != 1:
            counts["concepts_joining_several" if shared else "concepts_sharing_no_id"] += 1
            continue
        (target,) = shared
        if wanted is not None and not wanted & set(base.types_of(target) or ()):
            counts["concepts_of_other_types"] += 1
            continue
        counts["concepts_lending"] += 1
        for name in concept.names:
            key = normalize(name)
            if not key or key in known:
                counts["names_already_in_base"] += 1
            elif len(key) < min_chars:
                counts["names_too_short"] += 1
            else:
                proposed[key].setdefault(target, name)
    added: Dict[str, list] = defaultdict(list)
    for key, owners in proposed.items():
        if len(owners) > 1:
            counts["names_for_several_base_concepts"] += 1
            continue
        (target, spelling), = owners.items()
        added[target].append(spelling)
    extended = KnowledgeBase(iter(base), name=f"{base.name}+{other.name}")
    for target, names in added.items():
        concept = base[target]
        extended.add(Concept(concept.concept_id, concept.canonical_name, names))
    report: Dict[str, Any] = {
        "base": base.name, "other": other.name, "types": sorted(wanted) if wanted is not None else None,
        "min_chars": min_chars, "names_added": sum(len(v) for v in added.values()),
        "concepts_gaining_names": len(added), **dict(sorted(counts.items())),
        "kb_stats_before": base.stats().as_dict(), "kb_stats_after": extended.stats().as_dict()}
    return extended, report


__all__ = ["COUNTS", "add_names_by_id"]
