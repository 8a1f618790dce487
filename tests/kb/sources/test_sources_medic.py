"""MEDIC (BioSyn text form and CTD TSV) and BioSyn dictionaries, on real upstream lines."""
from __future__ import annotations

from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.sources import ReadStats, read_biosyn_dictionary, read_ctd_diseases, read_medic, read_medic_biosyn
from spacy_sapbert.kb.sources.medic import read_ctd_tree_numbers


def test_medic_biosyn_form(fixtures: Path) -> None:
    stats = ReadStats("medic")
    concepts = {c.concept_id: c for c in read_medic_biosyn(fixtures / "sources/medic_06Jul2012.sample.txt", stats)}
    assert concepts["C567755|OMIM:613097"].canonical_name == "Tooth Agenesis, Selective, 6"
    assert concepts["C567755|OMIM:613097"].aliases == ["STHAG6"]
    assert concepts["OMIM:145250"].aliases[:2] == ["FPH", "FPH2"]  # OMIM numbers are bare in MEDIC
    assert concepts["D065008"].types == ["Disease"] and concepts["D065008"].definition is None
    assert "C" not in concepts and stats.skipped["category_root_row"] == 1  # "C||Diseases" is the MeSH category
    assert stats.records == 11 and stats.concepts == len(concepts) == 10


def test_ctd_tsv(fixtures: Path) -> None:
    stats = ReadStats("ctd")
    path = fixtures / "sources/CTD_diseases.sample.tsv"
    concepts = {c.ids[0]: c for c in read_ctd_diseases(path, stats)}
    assert concepts["C537806"].concept_id == "C537806|OMIM:203400|OMIM:610600"  # AltDiseaseIDs after the primary
    assert concepts["C579849"].concept_id == "C579849|DOID:0060395"  # CTD writes DO:DOID:0060395
    assert "Chromosome 13q deletion" not in concepts["C538288"].aliases
    assert concepts["C538288"].aliases[0] == "Chromosome 10, 10p- Partial"
    assert concepts["D058165"].definition.startswith("Condition with a variable constellation")
    # DOID:14450 is an AltDiseaseID of six rows here: "related", not "the same"; dropped from all
    assert not any("DOID:14450" in c.ids for c in concepts.values())
    assert stats.skipped["alt_id_claimed_by_several_rows"] == 6 and stats.skipped["category_root_row"] == 1
    assert [c.concept_id for c in read_medic(path)] == [c.concept_id for c in concepts.values()]
    trees = read_ctd_tree_numbers(path)
    assert trees["D009369"] == ["C04"] and trees["D001523"] == ["F03"]
    assert trees["C538288"][0] == "C16.131.260"  # the supplementary concept's place, without "/C538288"


def test_biosyn_dictionary_merges_lines_and_splits_ambiguous_names(fixtures: Path) -> None:
    """The fixture is medic_06Jul2012 lines run through BioSyn's dictionary_preprocess.py logic
    (one name per line; a name of several concepts gets their IDs '|'-joined)."""
    stats = ReadStats("dict")
    concepts = {c.concept_id: c for c in read_biosyn_dictionary(fixtures / "sources/biosyn_dictionary.sample.txt",
                                                                stats=stats)}
    assert concepts["D065008"].canonical_name == "scorpion stings" and len(concepts["D065008"].aliases) == 5
    assert "145250|266140|C563004" not in str(list(concepts))
    assert "hpp" in concepts["OMIM:145250"].aliases and "hpp" in concepts["OMIM:266140|C563004"].aliases
    assert stats.skipped["ambiguous_name_given_to_each_concept"] == 3


@pytest.mark.parametrize("content, line, fragment", [
    ("D000001||Calcimycin\nD000002 Temefos\n", 2, "no '||' separator"),
    ("D000001||Calcimycin\n||Temefos\n", 2, "missing identifier"),
    ("D000001||Calcimycin\nD000002||\n", 2, "no name"),
    ("D000001||Calcimycin\nXYZ:12||Temefos\n", 2, "unknown identifier 'XYZ:12'"),
    ("D000001||Calcimycin\nD000002||||\n", 2, "no name"),
])
def test_biosyn_form_bad_lines(tmp_path: Path, content: str, line: int, fragment: str) -> None:
    path = tmp_path / "medic.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_medic_biosyn(path))
    assert err.value.line == line and err.value.path == str(path)


def test_ctd_bad_input(fixtures: Path, tmp_path: Path) -> None:
    real = (fixtures / "sources/CTD_diseases.sample.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    header = [line for line in real if line.startswith("#")]
    rows = [line for line in real if not line.startswith("#")]
    cases = {
        "missing column": (header + rows[:1] + ["Some disease\tMESH:D000001\n"], "expected 9 tab-separated columns"),
        "unknown prefix": (header + rows[:1] + [rows[1].replace("MESH:C579849", "FOO:579849", 1)], "unknown identifier"),
        "bad header": ([line.replace("DiseaseID", "DiseaseUI") for line in header] + rows[:1], "lacks the column"),
    }
    for name, (lines, fragment) in cases.items():
        path = tmp_path / f"{name}.tsv"
        path.write_text("".join(lines), encoding="utf-8")
        with pytest.raises(InputError, match=fragment) as err:
            list(read_ctd_diseases(path))
        assert err.value.line == len(lines), name
    latin = tmp_path / "latin.tsv"
    latin.write_bytes("".join(header + ["Sjögren Syndrome\tMESH:D012859\t\t\t\t\t\t\t\n"]).encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8") as err:
        list(read_ctd_diseases(latin))
    assert err.value.line == len(header) + 1
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty file"):
        list(read_medic(empty))


def _torn(text: str, keep: int) -> str:
    """``text`` cut ``keep`` characters into its last line, as an interrupted copy leaves it."""
    start = text.rstrip("\n").rindex("\n") + 1
    return text[: start + keep]


def test_torn_last_line_of_medic_text_is_an_error_not_a_smaller_kb(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / "sources/medic_06Jul2012.sample.txt").read_text(encoding="utf-8")
    torn = _torn(text, len("266140|C563004||Pyropoikilo"))  # still a well-formed 'IDs||name' line
    path = tmp_path / "medic.txt"
    path.write_text(torn, encoding="utf-8")
    with pytest.raises(InputError, match="no line ending") as err:
        list(read_medic(path))
    assert (err.value.path, err.value.line) == (str(path), torn.count("\n") + 1)


def test_torn_last_line_of_ctd_tsv_is_an_error(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / "sources/CTD_diseases.sample.tsv").read_text(encoding="utf-8")
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    torn = _torn(text, len(last) - 10)  # cut in the last column: the column count still fits
    assert torn.rsplit("\n", 1)[1].count("\t") == 8
    path = tmp_path / "ctd.tsv"
    path.write_text(torn, encoding="utf-8")
    for reader in (read_ctd_diseases, read_medic):
        with pytest.raises(InputError, match="no line ending") as err:
            list(reader(path))
        assert (err.value.path, err.value.line) == (str(path), torn.count("\n") + 1)


def test_truncated_ctd_gzip_is_an_error_naming_file_and_line(mirror: Path, tmp_path: Path) -> None:
    data = (mirror / "vocab/CTD_diseases-2017-06-06.tsv.gz").read_bytes()
    path = tmp_path / "CTD_diseases.tsv.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="corrupt or truncated gzip data") as err:
        list(read_ctd_diseases(path))
    assert err.value.path == str(path) and err.value.line > 1000
    bad_crc = bytearray(data)
    bad_crc[-8] ^= 0xFF  # the CRC-32 in the gzip trailer
    path.write_bytes(bytes(bad_crc))
    with pytest.raises(InputError, match="CRC check failed"):
        list(read_ctd_diseases(path))
