"""Coordinated mentions: which spans are split into the concepts they name, and how."""
from __future__ import annotations

import pytest

from spacy_sapbert.linking.composite import split_coordination


@pytest.mark.parametrize("mention, parts", [
    ("renal or hepatic toxicity", ["renal toxicity", "hepatic toxicity"]),
    ("sporadic breast, brain, prostate and kidney cancer",
     ["sporadic breast cancer", "brain cancer", "prostate cancer", "kidney cancer"]),
    ("carcinoma of the breast and ovary", ["carcinoma of breast", "carcinoma of ovary"]),
    ("breast/ovarian  cancer", ["breast cancer", "ovarian cancer"]),       # a shared head after the slash
    ("nausea and vomiting", []),                                           # two whole names: no shared head
    ("breast cancer and/or ovarian", []),
    ("Hemorrhagic cystitis", []),
    ("spinocerebellar ataxias 1 and 2", []),
    ("HIV/AIDS", []),
    ("breast and breast cancer", []),                                      # the same part twice
])
def test_split_coordination(mention, parts):
    assert split_coordination(mention) == parts


def test_a_span_that_is_a_kb_name_as_it_stands_is_one_concept():
    from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
    from spacy_sapbert.linking.composite import composite_parts

    kb = KnowledgeBase([Concept("D061325", "Hereditary Breast and Ovarian Cancer Syndrome",
                                ["Breast and Ovarian Cancer"], ["Disease"])])
    kb.add(Concept("D006973", "Hypertension", [], ["Disease"]))
    kb.add(Concept("D012176", "Retinaldehyde", ["retinal"], ["Chemical"]))
    texts = ["breast and ovarian cancer", "renal or hepatic toxicity", "nausea", "hypertension and diabetes mellitus",
             "pineal and retinal tumours"]
    # "hypertension and diabetes mellitus" coordinates whole names (its own word "hypertension" is a disease's),
    # not modifiers of "mellitus"; "retinal" names a chemical, so in a DISEASE span it still modifies "tumours"
    disease = frozenset({"Disease"})
    assert list(composite_parts(texts, kb, [disease] * 5)) == [
        (1, "renal toxicity"), (1, "hepatic toxicity"), (4, "pineal tumours"), (4, "retinal tumours")]
    assert list(composite_parts(texts, kb))[:2] == [(1, "renal toxicity"), (1, "hepatic toxicity")]
    assert len(list(composite_parts(texts, kb))) == 2  # any type: "retinal" is a name too


def test_a_long_span_that_almost_fits_is_answered_at_once():
    """Word groups are word( word)*: with (word ?)+ this span took minutes (exponential backtracking)."""
    span = "breast/ovarian cancer susceptibility gene family member abcdefghijklmnopqrstuvwxyz 1"
    assert split_coordination(span) == []
    assert split_coordination("carcinoma of the breast and ovary " + "x" * 60 + " 1") == [
        "carcinoma of breast", f"carcinoma of ovary {'x' * 60}"]
