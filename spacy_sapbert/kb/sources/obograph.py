"""OBO Graphs JSON (``doid.json``, ORDO and NCIt as MONDO ships them): ``graphs[].nodes[]``
with ``id`` (a PURL), ``lbl``, ``type`` and ``meta`` (definition, synonyms, xrefs,
deprecated, basicPropertyValues), and ``graphs[].edges[]`` (``is_a`` among them).

Obsolete classes are recognised every way these files mark them: ``meta.deprecated``,
a label starting with "obsolete", an EFO ``reason_for_obsolescence`` property (ORDO),
or a place under ``oboInOwl:ObsoleteClass`` (ORDO). Classes of imported ontologies
(DO imports CHEBI, UBERON, SO, ...) are counted as ``class_of_other_ontology``.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.ids import normalize_curie, parse_id, uri_to_curie
from spacy_sapbert.kb.knowledge_base import Concept
from spacy_sapbert.kb.sources.hierarchy import descendants
from spacy_sapbert.kb.sources.sssom import Mapping
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import load_json

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
OBSOLETE_CLASS = "oboInOwl#ObsoleteClass"
OBSOLESCENCE_PROPERTY = "reason_for_obsolescence"


def _curie(node_id: str) -> str:
    if node_id.endswith(OBSOLETE_CLASS) or node_id == "ObsoleteClass":
        return "ObsoleteClass"
    return uri_to_curie(node_id)


def _is_obsolete(node: dict) -> bool:
    meta = node.get("meta") or {}
    if meta.get("deprecated"):
        return True
    if str(node.get("lbl", "")).strip().lower().startswith("obsolete"):
        return True
    return any(OBSOLESCENCE_PROPERTY in str(p.get("pred", "")) for p in meta.get("basicPropertyValues") or [])


def read_obograph(path: PathLike, id_prefix: Optional[str] = None, roots: Sequence[str] = (),
                  synonym_preds: Sequence[str] = ("hasExactSynonym",), types: Sequence[str] = (),
                  source: Optional[str] = None, stats: Optional[ReadStats] = None,
                  xrefs: Optional[List[Mapping]] = None) -> Iterator[Concept]:
    """Concepts (classes) of an OBO Graphs JSON file.

    ``id_prefix`` keeps the classes of one ID space (``DOID``, ``Orphanet``, ``NCIT``);
    ``roots`` keeps only classes under those (NCIt: ``NCIT:C7057`` "Disease, Disorder or
    Finding" drops the genes and anatomy the disease subset drags in; ORDO:
    ``Orphanet:C001`` "clinical entity" drops genes, geography, inheritance modes).
    Synonyms with other predicates (related, narrow, broad) are counted, not kept; with
    ``xrefs`` given, each class's cross-references are appended to it.
    """
    source = source or (id_prefix or "obograph").lower()
    stats = ensure_stats(stats, source, path)
    nodes, parents = _classes_and_parents(load_json(path), path)
    obsolete_branch: Set[str] = descendants(parents, ["ObsoleteClass"])
    keep: Optional[Set[str]] = descendants(parents, roots) if roots else None
    for curie, node in nodes.items():
        stats.records += 1
        if curie == "ObsoleteClass":
            stats.skip("obsolete_class")
            continue
        if id_prefix is not None and curie.partition(":")[0] != id_prefix:
            stats.skip("class_of_other_ontology")
            continue
        concept_id = parse_id(curie, path, None, f"node {node['id']}")
        if _is_obsolete(node) or curie in obsolete_branch:
            stats.skip("obsolete_class")
            continue
        if keep is not None and curie not in keep:
            stats.skip("class_outside_roots")
            continue
        concept = _concept(concept_id, node, synonym_preds, types, stats)
        if concept is None:
            continue
        if xrefs is not None:
            xrefs.extend(_xrefs(concept_id, node, source, stats))
        stats.kept(len(concept.names))
        yield concept
    logger.debug("%s", stats.summary())


def _classes_and_parents(document: object, path: PathLike) -> Tuple["OrderedDict[str, dict]", Dict[str, List[str]]]:
    """The classes of every graph by CURIE (the first node of each), and each class's ``is_a`` parents."""
    if not isinstance(document, dict) or not isinstance(document.get("graphs"), list):
        raise InputError("not an OBO Graphs document (no top-level 'graphs' list)", path, field="graphs")
    nodes: "OrderedDict[str, dict]" = OrderedDict()
    parents: Dict[str, List[str]] = {}
    for g, graph in enumerate(document["graphs"]):
        if not isinstance(graph, dict):
            raise InputError("graph is not a JSON object", path, field=f"graphs[{g}]")
        for n, node in enumerate(graph.get("nodes") or []):
            if not isinstance(node, dict) or not isinstance(node.get("id"), str):
                raise InputError("node without a string 'id'", path, field=f"graphs[{g}].nodes[{n}].id")
            if node.get("type", "CLASS") != "CLASS":
                continue  # properties and individuals are no concepts
            nodes.setdefault(_curie(node["id"]), node)
        for e, edge in enumerate(graph.get("edges") or []):
            if not isinstance(edge, dict) or not all(isinstance(edge.get(k), str) for k in ("sub", "pred", "obj")):
                raise InputError("edge needs string 'sub', 'pred' and 'obj'", path, field=f"graphs[{g}].edges[{e}]")
            if edge["pred"] == "is_a":
                parents.setdefault(_curie(edge["sub"]), []).append(_curie(edge["obj"]))
    return nodes, parents


def _concept(concept_id: str, node: dict, synonym_preds: Sequence[str], types: Sequence[str],
             stats: ReadStats) -> Optional[Concept]:
    """The concept of a class that is kept: its label, synonyms of ``synonym_preds``, definition."""
    label = str(node.get("lbl") or "").strip()
    if not label:
        stats.skip("class_without_label")
        return None
    meta = node.get("meta") or {}
    names = [label]
    for synonym in meta.get("synonyms") or []:
        pred = str(synonym.get("pred", ""))
        if pred in synonym_preds:
            names.append(str(synonym.get("val", "")).strip())
        else:
            stats.skip(f"synonym_{pred or 'without_predicate'}")
    names = list(OrderedDict.fromkeys(n for n in names if n))
    definition = ((meta.get("definition") or {}).get("val") or "").strip() or None
    return Concept(concept_id, names[0], names[1:], list(types), definition)


def _xrefs(concept_id: str, node: dict, source: str, stats: ReadStats) -> Iterator[Mapping]:
    for xref in (node.get("meta") or {}).get("xrefs") or []:
        try:
            target = normalize_curie(str(xref.get("val", "")))
        except ValueError:
            stats.skip("xref_malformed")
            continue
        if target is not None and target != concept_id:
            yield Mapping(concept_id, target, "oboInOwl:hasDbXref", source=source)
