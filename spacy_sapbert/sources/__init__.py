"""Readers, one per upstream vocabulary format, each yielding :class:`~spacy_sapbert.kb.Concept`
and counting what it leaves out on purpose in a :class:`ReadStats`; the cross-vocabulary
merge; and the builders of the project's knowledge bases (:mod:`.build`)."""
from .biosyn import read_biosyn_dictionary
from .medic import read_ctd_diseases, read_medic, read_medic_biosyn
from .merge import MergeReport, merge_equivalent
from .mesh import read_mesh_tsv, read_mesh_xml
from .obo import read_obo
from .obograph import read_obograph
from .sssom import Mapping, read_sssom
from .stats import ReadStats
from .umls import read_umls

__all__ = [
    "Mapping", "MergeReport", "ReadStats", "merge_equivalent", "read_biosyn_dictionary", "read_ctd_diseases",
    "read_medic", "read_medic_biosyn", "read_mesh_tsv", "read_mesh_xml", "read_obo", "read_obograph",
    "read_sssom", "read_umls",
]
