"""OBO (hp.obo) and OBO Graphs JSON (DO, ORDO, NCIt) readers on real upstream records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.sources import ReadStats, read_obo, read_obograph


def test_hpo_obo(fixtures: Path) -> None:
    stats, xrefs = ReadStats("hpo"), []
    concepts = {c.concept_id: c for c in read_obo(fixtures / "sources/hp.sample.obo", ("HP",), types=["Phenotype"],
                                                  stats=stats, xrefs=xrefs)}
    neoplasm = concepts["HP:0002664"]
    assert neoplasm.canonical_name == "Neoplasm" and neoplasm.types == ["Phenotype"]
    assert neoplasm.aliases == ["Neoplasia", "Oncological abnormality", "Tumor", "Tumour"]  # EXACT only
    assert neoplasm.definition.startswith("An organ or organ-system abnormality")
    assert "HP:0000057" not in concepts and stats.skipped["obsolete_term"] == 1
    assert stats.skipped["synonym_related"] == 2 and stats.skipped["synonym_broad"] == 1
    assert "Mesomelic dwarfism" not in concepts["HP:0008845"].aliases and stats.skipped["synonym_obsolete"] == 1
    assert ("HP:0002664", "UMLS:C0006826") in {(m.subject_id, m.object_id) for m in xrefs}
    assert ("HP:0002664", "NCIT:C3262") in {(m.subject_id, m.object_id) for m in xrefs}
    assert not any(m.object_id.startswith("SNOMED") for m in xrefs)  # unknown vocabularies are not mappings
    # roots: only the phenotypic abnormality branch (and the terms of this sample whose chain reaches it)
    rooted = {c.concept_id for c in read_obo(fixtures / "sources/hp.sample.obo", ("HP",), roots=("HP:0000118",))}
    assert rooted == {"HP:0000118", "HP:0000152", "HP:0002664"}


@pytest.mark.parametrize("bad, line, fragment", [
    ('[Term]\nid: HP:0000001\nname: All\nthis line has no tag\n', 6, "expected 'tag: value'"),
    ('[Term]\nname: All\nid: HP:0000001\n', 4, "before its id"),
    ('[Term]\nid: HP:0000002\nname: x\nsynonym: "y" SIMILAR []\n', 6, "synonym scope"),
    ('[Term]\nid: HP:0000002\nname: x\ndef: unquoted definition\n', 6, "double-quoted"),
    ('[Term]\nid: XX:0000002\nname: x\n', 4, "unknown identifier"),
])
def test_obo_bad_input(tmp_path: Path, bad: str, line: int, fragment: str) -> None:
    path = tmp_path / "bad.obo"
    path.write_text("format-version: 1.2\n\n" + bad, encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_obo(path))
    assert err.value.path == str(path) and err.value.line == line


def test_obo_error_lines_are_exact(tmp_path: Path) -> None:
    path = tmp_path / "bad.obo"
    path.write_text("format-version: 1.2\n\n[Term]\nid: HP:0000001\nname: All\nbroken line\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        list(read_obo(path))
    assert err.value.line == 6
    path.write_bytes(b"[Term]\nid: HP:0000001\nname: Sj\xf6gren\n")
    with pytest.raises(InputError, match="not UTF-8") as err:
        list(read_obo(path))
    assert err.value.line == 3


def test_doid_graph(fixtures: Path) -> None:
    stats, xrefs = ReadStats("doid"), []
    concepts = {c.concept_id: c for c in read_obograph(fixtures / "sources/doid.sample.json", "DOID", stats=stats,
                                                       xrefs=xrefs)}
    assert set(concepts) == {"DOID:9351", "DOID:9352"}  # DOID:8718 is deprecated; CHEBI is an import
    assert concepts["DOID:9352"].canonical_name == "type 2 diabetes mellitus"
    assert stats.skipped["obsolete_class"] == 1 and stats.skipped["class_of_other_ontology"] == 1
    targets = {(m.subject_id, m.object_id) for m in xrefs}
    assert ("DOID:9352", "D003924") in targets and ("DOID:9351", "D003920") in targets


def test_ordo_graph_roots_and_obsolescence(fixtures: Path) -> None:
    stats, xrefs = ReadStats("ordo"), []
    concepts = {c.concept_id: c for c in read_obograph(fixtures / "sources/ordo.sample.json", "Orphanet",
                                                       roots=("Orphanet:C001",), stats=stats, xrefs=xrefs)}
    assert "Orphanet:124" in concepts and "Aase syndrome" in concepts["Orphanet:124"].aliases
    assert "Orphanet:168077" not in concepts  # a gene, under "genetic material"
    assert "Orphanet:240929" not in concepts  # OBSOLETE:, under ObsoleteClass
    assert "Orphanet:1235" not in concepts  # deprecated through reason_for_obsolescence
    assert stats.skipped["obsolete_class"] == 3 and stats.skipped["class_outside_roots"] == 3
    assert sum(1 for m in xrefs if m.subject_id == "Orphanet:124" and m.object_id.startswith("OMIM:")) == 17


def test_ncit_graph_keeps_the_disease_branch(fixtures: Path) -> None:
    stats = ReadStats("ncit")
    concepts = {c.concept_id: c for c in read_obograph(fixtures / "sources/ncit.sample.json", "NCIT",
                                                       roots=("NCIT:C7057",), types=["Disease"], stats=stats)}
    assert "NCIT:C2985" in concepts and concepts["NCIT:C2985"].types == ["Disease"]
    assert "NCIT:C19540" not in concepts and "NCIT:C16612" not in concepts
    assert stats.skipped["class_outside_roots"] == 2


@pytest.mark.parametrize("document, fragment", [
    ({"nodes": []}, "no top-level 'graphs'"),
    ({"graphs": [{"nodes": [{"lbl": "no id"}]}]}, "graphs[0].nodes[0].id"),
    ({"graphs": [{"nodes": [], "edges": [{"sub": "a", "pred": "is_a"}]}]}, "graphs[0].edges[0]"),
    ({"graphs": [{"nodes": [{"id": "http://purl.obolibrary.org/obo/XYZ_1", "type": "CLASS", "lbl": "x"}]}]},
     "unknown identifier"),
])
def test_obograph_bad_input(tmp_path: Path, document: dict, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(InputError) as err:
        list(read_obograph(path))
    assert fragment in str(err.value) and err.value.path == str(path)


def test_torn_last_line_of_an_obo_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "hp.obo"
    path.write_text("format-version: 1.2\n\n[Term]\nid: HP:0000001\nname: Abnormality of the he", encoding="utf-8")
    with pytest.raises(InputError, match="no line ending") as err:
        list(read_obo(path))
    assert (err.value.path, err.value.line) == (str(path), 5)
