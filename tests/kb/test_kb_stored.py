"""A KB read from its own file keeps the file's records and parses each when asked (kb/stored.py): it must
answer every question as the KB read record by record does."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.kb.stored import StoredConcepts

CONCEPTS = [
    Concept("D003924|OMIM:125853", "Diabetes Mellitus, Type 2", ["NIDDM", 'the "type 2" kind'], ["Disease"],
            'A subclass, ", "types": ["Chemical"], "definition": " in its text.'),
    Concept("D000082", "Acetaminophen", ["Paracetamol", "Ацетаминофен"], ["Chemical"]),
    Concept("OMIM:125853", "Another record of that OMIM ID", [], ["Disease", "Finding"]),
    Concept("C537502", "Schwartz-Jampel syndrome type 2", [], []),
]


def _saved(tmp_path: Path, name: str = "kb.jsonl.gz") -> tuple:
    built = KnowledgeBase(CONCEPTS, name="toy")
    path = built.to_jsonl(tmp_path / name)
    return built, KnowledgeBase.from_own_jsonl(path, built.fingerprint(), name="toy")


@pytest.mark.parametrize("name", ["kb.jsonl.gz", "kb.jsonl"])
def test_own_file_is_kept_as_records_and_answers_as_the_parsed_kb(tmp_path: Path, name: str) -> None:
    built, stored = _saved(tmp_path, name)
    assert isinstance(stored._concepts, StoredConcepts)
    assert list(stored) == list(built) and len(stored) == len(built)
    for concept in built:
        assert stored[concept.concept_id] == concept and concept.concept_id in stored
        assert stored.types_of(concept.concept_id) == tuple(concept.types)
    for any_id in ("D003924", "OMIM:125853", "D003924|OMIM:125853", "MESH:D000082", "C537502", "D999", ""):
        assert stored.resolve(any_id) == built.resolve(any_id), any_id
    assert stored.resolve("OMIM:125853").canonical_name == "Another record of that OMIM ID"  # its own record wins
    assert stored.types_of("D999") is None and stored.get("D999") is None
    assert stored.all_types() == built.all_types() == {"Disease", "Chemical", "Finding"}
    assert stored.alias_to_concepts == built.alias_to_concepts and stored.stats() == built.stats()
    stored._fingerprint = None
    assert stored.fingerprint() == built.fingerprint()


def test_adding_to_a_stored_kb_parses_it_first(tmp_path: Path) -> None:
    built, stored = _saved(tmp_path)
    extra = Concept("D000082", "Acetaminophen", ["APAP"], ["Drug"])
    built.add(extra)
    stored.add(extra)
    assert isinstance(stored._concepts, dict) and stored["D000082"] == built["D000082"]
    assert stored.types_of("D000082") == ("Chemical", "Drug") and stored.fingerprint() == built.fingerprint()


def test_adding_to_a_copy_of_a_stored_kb_leaves_the_original_as_it_was(tmp_path: Path) -> None:
    import copy

    _, stored = _saved(tmp_path)
    duplicate = copy.copy(stored)
    duplicate.add(Concept("D000001|OMIM:999", "Calcimycin", [], ["Chemical"]))
    assert duplicate.resolve("OMIM:999").concept_id == "D000001|OMIM:999"
    assert stored.resolve("OMIM:999") is None and stored.resolve_id("D000001") is None


@pytest.mark.parametrize("change", ["key order", "escaped id", "no final newline", "two records on a line",
                                    "space before the first record"])
def test_a_file_not_as_this_project_writes_it_is_parsed_record_by_record(tmp_path: Path, change: str) -> None:
    records = [c.to_dict() for c in CONCEPTS]
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    if change == "key order":
        lines[1] = json.dumps(dict(reversed(list(records[1].items()))))
    elif change == "space before the first record":
        lines[0] = " " + lines[0]
    elif change == "escaped id":
        lines[1] = lines[1].replace('"D000082"', '"D00008\\u0032"')
    text = "\n".join(lines) + ("" if change == "no final newline" else "\n")
    if change == "two records on a line":
        text = text.replace("\n", "", 1) + lines[0].replace("D003924|OMIM:125853", "D1") + "\n"
        assert StoredConcepts.parse(text.encode("utf-8")) is None
        return
    assert StoredConcepts.parse(text.encode("utf-8")) is None
    path = tmp_path / "kb.jsonl"
    path.write_text(text, encoding="utf-8")
    kb = KnowledgeBase.from_own_jsonl(path, "recorded")
    assert isinstance(kb._concepts, dict) and list(kb) == CONCEPTS


def test_types_found_elsewhere_in_a_line_are_read_from_the_record() -> None:
    lines = [json.dumps(c.to_dict(), ensure_ascii=False) for c in CONCEPTS]
    lines[2] = lines[2].replace(', "types": ', ',  "types": ')  # still its fields first, types not where expected
    stored = StoredConcepts.parse(("\n".join(lines) + "\n").encode("utf-8"))
    assert stored is not None
    assert [stored.types_of(c.concept_id) for c in CONCEPTS] == [tuple(c.types) for c in CONCEPTS]
