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
    assert alone.pipe_names == ["sapbert_ner", "dictionary_entities", "abbreviation_entities"]
    assert _entities(alone(TEXT)) == expected

    disabled = spacy.load(DEFAULT_PIPELINE, disable=["sapbert_linker"])
    assert _entities(disabled(TEXT)) == expected

    kb = minilm_kb().to_jsonl(tmp_path / "mesh30.jsonl")
    alone.add_pipe("sapbert_linker", config={"kb": str(kb)})  # the pipe's default model: all-MiniLM-L6-v2
    doc = alone(TEXT)
    assert _entities(doc) == expected
    assert {e.text: e.kb_id_ for e in doc.ents}["Hydroxychloroquine"] == "D006886"


def test_the_ner_never_loads_the_linker_and_a_mismatch_is_found_before_any_kb_is_encoded(tmp_path, monkeypatch,
                                                                                          tiny_bert):
    alone = spacy.load(DEFAULT_PIPELINE, exclude=["sapbert_linker"])
    kb = minilm_kb().to_jsonl(tmp_path / "mesh30.jsonl")
    linker = alone.add_pipe("sapbert_linker", config={"kb": str(kb)})
    alone.get_pipe("sapbert_ner")(alone.make_doc(TEXT))
    assert not linker.is_ready  # the NER read the saved pipeline's table, not the new linker's encoder

    # A NER folder on its own (no saved linker beside it) beside a linker of another model: refused
    # once the linker's encoder is read, before its KB is encoded.
    import shutil
    from pathlib import Path

    import spacy_sapbert.pipes.linker_parts as linker_parts
    from spacy_sapbert.errors import InputError

    ner_folder = Path(shutil.copytree(Path(DEFAULT_PIPELINE) / "sapbert_ner", tmp_path / "ner"))
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_ner", config={"model": str(ner_folder)})
    nlp.add_pipe("sapbert_linker", config={"kb": str(kb), "model": str(tiny_bert), "pooling": "mean"})

    def no_index(*args, **kwargs):
        raise AssertionError("the KB was encoded before the mismatch was found")

    monkeypatch.setattr(linker_parts.NameIndex, "build", no_index)
    try:
        nlp("Cisplatin nephrotoxicity.")
    except InputError as err:
        assert "differs" in str(err) and "sapbert_linker" in str(err)
    else:
        raise AssertionError("a NER whose word-piece table is not the linker's tagged anyway")
