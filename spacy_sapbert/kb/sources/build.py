"""The project's knowledge bases, built from an assets folder laid out like the data
mirror (``vocab/...``; see scripts/fetch_assets.py for where each file comes from).

* ``medic``: MEDIC 2012 in BioSyn's form (the dictionary BioSyn and SapBERT evaluate NCBI
  disease with), plus the CTD MEDIC 2017 concepts whose primary ID MEDIC 2012 lacks (they
  bring BC5CDR disease gold-ID coverage to 100%); MEDIC 2012's own concepts are unchanged.
* ``mesh``: MeSH 2024 descriptors under C (diseases), F03 (mental disorders) and D
  (chemicals and drugs), plus supplementary records when ``supp2024.xml`` is there.
* ``mesh-medic`` (the embedded default's, with the training mentions added) and
  ``mesh-medic-chem``: MeSH and MEDIC merged; the second with MeSH supplementary records and
  DrugBank's names (:mod:`.chemicals`).
* ``open-biomed``: MeSH, MEDIC, DO, ORDO, NCIt disease and HPO, merged along MONDO's
  exact-match tables and the vocabularies' own MeSH/OMIM/UMLS xrefs
  (:mod:`spacy_sapbert.kb.sources.merge`; the ontologies and equivalences it reads are in
  :mod:`.open_biomed`): an open stand-in for UMLS for pretraining.

Where each file lies in the assets folder is :mod:`.assets`.

Two steps fill in from a second source what the first lacks: the CTD concepts MEDIC 2012
does not have, and CTD's tree numbers for descriptors the MeSH tree table has no row for;
each fallback's share is checked (:mod:`.build_report`), since a truncated first source
would otherwise pass unnoticed.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

from tqdm import tqdm

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import ID_SEPARATOR, Concept, KnowledgeBase
from spacy_sapbert.kb.sources.assets import (CTD_DISEASES, DRUGBANK, GILDA_MESH, MEDIC_2012, MESH_DESCRIPTOR_XML,
                                             MESH_SUPPLEMENTARY_XML, MESH_TERMS, MESH_TREES, MONDO_TABLES,
                                             first_present, need_asset)
from spacy_sapbert.kb.sources.build_report import MAX_FALLBACK_SHARE, BuildReport, FallbackCheck
from spacy_sapbert.kb.sources.chemicals import join_drugs, read_drugbank, read_gilda_mesh
from spacy_sapbert.kb.sources.medic import read_ctd_diseases, read_ctd_tree_numbers, read_medic_biosyn
from spacy_sapbert.kb.sources.merge import merge_equivalent
from spacy_sapbert.kb.sources.mesh import TREE_NUMBERS_FROM_EXTRA, read_mesh_tsv, read_mesh_xml
from spacy_sapbert.kb.sources.open_biomed import equivalences, ontology_concepts
from spacy_sapbert.kb.sources.sssom import Mapping
from spacy_sapbert.kb.sources.stats import ReadStats

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


class _Steps:
    """A tqdm bar over a build's steps, each one timed into the log."""

    def __init__(self, name: str, total: int, show: bool) -> None:
        self.bar = tqdm(total=total, desc=f"kb {name}", unit="step", disable=not show)

    def run(self, label: str, fn: Callable[[], object]) -> object:
        self.bar.set_postfix_str(label)
        start = time.perf_counter()
        result = fn()
        logger.debug("%s: %.1fs", label, time.perf_counter() - start)
        self.bar.update(1)
        return result

    def close(self) -> None:
        self.bar.close()


def medic_concepts(assets: Path, report: BuildReport, steps: Optional[_Steps] = None) -> List[Concept]:
    """MEDIC 2012 (BioSyn form) plus the CTD 2017 concepts whose primary ID MEDIC 2012 lacks."""
    run = steps.run if steps else (lambda label, fn: fn())
    stats = ReadStats("medic-2012")
    medic_path = need_asset(assets, MEDIC_2012)
    concepts: List[Concept] = run("MEDIC 2012", lambda: list(read_medic_biosyn(medic_path, stats)))
    report.sources.append(stats)
    ctd_path = assets / CTD_DISEASES
    if ctd_path.is_file():
        ctd_stats = ReadStats("medic-ctd-2017")
        ctd = run("CTD MEDIC 2017", lambda: list(read_ctd_diseases(ctd_path, ctd_stats)))
        report.sources.append(ctd_stats)
        known = {cid for c in concepts for cid in c.ids}
        added = [c._replace(concept_id=ID_SEPARATOR.join(i for i in c.ids if i not in known))
                 for c in ctd if c.ids[0] not in known]
        concepts.extend(added)
        report.notes.append(f"medic: {len(added):,} CTD 2017 concepts added (primary ID not in MEDIC 2012; "
                            f"their IDs MEDIC 2012 already gives another concept left out); "
                            f"{len(ctd) - len(added):,} already there")
        check = FallbackCheck("medic: CTD 2017 fallback, concepts added", len(added), len(concepts))
        report.fallbacks.append(check)
        check.enforce(f"the CTD 2017 fallback would add {check.filled:,} of {check.total:,} concepts",
                      "a complete MEDIC 2012 leaves it 104 of 12,018, 0.9%", medic_path)
    else:
        report.notes.append(f"medic: {CTD_DISEASES} not in assets; MEDIC 2012 only")
    return concepts


def mesh_concepts(assets: Path, report: BuildReport, steps: Optional[_Steps] = None,
                  include_permuted: bool = False) -> List[Concept]:
    """MeSH 2024 chemicals and diseases: the mirror's TSV when present, else NLM's XML."""
    run = steps.run if steps else (lambda label, fn: fn())
    stats = ReadStats("mesh-2024")
    report.sources.append(stats)
    if (assets / MESH_TERMS).is_file():
        ctd = assets / CTD_DISEASES
        extra = run("CTD tree numbers", lambda: read_ctd_tree_numbers(ctd)) if ctd.is_file() else {}
        trees = need_asset(assets, MESH_TREES)
        concepts = run("MeSH 2024", lambda: list(read_mesh_tsv(assets / MESH_TERMS, trees,
                                                                include_permuted=include_permuted,
                                                                extra_tree_numbers=extra, stats=stats)))
        _check_tree_table(stats, trees, report)
    else:
        xml = first_present(assets, MESH_DESCRIPTOR_XML)
        if xml is None:
            raise InputError(f"asset missing: {MESH_TERMS} (or NLM's {MESH_DESCRIPTOR_XML[0]})", assets / MESH_TERMS)
        concepts = run("MeSH 2024 XML", lambda: list(read_mesh_xml(xml, include_permuted=include_permuted,
                                                                    stats=stats, progress=True)))
    supp = first_present(assets, MESH_SUPPLEMENTARY_XML)
    if supp is not None:
        supp_stats = ReadStats("mesh-2024-supplementary")
        report.sources.append(supp_stats)
        concepts.extend(run("MeSH supplementary XML", lambda: list(read_mesh_xml(supp, stats=supp_stats,
                                                                                  progress=True))))
    return concepts


def _check_tree_table(stats: ReadStats, trees: Path, report: BuildReport) -> None:
    """Descriptors the tree table has no row for are placed by CTD's tree numbers (diseases) or
    dropped (the rest): a table cut short would shrink the KB that way, without an error."""
    without_row = stats.filled[TREE_NUMBERS_FROM_EXTRA] + stats.skipped["descriptor_without_tree_number"]
    descriptors = stats.concepts + stats.skipped["descriptor_without_tree_number"] \
        + stats.skipped["descriptor_outside_categories"]
    check = FallbackCheck("mesh: descriptors without a row in the tree table (CTD tree numbers or dropped)",
                          without_row, descriptors)
    report.fallbacks.append(check)
    check.enforce(f"descriptors without a row in this tree table: {check.filled:,} of {check.total:,}",
                  "the complete table leaves 112 of 30,764, 0.4%", trees)


def build_medic(assets: PathLike, show_progress: bool = True) -> Tuple[KnowledgeBase, BuildReport]:
    report = BuildReport("medic")
    steps = _Steps("medic", 2, show_progress)
    try:
        kb = KnowledgeBase(medic_concepts(Path(assets), report, steps), name="medic")
    finally:
        steps.close()
    return kb, report


def build_mesh(assets: PathLike, show_progress: bool = True, include_permuted: bool = False
               ) -> Tuple[KnowledgeBase, BuildReport]:
    report = BuildReport("mesh")
    steps = _Steps("mesh", 2, show_progress)
    try:
        kb = KnowledgeBase(mesh_concepts(Path(assets), report, steps, include_permuted), name="mesh")
    finally:
        steps.close()
    return kb, report


def build_mesh_medic(assets: PathLike, show_progress: bool = True) -> Tuple[KnowledgeBase, BuildReport]:
    """MeSH 2024 chemicals and diseases merged with MEDIC: the KB of the embedded default,
    covering both labels of the NER model. MEDIC's concepts are MeSH disease descriptors
    (and OMIM entries), so concepts that share an ID become one concept with both
    vocabularies' synonyms; MEDIC's OMIM-only and supplementary concepts come along."""
    assets = Path(assets)
    report = BuildReport("mesh-medic")
    steps = _Steps("mesh-medic", 6, show_progress)
    try:
        sources = [("mesh", mesh_concepts(assets, report, steps)), ("medic", medic_concepts(assets, report, steps))]
        merged, report.merge = steps.run("merge", lambda: merge_equivalent(sources))
        kb = steps.run("index", lambda: KnowledgeBase(merged, name="mesh-medic"))
    finally:
        steps.close()
    return kb, report


def build_mesh_medic_chem(assets: PathLike, show_progress: bool = True) -> Tuple[KnowledgeBase, BuildReport]:
    """``mesh-medic`` with the chemical names MeSH's descriptors lack (:mod:`.chemicals`): the
    supplementary records of gilda's MeSH table as concepts, DrugBank's names as aliases of the
    MeSH chemicals they name."""
    assets = Path(assets)
    report = BuildReport("mesh-medic-chem")
    steps = _Steps("mesh-medic-chem", 9, show_progress)
    try:
        supplementary = ReadStats("gilda-mesh-supplementary")
        report.sources.append(supplementary)
        gilda = need_asset(assets, GILDA_MESH)
        sources = [("mesh", mesh_concepts(assets, report, steps)), ("medic", medic_concepts(assets, report, steps)),
                   ("mesh-supplementary", steps.run("gilda MeSH", lambda: list(read_gilda_mesh(gilda, supplementary))))]
        merged, report.merge = steps.run("merge", lambda: merge_equivalent(sources))
        drug_stats, join_stats = ReadStats("drugbank-open-vocabulary"), ReadStats("drugbank-join", unit="drugs")
        report.sources += [drug_stats, join_stats]
        drugbank = need_asset(assets, DRUGBANK)
        drugs = steps.run("DrugBank", lambda: list(read_drugbank(drugbank, drug_stats)))
        joined = steps.run("join DrugBank", lambda: join_drugs(merged, drugs, join_stats))
        kb = steps.run("index", lambda: KnowledgeBase(joined, name="mesh-medic-chem"))
    finally:
        steps.close()
    return kb, report


def build_open_biomed(assets: PathLike, show_progress: bool = True, umls_glue: bool = True,
                      mapping_labels: bool = True) -> Tuple[KnowledgeBase, BuildReport]:
    """The merged open vocabulary. ``umls_glue`` also merges along UMLS CUIs (MONDO's UMLS
    table and the CUIs DO, ORDO and HPO cite); it is what links HPO phenotypes to the rest."""
    assets = Path(assets)
    report = BuildReport("open-biomed")
    # steps: 2 MeSH, 2 MEDIC, 4 ontologies, the MONDO tables, merge, index
    steps = _Steps("open-biomed", 10 + len(MONDO_TABLES), show_progress)
    try:
        sources: List[Tuple[str, List[Concept]]] = []
        sources.append(("mesh", mesh_concepts(assets, report, steps)))
        sources.append(("medic", medic_concepts(assets, report, steps)))
        xrefs: Dict[str, List[Mapping]] = {"doid": [], "orphanet": [], "hpo": []}
        sources.extend(ontology_concepts(assets, report, steps.run, xrefs))
        mappings = equivalences(assets, report, steps.run, xrefs, umls_glue)
        merged, report.merge = steps.run("merge", lambda: merge_equivalent(sources, mappings, mapping_labels))
        kb = steps.run("index", lambda: KnowledgeBase(merged, name="open-biomed"))
    finally:
        steps.close()
    return kb, report


KB_BUILDERS: Dict[str, Callable[..., Tuple[KnowledgeBase, BuildReport]]] = {
    "medic": build_medic,
    "mesh": build_mesh,
    "open-biomed": build_open_biomed,
    "mesh-medic": build_mesh_medic,
    "mesh-medic-chem": build_mesh_medic_chem,
}


def build_kb(name: str, assets: PathLike, show_progress: bool = True) -> Tuple[KnowledgeBase, BuildReport]:
    """Build the KB called ``name`` (one of :data:`KB_BUILDERS`) from ``assets``."""
    if name not in KB_BUILDERS:
        raise ValueError(f"unknown knowledge base {name!r}; choose one of {sorted(KB_BUILDERS)}")
    assets = Path(assets)
    if not assets.is_dir():
        raise InputError("assets folder not found (run `spacy project run assets` first)", assets)
    start = time.perf_counter()
    kb, report = KB_BUILDERS[name](assets, show_progress=show_progress)
    report.seconds = time.perf_counter() - start
    report.kb = kb.stats()
    report.kb_merged_records = kb.merged_records
    if kb.merged_records:
        logger.warning("%s: %d source records merged into an earlier record with the same concept_id",
                       name, kb.merged_records)
    return kb, report


__all__ = ["BuildReport", "FallbackCheck", "KB_BUILDERS", "MAX_FALLBACK_SHARE", "build_kb", "build_medic", "build_mesh",
           "build_mesh_medic", "build_mesh_medic_chem", "build_open_biomed", "medic_concepts", "mesh_concepts"]
