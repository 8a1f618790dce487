"""UMLS RRF (MRCONSO + MRSTY + MRDEF) on a sample in the exact Metathesaurus layout, checked
against scispaCy's own UMLS reader on the same files; and a KB scispaCy's way of exporting
UMLS writes loads here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.sources import ReadStats, read_umls

# CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF|
MRCONSO = """\
C0011849|ENG|P|L0011849|PF|S0033600|Y|A0066368||M0006136|D003920|MSH|MH|D003920|Diabetes Mellitus|0|N|256|
C0011849|ENG|P|L0011849|VO|S0480718|Y|A0542315||||MTH|PN|NOCODE|Diabetes mellitus|0|N|256|
C0011849|ENG|S|L0214656|PF|S0254785|Y|A0398474||||CHV|SY|0000003803|DM|0|N||
C0011849|ENG|S|L0011856|PF|S0033616|Y|A1234567||M0006136|D003920|MSH|ET|D003920|Diabetes Mellitus, Unspecified|0|O||
C0011849|FRE|P|L1234567|PF|S1234567|Y|A2345678||M0006136|D003920|MSHFRE|MH|D003920|Diabète|3|N||
C0011860|ENG|P|L0011860|PF|S0033618|Y|A0066372||M0006141|D003924|MSH|MH|D003924|Diabetes Mellitus, Type 2|0|N|256|
C0011860|ENG|S|L0017891|PF|S0046328|Y|A0078913||M0006141|D003924|MSH|EN|D003924|NIDDM|0|N|256|
C0011860|ENG|S|L0017891|PF|S0046328|Y|A0078914||||MEDLINEPLUS|SY|NOCODE|NIDDM|0|N||
C0000005|ENG|P|L0000005|PF|S0007492|Y|A26634265||M0019694|D012711|MSH|PEP|D012711|(131)I-Macroaggregated Albumin|0|N|256|
C0000005|ENG|S|L0270109|PF|S0007491|Y|A26634266||M0019694|D012711|MSH|ET|D012711|(131)I-MAA|0|E|256|
"""
MRSTY = """\
C0011849|T047|B2.2.1.2.1|Disease or Syndrome|AT17683839|3840|
C0011860|T047|B2.2.1.2.1|Disease or Syndrome|AT17629455|256|
C0000005|T116|A1.4.1.2.1.7|Amino Acid, Peptide, or Protein|AT17648347|256|
C0000005|T121|A1.4.1.1.1|Pharmacologic Substance|AT17575038|256|
"""
MRDEF = """\
C0011849|A0066368|AT38152019||MSH|A heterogeneous group of disorders characterized by HYPERGLYCEMIA.|N||
C0011849|A0542315|AT12345678||CHV|high blood sugar disease|N||
C0011860|A0066372|AT38152020||MSH|A subclass of DIABETES MELLITUS that is not INSULIN-responsive.|N||
"""
# FIL|DES|FMT|CLS|RWS|BTS|: columns, rows and bytes of each file, as a release lists them
MRFILES = f"""\
MRCONSO.RRF|Concept names and sources|CUI,LAT,TS,LUI,STT,SUI,ISPREF,AUI,SAUI,SCUI,SDUI,SAB,TTY,CODE,STR,SRL,SUPPRESS,CVF|18|10|{len(MRCONSO.encode())}|
MRSTY.RRF|Semantic Types|CUI,TUI,STN,STY,ATUI,CVF|6|4|{len(MRSTY.encode())}|
MRDEF.RRF|Definitions|CUI,AUI,ATUI,SATUI,SAB,DEF,SUPPRESS,CVF|8|3|{len(MRDEF.encode())}|
"""


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    for name, text in (("MRCONSO.RRF", MRCONSO), ("MRSTY.RRF", MRSTY), ("MRDEF.RRF", MRDEF), ("MRFILES.RRF", MRFILES)):
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_read_umls(meta: Path) -> None:
    stats = ReadStats("umls")
    concepts = {c.concept_id: c for c in read_umls(meta / "MRCONSO.RRF", meta / "MRSTY.RRF", meta / "MRDEF.RRF",
                                                     stats=stats)}
    dm = concepts["UMLS:C0011849"]
    assert dm.canonical_name == "Diabetes Mellitus"  # TS=P, STT=PF, ISPREF=Y
    assert dm.aliases == ["Diabetes mellitus", "DM"]  # suppressed (O) and French strings left out
    assert dm.types == ["T047"] and dm.definition.startswith("A heterogeneous group")  # MSH preferred over CHV
    assert concepts["UMLS:C0011860"].aliases == ["NIDDM"]
    assert concepts["UMLS:C0000005"].types == ["T116", "T121"] and concepts["UMLS:C0000005"].aliases == []
    assert stats.skipped == {"string_suppressed_O": 1, "string_suppressed_E": 1, "string_other_language": 1}
    only_msh = list(read_umls(meta / "MRCONSO.RRF", sources=["MSH"]))
    assert [c.names for c in only_msh][0] == ["Diabetes Mellitus"]


def test_matches_scispacy_umls_reader(meta: Path) -> None:
    """scispaCy's umls_utils reads the same files into the same concepts (its IDs are bare CUIs)."""
    from scispacy import umls_utils

    details: dict = {}
    umls_utils.read_umls_concepts(str(meta), details)
    umls_utils.read_umls_types(str(meta), details)
    umls_utils.read_umls_definitions(str(meta), details)
    ours = {c.concept_id.split(":", 1)[1]: c for c in read_umls(meta / "MRCONSO.RRF", meta / "MRSTY.RRF",
                                                                   meta / "MRDEF.RRF")}
    assert set(ours) == set(details)
    for cui, theirs in details.items():
        assert ours[cui].canonical_name == theirs["canonical_name"]
        assert set(ours[cui].aliases) == set(theirs["aliases"]) - {theirs["canonical_name"]}
        assert ours[cui].types == theirs["types"] and ours[cui].definition == theirs.get("definition")


def test_scispacy_exported_umls_kb_loads_here(meta: Path, tmp_path: Path) -> None:
    """scispaCy's scripts/export_umls_json.py: umls_utils → dict per concept → one json.dumps per line."""
    from scispacy import umls_utils

    details: dict = {}
    umls_utils.read_umls_concepts(str(meta), details)
    umls_utils.read_umls_types(str(meta), details)
    umls_utils.read_umls_definitions(str(meta), details)
    path = tmp_path / "umls_export.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for concept in details.values():
            concept["aliases"] = list(set(concept["aliases"]))
            concept.pop("is_from_preferred_source", None)
            out.write(json.dumps(concept) + "\n")
    kb = KnowledgeBase.from_jsonl(path)
    assert len(kb) == 3 and kb.alias_to_concepts["niddm"] == ["C0011860"]
    assert kb["C0000005"].types == ["T116", "T121"]


@pytest.mark.parametrize("line, fragment", [
    ("C0011849|ENG|P|L0011849|PF|S0033600|Y|A0066368||M0006136|D003920|MSH|MH|D003920|Diabetes Mellitus|0|N|", "18"),
    ("C0011849|ENG|P|L0011849|PF|S0033600|Y|A0066368||M0006136|D003920|MSH|MH|D003920|Diabetes Mellitus|0|N|256",
     "'|'-terminated"),
    ("0011849|ENG|P|L0011849|PF|S0033600|Y|A0066368||M0006136|D003920|MSH|MH|D003920|Diabetes Mellitus|0|N|256|",
     "not a UMLS CUI"),
    ("C0011849|ENG|P|L0011849|PF|S0033600|Y|A0066368||M0006136|D003920|MSH|MH|D003920||0|N|256|", "empty string"),
])
def test_bad_mrconso_rows(tmp_path: Path, line: str, fragment: str) -> None:
    path = tmp_path / "MRCONSO.RRF"
    path.write_text(MRCONSO.splitlines()[0] + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_umls(path))
    assert err.value.line == 2 and err.value.path == str(path)


def test_bad_mrsty_and_encoding(tmp_path: Path) -> None:
    sty = tmp_path / "MRSTY.RRF"
    sty.write_text("C0011849|Disease|B2.2.1.2.1|Disease or Syndrome|AT17683839|3840|\n", encoding="utf-8")
    conso = tmp_path / "MRCONSO.RRF"
    conso.write_text(MRCONSO, encoding="utf-8")
    with pytest.raises(InputError, match="semantic type") as err:
        list(read_umls(conso, sty))
    assert err.value.line == 1 and err.value.field == "TUI"
    conso.write_bytes(MRCONSO.encode("latin-1"))  # "Diabète" on line 5 is not UTF-8 any more
    with pytest.raises(InputError, match="not UTF-8") as err:
        list(read_umls(conso))
    assert err.value.line == 5


MRCONSO_CUT = "".join(MRCONSO.splitlines(keepends=True)[:7])  # cut at a line boundary: every row well-formed


@pytest.mark.parametrize("damage, fragment, line", [
    (lambda files: files.update({"MRCONSO.RRF": MRCONSO_CUT}),
     r"MRCONSO.RRF: 7\d\d bytes, but MRFILES.RRF \(line 1\) lists 1,\d{3}", None),
    # the size entry fixed up as well: the row count still tells
    (lambda files: files.update({"MRCONSO.RRF": MRCONSO_CUT, "MRFILES.RRF": files["MRFILES.RRF"].replace(
        f"|{len(MRCONSO.encode())}|", f"|{len(MRCONSO_CUT.encode())}|")}),
     r"MRCONSO.RRF:7: the file ends after 7 rows, but MRFILES.RRF \(line 1\) lists 10", 7),
    (lambda files: files.update({"MRSTY.RRF": "".join(MRSTY.splitlines(keepends=True)[:3])}), "MRSTY.RRF", None),
    (lambda files: files.update({"MRFILES.RRF": files["MRFILES.RRF"].replace("SUPPRESS,CVF|18", "CVF,SUPPRESS|18")}),
     r"MRFILES.RRF:1: field 'FMT': MRCONSO.RRF has the columns CUI,.*,CVF,SUPPRESS, but this reader expects "
     r"CUI,.*,SUPPRESS,CVF", 1),
], ids=["cut at a line boundary", "cut, size entry fixed up", "MRSTY cut", "other column order"])
def test_mrfiles_counts_and_columns_are_checked(meta: Path, damage, fragment: str, line) -> None:
    """A release's MRFILES.RRF lists each file's columns, rows and bytes: a copy cut at a
    line boundary (every row well-formed) is caught by them, not read as a smaller UMLS."""
    files = {name: (meta / name).read_text(encoding="utf-8") for name in ("MRCONSO.RRF", "MRSTY.RRF", "MRFILES.RRF")}
    damage(files)
    for name, text in files.items():
        (meta / name).write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_umls(meta / "MRCONSO.RRF", meta / "MRSTY.RRF", meta / "MRDEF.RRF"))
    assert err.value.line == line
