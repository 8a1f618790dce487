"""`add_names_by_id` and `sapbert kb add-names`: another KB's names lent to the concepts it shares an ID with."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli.app import app
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.kb.names_by_id import add_names_by_id
from spacy_sapbert.kb.normalize import normalize


def _base() -> KnowledgeBase:
    return KnowledgeBase([
        Concept("D001763", "Blepharoptosis", ["Ptosis, Eyelid"], ["Disease"]),
        Concept("D006934", "Hypercalcemia", [], ["Disease"]),
        Concept("D003324|OMIM:608320", "Coronary Artery Disease", [], ["Disease"]),
        Concept("D002118", "Calcium", ["Calcium-40"], ["Chemical"]),
    ], name="base")


def _other() -> KnowledgeBase:
    return KnowledgeBase([
        # shares D001763: lends "Ptosis" and "Drooping eyelid"; "Blepharoptosis" is a base name already
        Concept("D001763|HP:0000508|MONDO:1", "Ptosis", ["Blepharoptosis", "Drooping eyelid", "Shared wording"],
                ["Phenotype"]),
        # shares the OMIM part of a joined ID; "CAD" is too short
        Concept("MONDO:2|OMIM:608320", "Coronary heart disease", ["CAD"], ["Disease"]),
        # shares an ID with two base concepts: a merge the base does not make, so nothing is lent
        Concept("MONDO:3|D006934|D001763", "Hypercalcaemia and ptosis", ["Hypercalcaemia"], ["Disease"]),
        # another concept gives "Shared wording" to a second base concept: it goes to neither
        Concept("MONDO:4|D006934", "Calcium excess", ["Shared wording"], ["Disease"]),
        # a chemical: left out by types=["Disease"]
        Concept("CHEBI:29108|D002118", "Calcium(2+)", [], ["Chemical"]),
        # a disease and a chemical of the base joined: a merge across types lends nothing, whatever types asks for
        Concept("MONDO:6|D006934|D002118", "Serum calcium raised", [], ["Disease"]),
        # no shared ID
        Concept("MONDO:5", "Something else", [], ["Disease"]),
    ], name="other")


def _names(kb: KnowledgeBase, cid: str) -> list:
    return kb[cid].names


def test_names_go_to_the_one_concept_sharing_an_id_and_nothing_changes_owner() -> None:
    base = _base()
    extended, report = add_names_by_id(base, _other(), types=["Disease"], min_chars=5)
    assert _names(extended, "D001763") == ["Blepharoptosis", "Ptosis, Eyelid", "Ptosis", "Drooping eyelid"]
    assert _names(extended, "D003324|OMIM:608320") == ["Coronary Artery Disease", "Coronary heart disease"]
    assert _names(extended, "D006934") == ["Hypercalcemia", "Calcium excess"]
    assert _names(extended, "D002118") == ["Calcium", "Calcium-40"]  # a Chemical: not of the types asked for
    assert normalize("Shared wording") not in extended.alias_to_concepts
    assert normalize("Hypercalcaemia") not in extended.alias_to_concepts  # only from the concept joining two
    assert normalize("Serum calcium raised") not in extended.alias_to_concepts  # joins a Disease and a Chemical
    assert len(extended) == len(base) and set(c.concept_id for c in extended) == set(c.concept_id for c in base)
    assert _names(base, "D001763") == ["Blepharoptosis", "Ptosis, Eyelid"]  # the base KB is left as it was
    assert report["names_added"] == 4 and report["concepts_gaining_names"] == 3
    assert report["concepts_joining_several"] == 2 and report["concepts_of_other_types"] == 1
    assert report["concepts_sharing_no_id"] == 1 and report["concepts_lending"] == 3
    assert report["names_too_short"] == 1 and report["names_for_several_base_concepts"] == 1
    assert report["names_already_in_base"] == 1


def test_without_types_every_concept_may_gain_and_min_chars_keeps_short_names() -> None:
    extended, report = add_names_by_id(_base(), _other(), types=None, min_chars=1)
    assert _names(extended, "D002118") == ["Calcium", "Calcium-40", "Calcium(2+)"]
    assert "CAD" in _names(extended, "D003324|OMIM:608320")
    assert report["types"] is None and report["names_too_short"] == 0 and report["concepts_of_other_types"] == 0


def test_a_type_no_base_concept_has_is_an_error_not_an_empty_result() -> None:
    with pytest.raises(InputError, match="Phenotype: no concept of base has this type") as error:
        add_names_by_id(_base(), _other(), types=["Disease", "Phenotype"])
    assert error.value.field == "--types"


def test_cli_writes_a_new_file_and_never_an_input(tmp_path: Path) -> None:
    base, other, out = tmp_path / "base.jsonl", tmp_path / "other.jsonl", tmp_path / "out.jsonl.gz"
    _base().to_jsonl(base)
    _other().to_jsonl(other)
    before = base.read_bytes()
    runner = CliRunner()
    result = runner.invoke(app, ["kb", "add-names", str(base), str(other), "-o", str(base), "--overwrite"])
    assert result.exit_code != 0 and "files read" in result.output
    assert base.read_bytes() == before
    result = runner.invoke(app, ["kb", "add-names", str(base), str(other), "-o", str(out), "--types", "Disease",
                                 "--report", str(tmp_path / "report.json")])
    assert result.exit_code == 0, result.output
    written = KnowledgeBase.from_jsonl(out)
    assert _names(written, "D001763") == ["Blepharoptosis", "Ptosis, Eyelid", "Ptosis", "Drooping eyelid"]
    assert json.loads((tmp_path / "report.json").read_text())["names_added"] == 4
    again = runner.invoke(app, ["kb", "add-names", str(base), str(other), "-o", str(out)])
    assert again.exit_code != 0 and "exists" in again.output
