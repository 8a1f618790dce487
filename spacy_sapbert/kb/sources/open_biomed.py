"""What open-biomed reads besides MeSH and MEDIC: the disease ontologies (DO, ORDO, NCIt, HPO),
each cut down at its roots, and the equivalences the merge follows (MONDO's exact-match tables
and the ontologies' own cross-references).

Apart from :mod:`.build` because only open-biomed reads them; :func:`~.build.build_open_biomed`
runs these steps between the MeSH/MEDIC ones and the merge.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterable, List, Sequence, Tuple

from spacy_sapbert.kb.ids import vocabulary
from spacy_sapbert.kb.knowledge_base import Concept
from spacy_sapbert.kb.sources.assets import DOID, HPO, MONDO_TABLE, MONDO_TABLES, NCIT, ORDO, need_asset
from spacy_sapbert.kb.sources.build_report import BuildReport
from spacy_sapbert.kb.sources.obo import read_obo
from spacy_sapbert.kb.sources.obograph import read_obograph
from spacy_sapbert.kb.sources.sssom import Mapping, read_sssom
from spacy_sapbert.kb.sources.stats import ReadStats

#: runs one step of a build: (label, work) -> the work's result
StepRunner = Callable[[str, Callable[[], object]], object]
#: cross-references of each vocabulary that count as equivalences for the merge
XREF_VOCABULARIES = {"doid": ("MESH", "OMIM", "UMLS"), "orphanet": ("MESH", "OMIM", "UMLS"), "hpo": ("UMLS",)}
#: roots that cut the ontologies down to diseases (and HPO's phenotypic abnormalities)
ORDO_ROOTS = ("Orphanet:C001",)      # clinical entity (not genes, geography, inheritance)
NCIT_ROOTS = ("NCIT:C7057",)         # Disease, Disorder or Finding (not genes, anatomy, drugs)
HPO_ROOTS = ("HP:0000118",)          # Phenotypic abnormality (not modes of inheritance, frequencies)


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


def ontology_concepts(assets: Path, report: BuildReport, run: StepRunner,
                      xrefs: Dict[str, List[Mapping]]) -> List[Tuple[str, List[Concept]]]:
    """The concepts of each of :data:`ONTOLOGIES`; the cross-references of those in ``xrefs`` go there."""
    sources = []
    for source, path, reader in ONTOLOGIES:
        stats = ReadStats(source)
        sink: List[Mapping] = xrefs.get(source, [])
        full_path = need_asset(assets, path)
        concepts = run(source, lambda: list(reader(full_path, stats, sink)))
        report.sources.append(stats)
        sources.append((source, concepts))
    return sources


def equivalences(assets: Path, report: BuildReport, run: StepRunner, xrefs: Dict[str, List[Mapping]],
                 umls_glue: bool) -> List[Mapping]:
    """What the merge follows: MONDO's exact-match tables and the vocabularies' own cross-references."""
    mappings: List[Mapping] = []
    for table in MONDO_TABLES:
        if table == "umls" and not umls_glue:
            continue
        stats = ReadStats(f"mondo-{table}")
        table_path = need_asset(assets, MONDO_TABLE.format(table))
        mappings.extend(run(f"MONDO {table}", lambda: list(read_sssom(table_path, stats=stats))))
        report.sources.append(stats)
    for source, found in xrefs.items():
        allowed = tuple(v for v in XREF_VOCABULARIES[source] if umls_glue or v != "UMLS")
        kept = _xrefs_kept(found, allowed)
        report.notes.append(f"{source} xrefs: {len(kept):,} of {len(found):,} used ({', '.join(allowed)})")
        mappings.extend(m._replace(source=f"{source}-xrefs") for m in kept)
    return mappings


__all__ = ["HPO_ROOTS", "NCIT_ROOTS", "ONTOLOGIES", "ORDO_ROOTS", "XREF_VOCABULARIES", "equivalences",
           "ontology_concepts"]
