"""Predicted concept vs gold IDs (spacy_sapbert.kb.matching): the one rule behind Acc@k (PubTator and BioSyn
format), the re-ranker's and the generative linker's data, and the NER + linking scores."""
from __future__ import annotations

import pytest

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.formats.biosyn import gold_ids
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


def test_without_a_kb_ids_compare_as_written_as_sapbert_scores() -> None:
    """SapBERT's ``check_label``, which the published BioSyn-format Acc@1 (and so its re-ranker and
    generative data) relies on: the prediction splits on "|" only, gold IDs are taken as given."""
    gold = gold_ids("D2+D9")  # a composite query: each part is gold
    assert gold == {"D2", "D9"}
    assert is_gold("D9|D2", gold, None) and is_gold("D7|D2", {"D2"}, None)  # any ID of a joined one
    assert not is_gold("D2+D9", gold, None)  # a "+" dictionary entry is one ID, no composite part
    assert is_gold("D1|OMIM:100100", {"OMIM:100100"}, None)  # an alternative ID listed beside the MeSH one
    assert not is_gold("D1", gold_ids("-1"), None) and not is_gold("D1", [], None)  # no concept: never right
    assert not is_gold("MESH:D1", {"D1"}, None) and not is_gold("d1", {"D1"}, None)  # no case or prefix folding
    assert not is_gold(" D2", {"D2"}, None)  # nor space trimming: as SapBERT compares


def test_with_a_kb_the_prediction_goes_through_the_id_grammar(kb: KnowledgeBase) -> None:
    assert is_gold("MESH:D003042", ["D003042"], kb)  # MESH: prefix dropped, as the KB spells it
    assert is_gold("OMIM:145500", ["D006973"], kb)  # an equivalent ID names the same concept
    assert not is_gold("MESH:D003042", ["D003042"], None)
