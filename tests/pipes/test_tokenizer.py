"""The registered scispaCy tokenizer: scispaCy's rules, with the hyphen infix when asked, built once."""
from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import spacy
from scispacy import custom_tokenizer
from spacy.util import compile_infix_regex

import spacy_sapbert
from spacy_sapbert.pipes.tokenizer import HYPHEN_INFIX, scispacy_blank


def scispacy_own(nlp):
    """scispaCy's tokenizer as scispaCy builds it, for comparison."""
    bare = SimpleNamespace(vocab=nlp.vocab, Defaults=SimpleNamespace(tokenizer_exceptions={}),
                           tokenizer=SimpleNamespace(token_match=nlp.Defaults.token_match))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return custom_tokenizer.combined_rule_tokenizer(bare)


def test_the_hyphen_infix_is_the_last_alternative_of_scispacys_infixes_and_scispacy_is_left_as_it_was():
    split, plain = scispacy_blank(split_hyphens=True), scispacy_blank(split_hyphens=False)
    own = scispacy_own(plain).infix_finditer.__self__.pattern
    assert plain.tokenizer.infix_finditer.__self__.pattern == own
    assert split.tokenizer.infix_finditer.__self__.pattern == f"{own}|{HYPHEN_INFIX}"
    assert custom_tokenizer.compile_infix_regex is compile_infix_regex  # the module's own, not the copy's
    assert [t.text for t in split("cocaine-induced and/or")] == ["cocaine", "-", "induced", "and/or"]
    assert [t.text for t in plain("cocaine-induced")] == ["cocaine-induced"]
    assert [t.text for t in split("e.g. 5mg")] == ["e.g.", "5", "mg"]  # scispaCy's special cases and units


def test_the_default_pipelines_saved_tokenizer_is_the_state_its_factory_builds():
    # spacy.load reads the saved state over the factory's; equal bytes are skipped (ScispacyTokenizer.from_bytes)
    nlp = spacy.load(spacy_sapbert.DEFAULT_PIPELINE, exclude=["sapbert_ner", "dictionary_entities",
                                                              "abbreviation_entities", "sapbert_linker"])
    saved = (Path(spacy_sapbert.DEFAULT_PIPELINE) / "tokenizer").read_bytes()
    built = scispacy_blank(split_hyphens=True)
    built.vocab.from_bytes(nlp.vocab.to_bytes())
    assert built.tokenizer.to_bytes(exclude=["vocab"]) == nlp.tokenizer.to_bytes(exclude=["vocab"])
    assert nlp.tokenizer.to_bytes(exclude=["vocab"]) == saved  # as Language.to_disk writes it


def test_a_scispacy_that_compiles_its_infixes_otherwise_still_gets_the_hyphen_infix(monkeypatch):
    own = custom_tokenizer.combined_rule_tokenizer

    def elsewhere(nlp):  # compiles through its own module's globals, which the copy does not replace
        return own(nlp)

    monkeypatch.setattr(custom_tokenizer, "combined_rule_tokenizer", elsewhere)
    split = scispacy_blank(split_hyphens=True)
    assert split.tokenizer.infix_finditer.__self__.pattern.endswith(f"|{HYPHEN_INFIX}")
    assert [t.text for t in split("cocaine-induced")] == ["cocaine", "-", "induced"]
