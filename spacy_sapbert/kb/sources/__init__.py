"""Readers, one per upstream vocabulary format, each yielding :class:`~spacy_sapbert.kb.concept.Concept`
and counting what it leaves out on purpose in a :class:`ReadStats`; the cross-vocabulary
merge; and the builders of the project's knowledge bases (:mod:`.build`)."""
from spacy_sapbert.kb.sources.biosyn import read_biosyn_dictionary
from spacy_sapbert.kb.sources.medic import read_ctd_diseases, read_medic, read_medic_biosyn
from spacy_sapbert.kb.sources.merge import MergeReport, merge_equivalent
from spacy_sapbert.kb.sources.mesh import read_mesh_tsv, read_mesh_xml
from spacy_sapbert.kb.sources.obo import read_obo
from spacy_sapbert.kb.sources.obograph import read_obograph
from spacy_sapbert.kb.sources.sssom import Mapping, read_sssom
from spacy_sapbert.kb.sources.stats import ReadStats
from spacy_sapbert.kb.sources.umls import read_umls

__all__ = [
    "Mapping", "MergeReport", "ReadStats", "merge_equivalent", "read_biosyn_dictionary", "read_ctd_diseases",
    "read_medic", "read_medic_biosyn", "read_mesh_tsv", "read_mesh_xml", "read_obo", "read_obograph",
    "read_sssom", "read_umls",
]
