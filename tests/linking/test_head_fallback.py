"""``head_fallback``: a span with no concept at the threshold takes its head's, unless the head is an exclusion."""
from __future__ import annotations

import pytest
import spacy

import spacy_sapbert
from spacy_sapbert.linking.head_fallback import head_of, link_heads
from spacy_sapbert.linking.stages import Mentions

TEXT = "Delayed neuropathy and adenovirus pneumonia followed; ADC abnormalities were seen."


def _span(text: str, start: int, end: int):
    doc = spacy.blank("en")(text)
    return doc[start:end]


@pytest.mark.parametrize("text, start, end, head", [
    ("delayed neuropathy", 0, 2, "neuropathy"),
    ("cirrhosis of the liver", 0, 4, "liver"),  # "of the" are never a head's first words
    ("micronodular cirrhosis of the liver", 0, 5, "cirrhosis of the liver"),
    ("neuropathy", 0, 1, None),
    ("type - 2", 0, 3, "2"),
    ("abnormal of the", 0, 3, None),
])
def test_head_of_drops_the_first_word_and_the_function_words_after_it(text, start, end, head):
    found = head_of(_span(text, start, end))
    assert (found.text if found is not None else None) == head


def test_link_heads_fills_only_empty_results_of_the_labels_asked_with_the_heads_that_pass():
    doc = spacy.blank("en")("delayed neuropathy . prolonged coma . chronic abnormalities . HD . acute gout")
    spans = [doc[0:2], doc[3:5], doc[6:8], doc[9:10], doc[11:13]]
    texts = [s.text for s in spans]
    texts[4] = "acute gouty arthritis"  # an abbreviation's long form: its query is not its text, left alone
    labels = ["DISEASE", "CHEMICAL", "DISEASE", "DISEASE", "DISEASE"]
    results = [[], [], [], [], []]
    asked = []

    def link(mentions, thresholds):
        asked.append((list(mentions.texts), list(thresholds)))
        return [[("D1", 0.9)] if text == "neuropathy" else [] for text in mentions.texts]

    taken = link_heads(Mentions(spans, texts, None), labels, results, [0.65] * 5, ["DISEASE"],
                       lambda label, span: span.text == "abnormalities", link)
    # CHEMICAL is not asked for, "abnormalities" is an exclusion, "HD" has one word
    assert asked == [(["neuropathy"], [0.65])]
    assert taken == 1 and results == [[("D1", 0.9)], [], [], [], []]


def test_link_heads_keeps_results_a_span_has():
    doc = spacy.blank("en")("delayed neuropathy")
    results = [[("D2", 0.7)]]
    taken = link_heads(Mentions([doc[0:2]], ["delayed neuropathy"], None), ["DISEASE"], results, [0.65],
                       ["DISEASE"], lambda label, span: False, lambda mentions, thresholds: pytest.fail("asked"))
    assert taken == 0 and results == [[("D2", 0.7)]]


@pytest.fixture(scope="module")
def default_nlp():
    return spacy_sapbert.load()


def test_the_default_links_a_span_through_its_head_and_keeps_the_span(default_nlp):
    linker = default_nlp.get_pipe("sapbert_linker")
    assert linker.head_fallback == ["DISEASE"]
    with_heads = {e.text: e.kb_id_ for e in default_nlp(TEXT).ents}
    linker.configure(head_fallback=None)
    try:
        without = {e.text: e.kb_id_ for e in default_nlp(TEXT).ents}
    finally:
        linker.configure(head_fallback=["DISEASE"])
    assert without["Delayed neuropathy"] == "" and without["adenovirus pneumonia"] == ""
    assert with_heads["Delayed neuropathy"] == "D009422"  # Nervous System Diseases, the KB's "neuropathy"
    assert with_heads["adenovirus pneumonia"] == "D011014"  # Pneumonia
    # "abnormalities" is a DISEASE exclusion of the dictionary pipe: never tried as a head
    assert with_heads["ADC abnormalities"] == without["ADC abnormalities"] == ""


def test_without_a_dictionary_pipe_no_head_is_excluded(default_nlp):
    from spacy_sapbert.pipes.linker_spans import pipeline_exclusions

    assert pipeline_exclusions(default_nlp)("DISEASE", default_nlp.make_doc("abnormalities")[0:1])
    assert not pipeline_exclusions(default_nlp)("DISEASE", default_nlp.make_doc("neuropathy")[0:1])
    blank = spacy.blank("en")
    blank.add_pipe("sapbert_linker", config={"kb": "kb.jsonl", "head_fallback": ["DISEASE"]})
    assert not pipeline_exclusions(blank)("DISEASE", blank.make_doc("abnormalities")[0:1])
    assert not pipeline_exclusions(None)("DISEASE", blank.make_doc("abnormalities")[0:1])
