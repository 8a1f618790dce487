"""``nlp.pipe(n_process=2)`` on the embedded default pipeline: spaCy sends each document back from
its worker as bytes, so everything a pipe leaves on a document must serialise. scispaCy's
abbreviation detector left Spans in ``doc._.abbreviations`` (spaCy's E871 on every document with an
abbreviation); the default's abbreviation pipe now leaves them in scispaCy's serialisable form."""
from __future__ import annotations

import json
from pathlib import Path

import spacy_sapbert
from spacy_sapbert.pipes.abbreviations import abbreviation_pairs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "abstracts.jsonl"


def _annotations(doc):
    ents = [(e.start_char, e.end_char, e.label_, e.kb_id_, [tuple(c) for c in e._.kb_ents]) for e in doc.ents]
    pairs = [(short.start_char, short.end_char, long_form) for short, long_form in abbreviation_pairs(doc)]
    return ents, pairs


def test_default_pipeline_n_process_2_equals_n_process_1():
    nlp = spacy_sapbert.load()
    texts = [json.loads(line)["text"] for line in EXAMPLES.read_text(encoding="utf-8").splitlines()]
    one = [_annotations(doc) for doc in nlp.pipe(texts, n_process=1, batch_size=2)]
    assert sum(len(pairs) for _, pairs in one) >= 3  # the case that failed: documents with abbreviations
    two = [_annotations(doc) for doc in nlp.pipe(texts, n_process=2, batch_size=2)]
    assert two == one


def test_abbreviations_survive_doc_bytes_round_trip():
    nlp = spacy_sapbert.load()
    doc = nlp("Retinoic acid (RA) was given; RA levels rose.")
    assert abbreviation_pairs(doc), "the detector found nothing: the test proves nothing"
    from spacy.tokens import Doc

    again = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert _annotations(again) == _annotations(doc)
