"""Merging concepts of several vocabularies that exact-match mappings say are the same.

Union-find over identifiers: each concept joins its own IDs; each accepted mapping
joins two IDs (a MONDO ID in the middle is glue: MONDO:0005015 ↔ D003920 and
MONDO:0005015 ↔ DOID:9351 put the MeSH and DO concepts together). Two guards keep
one-to-many mappings from chaining unrelated concepts into giant components:

1. per mapping table, a subject mapped to several IDs of one vocabulary (Orphanet:124 →
   15 OMIM entries) or an object mapped from several subjects of one vocabulary is not
   an equivalence: all those mappings are skipped and counted;
2. a union that would put two concepts of the same source (two MeSH descriptors, two
   DO classes), or two different IDs of one vocabulary (two OMIM entries, two MONDO
   diseases), in one component is refused and counted: a component holds at most one
   concept per source and one ID per vocabulary, except the IDs a source concept itself
   lists as equivalent (a CTD disease with its several OMIM numbers).

Mappings are applied in the order given (curated MONDO tables first, then the
vocabularies' own xrefs), so the result is deterministic.
"""
from __future__ import annotations

import logging
from collections import Counter, OrderedDict, defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from spacy_sapbert.kb.ids import vocabulary
from spacy_sapbert.kb.knowledge_base import ID_SEPARATOR, Concept
from spacy_sapbert.kb.sources.sssom import Mapping

logger = logging.getLogger(__name__)
#: order of glue IDs (those of no member concept) inside a merged concept_id
ID_ORDER = ("MESH", "OMIM", "DOID", "Orphanet", "NCIT", "HP", "MONDO", "UMLS")


@dataclass
class MergeReport:
    """What the merge did: the numbers the build prints and docs/kb.md reports."""

    concepts_in: int = 0
    concepts_out: int = 0
    mappings_in: int = 0
    mappings_used: int = 0
    """Mappings that joined two components holding concepts (i.e. caused a merge)."""
    skipped: Counter = field(default_factory=Counter)
    """Mapping-table guard: reason → mappings skipped."""
    refused: Counter = field(default_factory=Counter)
    """Source-conflict guard: reason → unions refused."""
    component_sizes: Counter = field(default_factory=Counter)
    """Number of member concepts → number of merged concepts with that many."""
    largest_ids: int = 0
    largest_concept_id: str = ""
    names_from_mapping_labels: int = 0

    @property
    def merges(self) -> int:
        return self.concepts_in - self.concepts_out

    def as_dict(self) -> Dict[str, object]:
        return {
            "concepts_in": self.concepts_in, "concepts_out": self.concepts_out, "merges": self.merges,
            "mappings_in": self.mappings_in, "mappings_used": self.mappings_used,
            "skipped": dict(sorted(self.skipped.items())), "refused": dict(sorted(self.refused.items())),
            "component_sizes": {str(k): v for k, v in sorted(self.component_sizes.items())},
            "largest_ids": self.largest_ids, "largest_concept_id": self.largest_concept_id,
            "names_from_mapping_labels": self.names_from_mapping_labels,
        }

    def lines(self) -> List[str]:
        """The report as a few readable lines for a terminal."""
        def grouped(counter: Counter) -> str:
            return "; ".join(f"{reason} {count:,}" for reason, count in sorted(counter.items()))

        sizes = ", ".join(f"{k}: {v:,}" for k, v in sorted(self.component_sizes.items()))
        return [
            f"merge: {self.concepts_in:,} concepts -> {self.concepts_out:,} ({self.merges:,} merged away); "
            f"{self.mappings_used:,} of {self.mappings_in:,} mappings joined concepts; "
            f"{self.names_from_mapping_labels:,} names from mapping labels",
            f"merge guard, one-to-many or many-to-one within a table: {sum(self.skipped.values()):,} mappings "
            f"skipped ({grouped(self.skipped)})",
            f"merge guard, two concepts of one source or two IDs of one vocabulary: "
            f"{sum(self.refused.values()):,} unions refused ({grouped(self.refused)})",
            f"merged concepts by number of source concepts: {sizes}; largest has {self.largest_ids} IDs: "
            f"{self.largest_concept_id}",
        ]

    def summary(self) -> str:
        return "\n".join(self.lines())


class _UnionFind:
    """Union-find whose components remember their member concepts by source and the
    vocabularies of the IDs they hold, to refuse unions that would chain distinct concepts."""

    def __init__(self) -> None:
        self.parent: Dict[str, str] = {}
        self.members: Dict[str, Dict[str, int]] = {}
        self.vocabularies: Dict[str, Set[str]] = {}

    def add(self, node: str, members: Optional[Dict[str, int]] = None) -> None:
        if node not in self.parent:
            self.parent[node] = node
            self.members[node] = dict(members or {})
            self.vocabularies[node] = set() if node.startswith("#") else {vocabulary(node)}

    def find(self, node: str) -> str:
        self.add(node)
        parent = self.parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union(self, a: str, b: str, forced: bool = False) -> Tuple[bool, Optional[str]]:
        """Join the components of a and b. Returns (joined two concept-holding components,
        conflict or None); on a conflict nothing changes.

        A conflict is two member concepts of one source, or (unless ``forced``: a concept
        joining its own IDs) two different IDs of one vocabulary: MONDO:A - D1 - MONDO:B
        would say two MONDO diseases are one."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False, None
        ma, mb = self.members[ra], self.members[rb]
        clash = sorted(set(ma) & set(mb))
        if clash:
            return False, f"{clash[0]} concepts"
        if not forced:
            ids_clash = sorted(self.vocabularies[ra] & self.vocabularies[rb])
            if ids_clash:
                return False, f"{ids_clash[0]} IDs"
        if len(ma) < len(mb):
            ra, rb, ma, mb = rb, ra, mb, ma
        self.parent[rb] = ra
        both = bool(ma) and bool(mb)
        ma.update(mb)
        self.vocabularies[ra] |= self.vocabularies.pop(rb)
        del self.members[rb]
        return both, None


def _guarded(mappings: Sequence[Mapping], report: MergeReport) -> List[Mapping]:
    """Drop one-to-many and many-to-one mappings, per mapping source (table or xref set)."""
    by_source: "OrderedDict[str, List[Mapping]]" = OrderedDict()
    for m in mappings:
        by_source.setdefault(m.source, []).append(m)
    kept: List[Mapping] = []
    for source, rows in by_source.items():
        targets: Dict[Tuple[str, str], Set[str]] = defaultdict(set)
        origins: Dict[Tuple[str, str], Set[str]] = defaultdict(set)
        for m in rows:
            targets[m.subject_id, vocabulary(m.object_id)].add(m.object_id)
            origins[m.object_id, vocabulary(m.subject_id)].add(m.subject_id)
        for m in rows:
            if m.subject_id == m.object_id:
                continue
            if len(targets[m.subject_id, vocabulary(m.object_id)]) > 1:
                report.skipped[f"{source}: one-to-many"] += 1
            elif len(origins[m.object_id, vocabulary(m.subject_id)]) > 1:
                report.skipped[f"{source}: many-to-one"] += 1
            else:
                kept.append(m)
    return kept


def merge_equivalent(sources: Sequence[Tuple[str, Iterable[Concept]]], mappings: Sequence[Mapping] = (),
                     mapping_labels: bool = True) -> Tuple[List[Concept], MergeReport]:
    """Merge concepts of ``sources`` (name, concepts; earlier sources take precedence) along
    ``mappings``. A merged concept's ID joins its members' IDs (the first source's first),
    then the glue IDs (MONDO, UMLS, OMIM numbers known only from mappings); its canonical
    name is the first member's, all members' names are its aliases, and with
    ``mapping_labels`` the labels the mapping tables give glue IDs (MONDO's disease
    names) are added as aliases too."""
    report = MergeReport()
    uf = _UnionFind()
    concepts: List[Tuple[str, Concept]] = []
    for source, items in sources:
        for concept in items:
            k = len(concepts)
            concepts.append((source, concept))
            node = f"#{k}"
            uf.add(node, {source: k})
            for cid in concept.ids:
                _, clash = uf.union(node, cid, forced=True)
                if clash is not None:
                    report.refused[f"ID shared by two {clash}"] += 1
    report.concepts_in = len(concepts)
    report.mappings_in = len(mappings)
    labels: Dict[str, List[str]] = defaultdict(list)
    for m in _guarded(mappings, report):
        joined, clash = uf.union(m.subject_id, m.object_id)
        if clash is not None:
            report.refused[f"{m.source}: would join two {clash}"] += 1
            continue
        report.mappings_used += joined
        if mapping_labels:
            for node, label in ((m.subject_id, m.subject_label), (m.object_id, m.object_label)):
                if label and label not in labels[node]:
                    labels[node].append(label)
    concept_nodes: Set[str] = {f"#{k}" for k in range(len(concepts))}
    component_ids: Dict[str, List[str]] = defaultdict(list)
    for node in uf.parent:
        if node not in concept_nodes:
            component_ids[uf.find(node)].append(node)
    member_ids: Set[str] = {cid for _, c in concepts for cid in c.ids}
    merged: List[Concept] = []
    done: Set[str] = set()
    for k in range(len(concepts)):
        root = uf.find(f"#{k}")
        if root in done:
            continue
        done.add(root)
        members = sorted(uf.members[root].values())
        merged.append(_merged_concept([concepts[i] for i in members], component_ids[root], member_ids, labels, uf,
                                      root, report))
    report.concepts_out = len(merged)
    logger.debug("%s", report.summary())
    return merged, report


def _merged_concept(members: List[Tuple[str, Concept]], component: List[str], member_ids: Set[str],
                    labels: Dict[str, List[str]], uf: _UnionFind, root: str, report: MergeReport) -> Concept:
    ids: List[str] = []
    for _, concept in members:
        ids.extend(cid for cid in concept.ids if uf.find(cid) == root)
    glue = sorted((n for n in component if n not in member_ids),
                  key=lambda n: (ID_ORDER.index(vocabulary(n)) if vocabulary(n) in ID_ORDER else len(ID_ORDER), n))
    ids = list(OrderedDict.fromkeys(ids + glue))
    first = members[0][1]
    names: List[str] = []
    for _, concept in members:
        names.extend(concept.names)
    known = set(names)
    for node in glue:
        for label in labels.get(node, ()):
            if label not in known:
                known.add(label)
                names.append(label)
                report.names_from_mapping_labels += 1
    types: List[str] = []
    for _, concept in members:
        types.extend(t for t in concept.types if t not in types)
    definition = next((c.definition for _, c in members if c.definition), None)
    report.component_sizes[len(members)] += 1
    if len(ids) > report.largest_ids:
        report.largest_ids, report.largest_concept_id = len(ids), ID_SEPARATOR.join(ids)
    aliases = [n for n in OrderedDict.fromkeys(names) if n != first.canonical_name]
    return Concept(ID_SEPARATOR.join(ids), first.canonical_name, aliases, types, definition)
