"""Predicted concept vs gold IDs (spacy_sapbert.kb.matching): the one rule behind Acc@k and the NER + linking scores."""
from __future__ import annotations

import pytest

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.kb.matching import concept_ids, concept_key, is_gold


@pytest.fixture
def kb() -> KnowledgeBase:
    return KnowledgeBase([
        Concept("D051437|OMIM:123456", "renal failure"),
        Concept("D006973|OMIM:145500|UMLS:C0020538", "hypertension"),
        Concept("D003042", "cocaine"),
    ], name="tiny")


def test_concept_ids_of_a_joined_a_single_and_an_unknown_id(kb: KnowledgeBase) -> None:
    assert concept_ids("D051437|OMIM:123456", kb) == ("D051437", "OMIM:123456")
    assert concept_ids("OMIM:145500", kb) == ("D006973", "OMIM:145500", "UMLS:C0020538")
    assert concept_ids("MESH:D003042", kb) == ("D003042",)  # through the ID grammar
    assert concept_ids("D999999|OMIM:1", kb) == ("D999999", "OMIM:1")
    assert concept_ids("D051437|OMIM:123456", None) == ("D051437", "OMIM:123456")


def test_concept_key_resolves_equivalent_ids(kb: KnowledgeBase) -> None:
    assert concept_key("OMIM:123456", kb) == "D051437"
    assert concept_key("D051437|OMIM:123456", kb) == "D051437"
    assert concept_key("D999999", kb) == "D999999"
    assert concept_key("OMIM:123456", None) == "OMIM:123456"


def test_is_gold_through_any_equivalent_id(kb: KnowledgeBase) -> None:
    predicted = "D006973|OMIM:145500|UMLS:C0020538"
    assert is_gold(predicted, ["OMIM:145500"], kb) and is_gold(predicted, ["UMLS:C0020538"], kb)
    assert is_gold(predicted, ["D003042", "D006973"], kb)
    assert not is_gold(predicted, ["D003042"], kb) and not is_gold(predicted, [], kb)
    assert is_gold("D003042", ["D003042"], None) and not is_gold("D003042", ["D0"], None)


def test_an_id_two_concepts_carry_is_gold_for_both() -> None:
    """MEDIC lists one OMIM ID under two diseases: either concept is right for it."""
    kb = KnowledgeBase([Concept("D1|OMIM:100100", "a"), Concept("D2|OMIM:100100", "b")])
    assert is_gold("D1|OMIM:100100", ["OMIM:100100"], kb) and is_gold("D2|OMIM:100100", ["OMIM:100100"], kb)
    assert concept_key("OMIM:100100", kb) == "D1"  # the key is the first concept that carries it
