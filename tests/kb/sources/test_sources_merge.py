"""SSSOM mapping tables (real MONDO rows) and the cross-vocabulary merge with its guards."""
from __future__ import annotations

from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept
from spacy_sapbert.kb.sources import Mapping, ReadStats, merge_equivalent, read_obograph, read_sssom


def test_read_sssom(fixtures: Path) -> None:
    stats = ReadStats("mesh")
    mappings = list(read_sssom(fixtures / "sources/mondo_exactmatch_mesh.sample.sssom.tsv", stats=stats))
    pairs = {(m.subject_id, m.object_id) for m in mappings}
    assert ("MONDO:0005015", "D003920") in pairs  # mesh:D003920 → bare MeSH
    assert all(m.predicate_id == "skos:exactMatch" and m.source == "mondo_exactmatch_mesh" for m in mappings)
    assert stats.skipped == {"obsolete_subject": 1, "malformed_id": 1}  # MONDO's mesh:D00007727 typo is counted
    assert next(m for m in mappings if m.subject_id == "MONDO:0005148").subject_label == "type 2 diabetes mellitus"


def test_sssom_keeps_only_wanted_predicates(tmp_path: Path, fixtures: Path) -> None:
    text = (fixtures / "sources/mondo_exactmatch_doid.sample.sssom.tsv").read_text(encoding="utf-8")
    path = tmp_path / "broad.sssom.tsv"
    path.write_text(text.replace("skos:exactMatch\tDOID:9352", "skos:broadMatch\tDOID:9352"), encoding="utf-8")
    stats = ReadStats("doid")
    assert [m.object_id for m in read_sssom(path, stats=stats)] == ["DOID:9351"]
    assert stats.skipped["predicate_skos:broadMatch"] == 1


@pytest.mark.parametrize("edit, offset, fragment", [
    (lambda t: t.replace("object_id", "target_id"), 0, "lacks the column"),
    (lambda t: t.replace("DOID:9351\tdiabetes mellitus", "FOO:9351\tdiabetes mellitus"), 1, "unknown identifier"),
    (lambda t: t.replace("\tDOID:9351\tdiabetes mellitus\tsemapv:ManualMappingCuration", "\tDOID:9351"), 1,
     "expected 6 tab-separated columns"),
])
def test_sssom_bad_input(tmp_path: Path, fixtures: Path, edit, offset: int, fragment: str) -> None:
    text = (fixtures / "sources/mondo_exactmatch_doid.sample.sssom.tsv").read_text(encoding="utf-8")
    line = sum(1 for row in text.splitlines() if row.startswith("#")) + 1 + offset  # header row, first mapping
    path = tmp_path / "bad.sssom.tsv"
    path.write_text(edit(text), encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_sssom(path))
    assert err.value.line == line and err.value.path == str(path)


def _c(cid: str, name: str, *aliases: str, types=("Disease",)) -> Concept:
    return Concept(cid, name, list(aliases), list(types), None)


def test_merge_through_mondo_glue(fixtures: Path) -> None:
    mesh = [_c("D003920", "Diabetes Mellitus"), _c("D003924", "Diabetes Mellitus, Type 2", "NIDDM")]
    medic = [_c("D003924|OMIM:125853", "Diabetes Mellitus, Type 2", "Type 2 Diabetes")]
    doid = list(read_obograph(fixtures / "sources/doid.sample.json", "DOID", types=["Disease"]))
    mappings = [m for t in ("mesh", "doid", "omim")
                for m in read_sssom(fixtures / f"sources/mondo_exactmatch_{t}.sample.sssom.tsv")]
    merged, report = merge_equivalent([("mesh", mesh), ("medic", medic), ("doid", doid)], mappings)
    by_primary = {c.ids[0]: c for c in merged}
    t2d = by_primary["D003924"]
    assert t2d.concept_id == "D003924|OMIM:125853|DOID:9352|MONDO:0005148"  # members' IDs, then glue
    assert t2d.canonical_name == "Diabetes Mellitus, Type 2"  # the first source's name
    assert {"NIDDM", "Type 2 Diabetes", "type 2 diabetes mellitus"} <= set(t2d.aliases)
    assert by_primary["D003920"].concept_id == "D003920|DOID:9351|MONDO:0005015"
    assert report.concepts_in == 5 and report.concepts_out == 2 and report.merges == 3
    assert report.component_sizes == {3: 1, 2: 1}
    # MONDO:0001046 maps to two OMIM entries: one-to-many, both skipped
    assert report.skipped["mondo_exactmatch_omim: one-to-many"] == 2


def test_merge_refuses_to_chain_distinct_concepts() -> None:
    """D1 and D2 are two MeSH descriptors; a sloppy xref table says both equal DOID:1 — the
    second union is refused; a table saying X:1 maps to two OMIM entries is skipped."""
    mesh = [_c("D000001", "alpha"), _c("D000002", "beta")]
    doid = [_c("DOID:1", "alpha or beta"), _c("DOID:2", "gamma")]
    mappings = [
        Mapping("DOID:1", "D000001", source="a"),
        Mapping("MONDO:0000001", "DOID:1", source="b"),
        Mapping("MONDO:0000001", "D000002", source="c"),      # would chain D1 - DOID:1 - MONDO - D2
        Mapping("DOID:2", "OMIM:100001", source="d"),
        Mapping("DOID:2", "OMIM:100002", source="d"),         # one-to-many within table d
        Mapping("MONDO:0000002", "OMIM:100003", source="e"),
        Mapping("MONDO:0000003", "OMIM:100003", source="e"),  # many-to-one within table e
    ]
    merged, report = merge_equivalent([("mesh", mesh), ("doid", doid)], mappings)
    ids = sorted(c.concept_id for c in merged)
    assert ids == ["D000001|DOID:1|MONDO:0000001", "D000002", "DOID:2"]
    assert report.refused == {"c: would join two mesh concepts": 1}
    assert report.skipped == {"d: one-to-many": 2, "e: many-to-one": 2}
    assert max(report.component_sizes) == 2


def test_merge_refuses_two_ids_of_one_vocabulary_and_is_order_independent_of_input_sets() -> None:
    doid = [_c("DOID:1", "x")]
    orphanet = [_c("Orphanet:1", "x")]
    mappings = [Mapping("DOID:1", "OMIM:100001", source="a"), Mapping("Orphanet:1", "OMIM:100002", source="b"),
                Mapping("DOID:1", "Orphanet:1", source="c")]  # would put OMIM:100001 and OMIM:100002 together
    merged, report = merge_equivalent([("doid", doid), ("orphanet", orphanet)], mappings)
    assert len(merged) == 2 and report.refused == {"c: would join two OMIM IDs": 1}
    again, _ = merge_equivalent([("doid", doid), ("orphanet", orphanet)], mappings)
    assert again == merged  # deterministic


def test_torn_last_line_of_an_sssom_table_is_an_error(fixtures: Path, tmp_path: Path) -> None:
    text = (fixtures / "sources/mondo_exactmatch_mesh.sample.sssom.tsv").read_text(encoding="utf-8")
    torn = text.rstrip("\n")[:-len("ManualMappingCuration")]  # the columns still count right
    path = tmp_path / "mondo_exactmatch_mesh.sssom.tsv"
    path.write_text(torn, encoding="utf-8")
    with pytest.raises(InputError, match="no line ending") as err:
        list(read_sssom(path))
    assert (err.value.path, err.value.line) == (str(path), torn.count("\n") + 1)
