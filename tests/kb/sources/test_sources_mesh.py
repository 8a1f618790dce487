"""MeSH: the mirror's TSV (real rows) and NLM's descriptor/supplementary XML (samples in
NLM's exact layout, written here since the mirror has no XML)."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.sources import ReadStats, read_mesh_tsv, read_mesh_xml
from spacy_sapbert.kb.sources.mesh import MESH_CATEGORIES, category_types

DESC_XML = """<?xml version="1.0"?>
<!DOCTYPE DescriptorRecordSet SYSTEM "https://www.nlm.nih.gov/databases/dtd/nlmdescriptorrecordset_20240101.dtd">
<DescriptorRecordSet LanguageCode="eng">
<DescriptorRecord DescriptorClass="1">
  <DescriptorUI>D000082</DescriptorUI>
  <DescriptorName>
   <String>Acetaminophen</String>
  </DescriptorName>
  <DateCreated><Year>1999</Year><Month>01</Month><Day>01</Day></DateCreated>
  <PharmacologicalActionList>
   <PharmacologicalAction>
    <DescriptorReferredTo>
     <DescriptorUI>D018712</DescriptorUI>
     <DescriptorName><String>Analgesics, Non-Narcotic</String></DescriptorName>
    </DescriptorReferredTo>
   </PharmacologicalAction>
  </PharmacologicalActionList>
  <TreeNumberList>
   <TreeNumber>D02.065.199.092.040</TreeNumber>
   <TreeNumber>D02.092.146.113.092.040</TreeNumber>
  </TreeNumberList>
  <ConceptList>
   <Concept PreferredConceptYN="Y">
    <ConceptUI>M0000109</ConceptUI>
    <ConceptName><String>Acetaminophen</String></ConceptName>
    <CASN1Name>Acetamide, N-(4-hydroxyphenyl)-</CASN1Name>
    <RegistryNumber>362O9ITL9D</RegistryNumber>
    <ScopeNote>Analgesic antipyretic derivative of acetanilide. It has weak anti-inflammatory properties.
    </ScopeNote>
    <TermList>
     <Term ConceptPreferredTermYN="Y" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="Y">
      <TermUI>T000231</TermUI>
      <String>Acetaminophen</String>
     </Term>
     <Term ConceptPreferredTermYN="N" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="N">
      <TermUI>T000234</TermUI>
      <String>Paracetamol</String>
     </Term>
     <Term ConceptPreferredTermYN="N" IsPermutedTermYN="N" LexicalTag="TRD" RecordPreferredTermYN="N">
      <TermUI>T000235</TermUI>
      <String>Anacin-3</String>
     </Term>
     <Term ConceptPreferredTermYN="N" IsPermutedTermYN="Y" LexicalTag="TRD" RecordPreferredTermYN="N">
      <TermUI>T000235</TermUI>
      <String>Anacin 3</String>
     </Term>
    </TermList>
   </Concept>
   <Concept PreferredConceptYN="N">
    <ConceptUI>M0000110</ConceptUI>
    <ConceptName><String>Tylenol</String></ConceptName>
    <TermList>
     <Term ConceptPreferredTermYN="Y" IsPermutedTermYN="N" LexicalTag="TRD" RecordPreferredTermYN="N">
      <TermUI>T000236</TermUI>
      <String>Tylenol</String>
     </Term>
    </TermList>
   </Concept>
  </ConceptList>
</DescriptorRecord>
<DescriptorRecord DescriptorClass="1">
  <DescriptorUI>D009369</DescriptorUI>
  <DescriptorName><String>Neoplasms</String></DescriptorName>
  <TreeNumberList><TreeNumber>C04</TreeNumber></TreeNumberList>
  <ConceptList>
   <Concept PreferredConceptYN="Y">
    <ConceptUI>M0014585</ConceptUI>
    <ConceptName><String>Neoplasms</String></ConceptName>
    <TermList>
     <Term ConceptPreferredTermYN="Y" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="Y">
      <TermUI>T028098</TermUI><String>Neoplasms</String>
     </Term>
     <Term ConceptPreferredTermYN="N" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="N">
      <TermUI>T028100</TermUI><String>Tumors</String>
     </Term>
    </TermList>
   </Concept>
  </ConceptList>
</DescriptorRecord>
<DescriptorRecord DescriptorClass="1">
  <DescriptorUI>D000003</DescriptorUI>
  <DescriptorName><String>Abattoirs</String></DescriptorName>
  <TreeNumberList><TreeNumber>J01.576.423.200.700.100</TreeNumber><TreeNumber>J03.540.020</TreeNumber></TreeNumberList>
  <ConceptList>
   <Concept PreferredConceptYN="Y">
    <ConceptUI>M0000003</ConceptUI>
    <ConceptName><String>Abattoirs</String></ConceptName>
    <TermList>
     <Term ConceptPreferredTermYN="Y" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="Y">
      <TermUI>T000009</TermUI><String>Abattoirs</String>
     </Term>
    </TermList>
   </Concept>
  </ConceptList>
</DescriptorRecord>
</DescriptorRecordSet>
"""

SUPP_XML = """<?xml version="1.0"?>
<!DOCTYPE SupplementalRecordSet SYSTEM "https://www.nlm.nih.gov/databases/dtd/nlmsupplementalrecordset_20240101.dtd">
<SupplementalRecordSet LanguageCode="eng">
<SupplementalRecord SCRClass="1">
  <SupplementalRecordUI>C000002</SupplementalRecordUI>
  <SupplementalRecordName><String>bevonium</String></SupplementalRecordName>
  <Note>structure given in first source
  </Note>
  <HeadingMappedToList>
   <HeadingMappedTo>
    <DescriptorReferredTo>
     <DescriptorUI>*D001561</DescriptorUI>
     <DescriptorName><String>Benzilates</String></DescriptorName>
    </DescriptorReferredTo>
   </HeadingMappedTo>
  </HeadingMappedToList>
  <ConceptList>
   <Concept PreferredConceptYN="Y">
    <ConceptUI>M0000002</ConceptUI>
    <ConceptName><String>bevonium</String></ConceptName>
    <TermList>
     <Term ConceptPreferredTermYN="Y" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="Y">
      <TermUI>T000003</TermUI><String>bevonium</String>
     </Term>
     <Term ConceptPreferredTermYN="N" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="N">
      <TermUI>T000004</TermUI><String>CG 201</String>
     </Term>
    </TermList>
   </Concept>
  </ConceptList>
</SupplementalRecord>
<SupplementalRecord SCRClass="3">
  <SupplementalRecordUI>C537502</SupplementalRecordUI>
  <SupplementalRecordName><String>Schwartz-Jampel Syndrome, Type 2</String></SupplementalRecordName>
  <ConceptList>
   <Concept PreferredConceptYN="Y">
    <ConceptUI>M0453102</ConceptUI>
    <ConceptName><String>Schwartz-Jampel Syndrome, Type 2</String></ConceptName>
    <TermList>
     <Term ConceptPreferredTermYN="Y" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="Y">
      <TermUI>T000001</TermUI><String>Schwartz-Jampel Syndrome, Type 2</String>
     </Term>
     <Term ConceptPreferredTermYN="N" IsPermutedTermYN="N" LexicalTag="NON" RecordPreferredTermYN="N">
      <TermUI>T000002</TermUI><String>Stuve-Wiedemann Syndrome</String>
     </Term>
    </TermList>
   </Concept>
  </ConceptList>
</SupplementalRecord>
<SupplementalRecord SCRClass="2">
  <SupplementalRecordUI>C000005</SupplementalRecordUI>
  <SupplementalRecordName><String>CHOP protocol</String></SupplementalRecordName>
</SupplementalRecord>
</SupplementalRecordSet>
"""


def test_category_types() -> None:
    assert category_types(["C04.557", "F03.625", "D02.1", "E01"], MESH_CATEGORIES) == ["Disease", "Chemical"]
    assert category_types(["F01.145"], MESH_CATEGORIES) == [] and category_types(["C04"], MESH_CATEGORIES) == ["Disease"]


def test_mesh_tsv_real_rows(fixtures: Path) -> None:
    terms, trees = fixtures / "sources/mesh-descriptor-terms.sample.tsv", fixtures / "sources/mesh-descriptor-trees.sample.tsv"
    stats = ReadStats("mesh")
    concepts = {c.concept_id: c for c in read_mesh_tsv(terms, trees, stats=stats)}
    assert set(concepts) == {"D000001", "D000082", "D003924"}  # Abattoirs (J) out; two headings lack trees
    assert concepts["D000082"].types == ["Chemical"] and "Paracetamol" in concepts["D000082"].aliases
    assert "Anacin 3" not in concepts["D000082"].aliases  # a permuted term
    assert concepts["D003924"].types == ["Disease"]
    assert stats.skipped["descriptor_outside_categories"] == 1
    assert stats.skipped["descriptor_without_tree_number"] == 2
    assert stats.skipped["permuted_term"] > 0
    # the mirror's tree table drops top-level headings (Neoplasms C04, Mental Disorders F03); CTD knows them
    with_ctd = {c.concept_id: c for c in read_mesh_tsv(terms, trees, extra_tree_numbers={
        "D009369": ["C04"], "D001523": ["F03"]})}
    assert with_ctd["D009369"].types == ["Disease"] and with_ctd["D001523"].types == ["Disease"]
    permuted = {c.concept_id: c for c in read_mesh_tsv(terms, trees, include_permuted=True)}
    assert "Anacin 3" in permuted["D000082"].aliases
    every = {c.concept_id for c in read_mesh_tsv(terms, None, categories=None)}
    assert len(every) == 6


@pytest.mark.parametrize("edit, line, fragment", [
    (lambda rows: rows[:3] + ["X000001\tCalcimycin\tM0000001\tT000002\tCalcimycin\tY\tN\tNON\tY\n"], 4, "descriptor UI"),
    (lambda rows: rows[:3] + ["D000001\tCalcimycin\tM0000001\n"], 4, "expected 9 tab-separated columns"),
    (lambda rows: [rows[0].replace("IsPermutedTermYN", "Permuted")] + rows[1:3], 1, "lacks the column"),
    (lambda rows: rows[:3] + ["D000001\tCalcimycin\tM0000001\tT000002\tCalcimycin\tY\tmaybe\tNON\tY\n"], 4,
     "expected Y or N"),
])
def test_mesh_tsv_bad_rows(fixtures: Path, tmp_path: Path, edit, line: int, fragment: str) -> None:
    rows = (fixtures / "sources/mesh-descriptor-terms.sample.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "terms.tsv"
    path.write_text("".join(edit(rows)), encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_mesh_tsv(path, fixtures / "sources/mesh-descriptor-trees.sample.tsv"))
    assert err.value.line == line and err.value.path == str(path)


def test_descriptor_xml(tmp_path: Path) -> None:
    path = tmp_path / "desc2024.xml.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(DESC_XML)
    stats = ReadStats("desc")
    concepts = {c.concept_id: c for c in read_mesh_xml(path, stats=stats)}
    assert set(concepts) == {"D000082", "D009369"}
    acetaminophen = concepts["D000082"]
    assert acetaminophen.canonical_name == "Acetaminophen" and acetaminophen.types == ["Chemical"]
    assert acetaminophen.aliases == ["Paracetamol", "Anacin-3", "Tylenol"]  # permuted "Anacin 3" left out
    assert acetaminophen.definition.startswith("Analgesic antipyretic") and acetaminophen.definition.endswith("properties.")
    assert concepts["D009369"].types == ["Disease"] and concepts["D009369"].aliases == ["Tumors"]
    assert stats.records == 3 and stats.skipped["descriptor_outside_categories"] == 1 and stats.skipped["permuted_term"] == 1


def test_supplementary_xml(tmp_path: Path) -> None:
    path = tmp_path / "supp2024.xml"
    path.write_text(SUPP_XML, encoding="utf-8")
    stats = ReadStats("supp")
    concepts = {c.concept_id: c for c in read_mesh_xml(path, stats=stats)}
    assert concepts["C000002"].types == ["Chemical"] and concepts["C000002"].aliases == ["CG 201"]
    assert concepts["C000002"].definition == "structure given in first source"
    assert concepts["C537502"].types == ["Disease"] and concepts["C537502"].aliases == ["Stuve-Wiedemann Syndrome"]
    assert "C000005" not in concepts and stats.skipped["supplementary_class_2"] == 1  # a chemotherapy protocol


@pytest.mark.parametrize("edit, fragment", [
    (lambda x: x.replace("<DescriptorUI>D009369</DescriptorUI>", ""), "without a valid DescriptorUI"),
    (lambda x: x.replace("<String>Neoplasms</String></DescriptorName>", "</DescriptorName>"), "no DescriptorName"),
    (lambda x: x.replace("</DescriptorRecord>\n<DescriptorRecord DescriptorClass=\"1\">\n  <DescriptorUI>D000003",
                         "<DescriptorRecord DescriptorClass=\"1\">\n  <DescriptorUI>D000003", 1), "invalid XML"),
    (lambda x: x.replace("DescriptorRecordSet", "QualifierRecordSet"), "not a MeSH descriptor or supplementary"),
])
def test_bad_xml_names_file_and_line(tmp_path: Path, edit, fragment: str) -> None:
    text = edit(DESC_XML)
    path = tmp_path / "desc.xml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_mesh_xml(path))
    assert err.value.path == str(path) and err.value.line is not None
    assert 1 <= err.value.line <= text.count("\n") + 1


@pytest.mark.parametrize("which", ["terms", "trees"])
def test_torn_last_line_of_a_mesh_table_is_an_error(fixtures: Path, tmp_path: Path, which: str) -> None:
    """A copy cut inside its last row still has the right columns (``N`` of the last column cut
    away leaves an empty one): only the missing line ending tells."""
    paths = {"terms": fixtures / "sources/mesh-descriptor-terms.sample.tsv",
             "trees": fixtures / "sources/mesh-descriptor-trees.sample.tsv"}
    text = paths[which].read_text(encoding="utf-8")
    torn = text.rstrip("\n")[:-1]
    paths[which] = tmp_path / f"{which}.tsv"
    paths[which].write_text(torn, encoding="utf-8")
    with pytest.raises(InputError, match="no line ending") as err:
        list(read_mesh_tsv(paths["terms"], paths["trees"]))
    assert (err.value.path, err.value.line) == (str(paths[which]), torn.count("\n") + 1)


@pytest.mark.parametrize("cut", ["after a record", "inside a record"])
def test_truncated_mesh_xml_says_so(tmp_path: Path, cut: str) -> None:
    end = DESC_XML.index("</DescriptorRecord>") + len("</DescriptorRecord>\n")
    text = DESC_XML[:end] if cut == "after a record" else DESC_XML[: end + 40]
    path = tmp_path / "desc2024.xml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"ends inside <DescriptorRecordSet>.*truncated") as err:
        list(read_mesh_xml(path))
    assert err.value.path == str(path) and err.value.line == text.count("\n") + (not text.endswith("\n"))
