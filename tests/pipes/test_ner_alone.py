"""The embedded default's NER without its linker: it tags text alone, and a linker of another model
added after it never changes its entities (its word-piece table comes from the saved pipeline)."""
from __future__ import annotations

import spacy

import spacy_sapbert
from spacy_sapbert.default import DEFAULT_PIPELINE
from tests.minilm_kb import minilm_kb

TEXT = ("Hydroxychloroquine (HCQ) caused retinopathy in a patient with lupus. "
        "Cisplatin nephrotoxicity and heart failure were seen after doxorubicin.")


def _entities(doc):
    return [(e.start_char, e.end_char, e.label_) for e in doc.ents]


def test_default_ner_tags_alone_and_ignores_a_linker_of_another_model(tmp_path):
    expected = _entities(spacy_sapbert.load()(TEXT))
    assert ("Hydroxychloroquine", "CHEMICAL") in [(TEXT[s:e], label) for s, e, label in expected]

    alone = spacy.load(DEFAULT_PIPELINE, exclude=["sapbert_linker"])
    assert alone.pipe_names == ["sapbert_ner", "abbreviation_entities"]
    assert _entities(alone(TEXT)) == expected

    disabled = spacy.load(DEFAULT_PIPELINE, disable=["sapbert_linker"])
    assert _entities(disabled(TEXT)) == expected

    kb = minilm_kb().to_jsonl(tmp_path / "mesh30.jsonl")
    alone.add_pipe("sapbert_linker", config={"kb": str(kb)})  # the pipe's default model: all-MiniLM-L6-v2
    doc = alone(TEXT)
    assert _entities(doc) == expected
    assert {e.text: e.kb_id_ for e in doc.ents}["Hydroxychloroquine"] == "D006886"
