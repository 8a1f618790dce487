"""Issue 32, item 6: the NER's entities for a text do not depend on where the text sits in a longer
document, a span never cuts a grapheme cluster, and symbols or emoji alone are no entity."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc
from spacy.vocab import Vocab

from spacy_sapbert.default import DEFAULT_PIPELINE
from spacy_sapbert.ner.span_rules import cuts_cluster, has_word_character, whole_clusters
from spacy_sapbert.ner.windows import cut_windows, document_windows, paragraphs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "abstracts.jsonl"


@pytest.fixture(scope="module")
def ner():
    return spacy.load(DEFAULT_PIPELINE, exclude=["sapbert_linker"])


def test_paragraphs_end_at_blank_lines_only():
    tokens = ["A", "b", "\n\n", "C", "\n", "d", " \n \n", "E", "\n\n\n"]
    assert paragraphs(tokens) == [(0, 2), (3, 6), (7, 8)]
    assert paragraphs(["\n\n"]) == [] and paragraphs([]) == []


def test_a_paragraph_gets_the_windows_it_gets_alone():
    tokens = [f"w{i}" for i in range(300)]
    pieces = [[7 + i % 5] * (1 + i % 3) for i in range(300)]
    alone = cut_windows(pieces, list(range(300)), (1, 2), max_pieces=64, overlap=16)
    before = ["x"] * 37 + ["\n\n"]
    whole = document_windows(before + tokens, [[3]] * 37 + [[]] + pieces, [0] * 38 + list(range(300)), (1, 2),
                             max_pieces=64, overlap=16)
    shifted = [w for w in whole if w.tokens and w.tokens[0] >= 38]
    assert [w.input_ids for w in shifted] == [w.input_ids for w in alone]
    assert [[t - 38 for t in w.tokens] for w in shifted] == [w.tokens for w in alone]


@pytest.mark.slow
def test_the_issues_200k_document_gives_every_copy_the_entities_of_the_text_alone(ner):
    """135 copies of the 8 example abstracts (≈200k characters): every copy as the block alone."""
    texts = [json.loads(line)["text"] for line in EXAMPLES.read_text(encoding="utf-8").splitlines()]
    block = "\n\n".join(texts)
    alone = [(e.start_char, e.end_char, e.label_) for e in ner(block).ents]
    assert len(alone) > 30
    document = "\n\n".join([block] * 135)
    assert len(document) > 200_000
    doc = ner(document)
    step = len(block) + 2
    by_copy = [[] for _ in range(135)]
    for e in doc.ents:
        copy = e.start_char // step
        by_copy[copy].append((e.start_char - copy * step, e.end_char - copy * step, e.label_))
    assert [i for i, got in enumerate(by_copy) if got != alone] == []


def test_cluster_edges():
    family = "👨\u200d👩\u200d👧"
    assert not cuts_cluster(family, 0) and cuts_cluster(family, 1) and cuts_cluster(family, 2)
    assert cuts_cluster("e\u0301pilepsy", 1) and not cuts_cluster("epilepsy", 1)
    assert cuts_cluster("👍🏽", 1)  # a skin-tone modifier belongs to the hand before it
    assert has_word_character("5-FU") and has_word_character("α") and has_word_character("Ⅳ")
    assert not has_word_character("😀") and not has_word_character("®™§±") and not has_word_character(family)


def test_a_span_grows_over_tokens_that_finish_its_cluster():
    doc = Doc(Vocab(), words=["e", "\u0301pilepsy", "and", "👨", "\u200d👩"], spaces=[False, True, True, False, False])
    assert whole_clusters(doc, 0, 1) == (0, 2)
    assert whole_clusters(doc, 1, 2) == (0, 2)
    assert whole_clusters(doc, 3, 4) == (3, 5)
    assert whole_clusters(doc, 2, 3) == (2, 3)
    assert whole_clusters(doc, 5, 5) == (5, 5)  # a span trimmed to nothing at the end of the doc


def test_emoji_and_symbols_are_no_entities_and_no_span_cuts_a_cluster(ner):
    text = "The patient 😀 had 👨\u200d👩\u200d👧 asthma and 🧪 aspirin 💊 👍🏽 ✅ ® ™ § ± 🇫🇷 with diabetes."
    doc = ner(text)
    assert all(has_word_character(e.text) for e in doc.ents), [e.text for e in doc.ents]
    assert not any(cuts_cluster(text, e.start_char) or cuts_cluster(text, e.end_char) for e in doc.ents)
    assert {"asthma", "aspirin", "diabetes"} <= {e.text for e in doc.ents}
