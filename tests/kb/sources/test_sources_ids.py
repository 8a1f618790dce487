"""Identifier spellings and the shared file opening (gzip, UTF-8, empty files)."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.ids import MalformedId, normalize_curie, parse_id, uri_to_curie, vocabulary
from spacy_sapbert.util.textfile import iter_lines, load_json


@pytest.mark.parametrize("raw, expected", [
    ("D012345", "D012345"), ("MESH:D012345", "D012345"), ("mesh:C567755", "C567755"), ("MSH:D000077274", "D000077274"),
    ("OMIM:613097", "OMIM:613097"), ("MIM:613097", "OMIM:613097"), ("DO:DOID:0060395", "DOID:0060395"),
    ("DOID:9352", "DOID:9352"), ("ORDO:558", "Orphanet:558"), ("ORPHA:558", "Orphanet:558"),
    ("Orphanet:C001", "Orphanet:C001"), ("NCI:C50706", "NCIT:C50706"), ("UMLS_CUI:C0011127", "UMLS:C0011127"),
    ("HP:0001250", "HP:0001250"), ("MONDO:0005148", "MONDO:0005148"), ("CUI:C0011849", "UMLS:C0011849"),
    ("umls:c0011849", "UMLS:C0011849"),
])
def test_upstream_spellings_become_one_form(raw: str, expected: str) -> None:
    assert normalize_curie(raw) == expected


def test_unknown_and_malformed_ids() -> None:
    assert normalize_curie("SNOMEDCT_US:108369006") is None
    assert normalize_curie("C0011849") is None  # a bare CUI is not MeSH (C + 7 digits)
    with pytest.raises(MalformedId):
        normalize_curie("mesh:D00007727")  # a real typo in MONDO's MeSH table
    with pytest.raises(InputError, match="unknown identifier") as err:
        parse_id("FOO:12", "f.tsv", 3, "ids")
    assert (err.value.path, err.value.line, err.value.field) == ("f.tsv", 3, "ids")
    with pytest.raises(InputError, match="malformed OMIM"):
        parse_id("OMIM:12x", "f.tsv", 4)
    assert parse_id("613097", bare_numeric="OMIM") == "OMIM:613097"


def test_uris_and_vocabularies() -> None:
    assert uri_to_curie("http://purl.obolibrary.org/obo/DOID_9352") == "DOID:9352"
    assert uri_to_curie("http://www.orpha.net/ORDO/Orphanet_124") == "Orphanet:124"
    assert uri_to_curie("HP:0001250") == "HP:0001250"
    assert vocabulary("D003924") == "MESH" and vocabulary("OMIM:125853") == "OMIM" and vocabulary("UMLS:C0011849") == "UMLS"


def test_iter_lines_reads_gzip_by_content_and_drops_bom(tmp_path: Path) -> None:
    path = tmp_path / "no-gz-suffix.txt"
    path.write_bytes(gzip.compress("\ufeffa\r\nb\n".encode("utf-8")))
    assert list(iter_lines(path)) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize("content, line, fragment", [
    (b"ok\n\xe9t\xe9\n", 2, "not UTF-8"),
    (b"\n  \n", None, "empty file"),
    (b"", None, "empty file"),
])
def test_iter_lines_errors(tmp_path: Path, content: bytes, line, fragment: str) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=fragment) as err:
        list(iter_lines(path))
    assert err.value.line == line and err.value.path == str(path)


def test_truncated_gzip_and_bad_json(tmp_path: Path) -> None:
    truncated = tmp_path / "t.gz"
    data = gzip.compress(b"line\n" * 2000)
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="gzip"):
        list(iter_lines(truncated))
    bad = tmp_path / "bad.json"
    bad.write_text('{"graphs": [\n  {"nodes": [}\n]}', encoding="utf-8")
    with pytest.raises(InputError, match="invalid JSON") as err:
        load_json(bad)
    assert err.value.line == 2
    with pytest.raises(InputError, match="not found"):
        load_json(tmp_path / "missing.json")
