"""``skip_newer_mesh``: MeSH records of some KB types with ten-character UIs (newer than the corpora's MeSH)
are not candidates of the search; the concept the corpora use is found instead (the real MiniLM)."""
from __future__ import annotations


import pytest

import spacy_sapbert
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.kb.ids import is_newer_mesh
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.linking.linker import Linker

CONCEPTS = [
    Concept("D020521", "Stroke", ["cerebrovascular accident"], ["Disease"]),
    Concept("D000083302", "Hemorrhagic Stroke", ["hemorrhagic strokes"], ["Disease"]),
    Concept("D006973", "Hypertension", ["high blood pressure"], ["Disease"]),
    Concept("D000075222", "Essential Hypertension", ["primary hypertension"], ["Disease"]),
    Concept("C037663", "ropivacaine", ["naropin"], ["Chemical"]),  # a 2015 record, as BC5CDR names it
    Concept("D000077212", "Ropivacaine", ["ropivacaine hydrochloride"], ["Chemical"]),  # its 2024 descriptor
    Concept("D000000001", "Both", ["both kinds"], ["Disease", "Phenotype"]),
]


@pytest.mark.parametrize("concept_id, newer", [
    ("D000083302", True), ("C000591739", True), ("D020521", False), ("C037663", False),
    ("UMLS:C0011849", False), ("OMIM:145500", False), ("C0011849", False), ("D00008330", False),
])
def test_is_newer_mesh_is_a_bare_mesh_ui_of_ten_characters(concept_id, newer):
    assert is_newer_mesh(concept_id) is newer


@pytest.fixture(scope="module")
def linker(minilm_path) -> Linker:
    kb = KnowledgeBase(CONCEPTS, name="eras")
    encoder = Encoder(minilm_path, device="cpu", dtype="float32")
    return Linker(encoder, kb, NameIndex.build(kb, encoder, show_progress=False), k=4)


def test_the_search_skips_newer_records_of_the_types_listed_only(linker):
    queries = ["hemorrhagic stroke", "essential hypertension", "ropivacaine hydrochloride"]
    types = [{"Disease"}, {"Disease"}, {"Chemical"}]
    before = [found[0][0] for found in linker.candidates(queries, types)]
    assert before == ["D000083302", "D000075222", "D000077212"]
    linker.settings = linker.settings.replace(skip_newer_mesh=["Disease"])
    try:
        found = linker.candidates(queries, types)
        assert [f[0][0] for f in found] == ["D020521", "D006973", "D000077212"]  # cached candidates are dropped
        assert not {cid for f in found[:2] for cid, _ in f} & {"D000083302", "D000075222"}
        # the same without types: a search of every type skips them too
        (untyped,) = linker.candidates(["hemorrhagic stroke"])
        assert "D000083302" not in {cid for cid, _ in untyped}
        # a concept that has another type searched for stays
        (both,) = linker.candidates(["both kinds"], [{"Phenotype"}])
        assert both[0][0] == "D000000001"
        (disease_only,) = linker.candidates(["both kinds"], [{"Disease"}])
        assert "D000000001" not in {cid for cid, _ in disease_only}
    finally:
        linker.settings = linker.settings.replace(skip_newer_mesh=None)
    assert [found[0][0] for found in linker.candidates(queries, types)] == before


def test_the_default_links_hemorrhagic_stroke_to_stroke_and_can_be_told_not_to():
    nlp = spacy_sapbert.load()
    pipe = nlp.get_pipe("sapbert_linker")
    assert pipe.skip_newer_mesh == ["Disease"]
    text = "She had a hemorrhagic stroke after the drug."
    (stroke,) = [e for e in nlp(text).ents if e.label_ == "DISEASE"]
    assert stroke.text == "hemorrhagic stroke" and stroke.kb_id_.split("|")[0] == "D020521"  # Stroke (MEDIC joins OMIM)
    pipe.configure(skip_newer_mesh=None)
    (newer,) = [e for e in nlp(text).ents if e.label_ == "DISEASE"]
    assert newer.kb_id_ == "D000083302"
