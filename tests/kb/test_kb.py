"""The KnowledgeBase model: merging, names and IDs, JSONL(.gz) round trips, errors, scispaCy interop."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase, merge_concepts, pair_count
from spacy_sapbert.kb.normalize import normalize


def _kb() -> KnowledgeBase:
    return KnowledgeBase([
        Concept("D003924|OMIM:125853", "Diabetes Mellitus, Type 2", ["NIDDM", "Type 2 Diabetes"], ["Disease"],
                "A subclass of DIABETES MELLITUS that is not INSULIN-responsive."),
        Concept("D000082", "Acetaminophen", ["Paracetamol", "APAP", "paracetamol"], ["Chemical"]),
        Concept("C537502", "Schwartz-Jampel syndrome type 2", [], ["Disease"]),
    ], name="toy")


def test_records_of_one_concept_merge_deterministically() -> None:
    first = Concept("D1", "Heart attack", ["MI"], ["Disease"], None)
    second = Concept("D1", "Myocardial infarction", ["MI", "Heart attack", "cardiac infarction"], ["Finding"], "def")
    merged = merge_concepts(first, second)
    assert merged == Concept("D1", "Heart attack", ["MI", "Myocardial infarction", "cardiac infarction"],
                             ["Disease", "Finding"], "def")
    kb_ab = KnowledgeBase([first, second])
    kb_ba = KnowledgeBase([second, first])
    assert len(kb_ab) == 1 and kb_ab["D1"] == merged
    assert kb_ba["D1"].canonical_name == "Myocardial infarction"  # the first record's name wins


def test_names_are_normalised_and_resolve_finds_equivalent_ids() -> None:
    kb = _kb()
    assert kb.alias_to_concepts[normalize("paracetamol!")] == ["D000082"]
    assert kb.alias_to_concepts[normalize("TYPE-2 diabetes")] == ["D003924|OMIM:125853"]
    assert normalize("aspirin") not in kb.alias_to_concepts
    assert kb.resolve("OMIM:125853").canonical_name == "Diabetes Mellitus, Type 2"
    assert kb.resolve("D003924") is kb.resolve("OMIM:125853")
    assert kb.resolve("D999999") is None
    assert kb["D003924|OMIM:125853"].ids == ("D003924", "OMIM:125853")


def test_stats_count_normalised_names_and_capped_pairs() -> None:
    stats = _kb().stats()
    # acetaminophen: "acetaminophen", "paracetamol", "apap" (the lower-case duplicate collapses) -> 3 names, 3 pairs
    assert stats.concepts == 3 and stats.names == 3 + 3 + 1
    assert stats.concepts_with_synonyms == 2 and stats.positive_pairs == 3 + 3
    assert pair_count(11) == 50 and pair_count(2) == 1 and pair_count(1) == 0


@pytest.mark.parametrize("name", ["kb.jsonl", "kb.jsonl.gz"])
def test_jsonl_round_trip(tmp_path: Path, name: str) -> None:
    kb = _kb()
    path = kb.to_jsonl(tmp_path / name)
    if name.endswith(".gz"):
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    again = KnowledgeBase.from_jsonl(path)
    assert list(again) == list(kb) and again.fingerprint() == kb.fingerprint() and again.name == "kb"


def test_fingerprint_ignores_record_order() -> None:
    concepts = list(_kb())
    assert KnowledgeBase(concepts).fingerprint() == KnowledgeBase(concepts[::-1]).fingerprint()
    changed = concepts[:2] + [concepts[2]._replace(aliases=["SJS2"])]
    assert KnowledgeBase(changed).fingerprint() != KnowledgeBase(concepts).fingerprint()
    growing = KnowledgeBase(concepts)
    before = growing.fingerprint()  # computed once and kept ...
    growing.add(Concept("D999", "new concept", [], [], None))
    assert growing.fingerprint() != before  # ... until the KB changes


@pytest.mark.parametrize("content, line, fragment", [
    ('{"concept_id": "D1", "canonical_name": "a"}\n{"concept_id": "D2", "canonical_name": \n', 2, "invalid JSON"),
    ('{"concept_id": "", "canonical_name": "a"}\n', 1, "concept_id"),
    ('{"concept_id": "D1", "canonical_name": "a", "aliases": "b"}\n', 1, "aliases"),
    ('{"concept_id": "D1", "canonical_name": "a", "synonyms": []}\n', 1, "unknown field"),
    ('["D1", "a"]\n', 1, "expected a JSON object"),
])
def test_bad_kb_lines_name_file_and_line(tmp_path: Path, content: str, line: int, fragment: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as err:
        KnowledgeBase.from_jsonl(path)
    assert err.value.line == line and err.value.path == str(path) and fragment in str(err.value)


def test_bad_encoding_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"concept_id": "D1", "canonical_name": "a"}\n{"concept_id": "D2", "canonical_name": "Sjögren"}\n'
                     .encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8") as err:
        KnowledgeBase.from_jsonl(path)
    assert err.value.line == 2
    with pytest.raises(InputError, match="not found"):
        KnowledgeBase.from_jsonl(tmp_path / "missing.jsonl")


def test_our_kb_loads_in_scispacy(tmp_path: Path) -> None:
    from scispacy.linking_utils import KnowledgeBase as ScispacyKB

    kb = _kb()
    path = kb.to_jsonl(tmp_path / "ours.jsonl")  # scispaCy reads plain JSONL (it has no gzip support)
    theirs = ScispacyKB(str(path))
    assert set(theirs.cui_to_entity) == {c.concept_id for c in kb}
    entity = theirs.cui_to_entity["D000082"]
    assert entity.canonical_name == "Acetaminophen" and entity.types == ["Chemical"]
    assert theirs.alias_to_cuis["Paracetamol"] == {"D000082"}
    assert theirs.cui_to_entity["D003924|OMIM:125853"].definition.startswith("A subclass")


def test_scispacy_entities_load_here(tmp_path: Path) -> None:
    """Entities as scispaCy itself writes them (its Entity NamedTuple, as a JSON list and as
    JSONL, the way its export_umls_json.py script dumps them) load here, gzipped or not."""
    from scispacy.linking_utils import Entity, KnowledgeBase as ScispacyKB

    entities = [Entity("C0011849", "Diabetes Mellitus", ["DM", "diabetes"], ["T047"], "A heterogeneous group."),
                Entity("C0000005", "(131)I-Macroaggregated Albumin", ["MAA"], ["T116", "T121"])]
    as_list = tmp_path / "scispacy.json"
    as_list.write_text(json.dumps([e._asdict() for e in entities]), encoding="utf-8")
    as_lines = tmp_path / "scispacy.jsonl.gz"
    with gzip.open(as_lines, "wt", encoding="utf-8") as out:
        for entity in entities:
            out.write(json.dumps(entity._asdict()) + "\n")
    assert set(ScispacyKB(str(as_list)).cui_to_entity) == {"C0011849", "C0000005"}
    for path in (as_list, as_lines):
        kb = KnowledgeBase.from_jsonl(path)
        assert [c.concept_id for c in kb] == ["C0011849", "C0000005"]
        assert kb["C0000005"].types == ["T116", "T121"] and kb["C0011849"].definition == "A heterogeneous group."
        assert kb.alias_to_concepts["dm"] == ["C0011849"]


@pytest.mark.parametrize("content, line, field", [
    ('{"concept_id": "D1", "canonical_name": ""}\n', 1, "canonical_name"),
    ('{"concept_id": "D1", "canonical_name": "a"}\n{"concept_id": "D2", "canonical_name": " \\t "}\n', 2,
     "canonical_name"),
    ('{"concept_id": "   ", "canonical_name": "a"}\n', 1, "concept_id"),
    ('{"concept_id": "D1|", "canonical_name": "a"}\n', 1, "concept_id"),
    ('{"concept_id": "D1|| D2", "canonical_name": "a"}\n', 1, "concept_id"),
])
def test_empty_names_and_ids_are_errors_with_their_field(tmp_path: Path, content: str, line: int, field: str) -> None:
    """The error text promises "a non-empty string": an empty or blank canonical name (or an
    empty part of a joined ID) is refused, not loaded as a concept nobody can find."""
    path = tmp_path / "blank.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as err:
        KnowledgeBase.from_jsonl(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)


@pytest.mark.parametrize("name", ["dup.jsonl", "dup.json"])
def test_duplicate_concept_id_in_a_kb_file_is_an_error_naming_both_lines(tmp_path: Path, name: str) -> None:
    records = [{"concept_id": "D1", "canonical_name": "Heart attack"},
               {"concept_id": "D2", "canonical_name": "Stroke"},
               {"concept_id": "D1", "canonical_name": "Myocardial infarction"}]
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(records), encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(InputError, match=r"duplicate concept_id 'D1' \(first at line 1\)") as err:
        KnowledgeBase.from_jsonl(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 3, "concept_id")


def test_building_a_kb_counts_the_records_it_merges() -> None:
    """Merging records of one concept_id is what KnowledgeBase(...) is for (builds from several
    sources); it is counted so a build can report it, never silent."""
    kb = KnowledgeBase([Concept("D1", "a"), Concept("D2", "b"), Concept("D1", "c"), Concept("D1", "d")])
    assert len(kb) == 2 and kb.merged_records == 2
    assert KnowledgeBase(list(kb)).merged_records == 0


def test_resolve_accepts_joined_ids() -> None:
    """``ent.kb_id_`` is a full concept_id, which may join several IDs; the README tells users
    to hand it to resolve()."""
    kb = _kb()
    joined = kb.resolve("D003924|OMIM:125853")
    assert joined is not None and joined.canonical_name == "Diabetes Mellitus, Type 2"
    assert kb.resolve("OMIM:125853|D003924") is joined  # any order
    assert kb.resolve("D999999|OMIM:125853") is joined  # the first part that resolves
    assert kb.resolve("MESH:D000082").canonical_name == "Acetaminophen"  # upstream spellings, via ids.py
    assert kb.resolve("mesh:D000082|D999999").canonical_name == "Acetaminophen"
    for unknown in ("D999999|D888888", "", "|", "D1||"):
        assert kb.resolve(unknown) is None


def test_resolve_prefers_the_concept_whose_id_is_the_whole_string() -> None:
    kb = KnowledgeBase([Concept("D000001|OMIM:100100", "joined"), Concept("OMIM:100100", "alone")])
    assert kb.resolve("OMIM:100100").canonical_name == "alone"
    assert kb.resolve("D000001").canonical_name == "joined"
