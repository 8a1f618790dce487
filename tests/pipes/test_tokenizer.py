"""The registered scispaCy tokenizer: scispaCy's rules, with the hyphen rules when asked, built once."""
from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace

import spacy
from scispacy import custom_tokenizer
from spacy.util import compile_infix_regex

import spacy_sapbert
from spacy_sapbert.pipes.tokenizer import HYPHEN_INFIX, SHORT_FORM_PREFIXES, scispacy_blank


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


def test_a_short_form_in_parentheses_is_cut_off_the_hyphenated_word_and_stereo_descriptors_stay():
    split, plain = scispacy_blank(split_hyphens=True), scispacy_blank(split_hyphens=False)
    own = scispacy_own(plain).prefix_search.__self__.pattern
    assert plain.tokenizer.prefix_search.__self__.pattern == own
    assert split.tokenizer.prefix_search.__self__.pattern == "|".join(f"^{r}" for r in SHORT_FORM_PREFIXES) + f"|{own}"
    assert [t.text for t in split("nitroglycerin (NTG)-induced (6-OHDA)-lesioned")] == [
        "nitroglycerin", "(", "NTG", ")", "-", "induced", "(", "6-OHDA", ")", "-", "lesioned"]
    assert [t.text for t in plain("(NTG)-induced")] == ["(NTG)-induced"]
    kept = "(-)-baclofen (S)-ketamine (+)-MK-801 (RS)-warfarin (2R,3S)-isomer (E)-stilbene"
    assert [t.text for t in split(kept)] == kept.split()


def test_the_default_finds_and_links_a_short_form_glued_to_a_hyphenated_word():
    nlp = spacy_sapbert.load()
    doc = nlp("Nimodipine was given at the onset of nitroglycerin (NTG)-induced migraine. Later NTG was stopped.")
    found = [(e.text, e.label_, e.kb_id_) for e in doc.ents if e.text == "NTG"]
    assert found == [("NTG", "CHEMICAL", "D005996")] * 2  # Nitroglycerin, through its long form


def test_the_default_pipelines_saved_tokenizer_is_the_state_its_factory_builds():
    # spacy.load reads the saved state over the factory's; equal bytes are skipped (ScispacyTokenizer.from_bytes)
    nlp = spacy.load(spacy_sapbert.DEFAULT_PIPELINE, exclude=["sapbert_ner", "dictionary_entities",
                                                              "abbreviation_entities", "sapbert_linker"])
    saved = (Path(spacy_sapbert.DEFAULT_PIPELINE) / "tokenizer").read_bytes()
    built = scispacy_blank(split_hyphens=True)
    built.vocab.from_bytes(nlp.vocab.to_bytes())
    assert built.tokenizer.to_bytes(exclude=["vocab"]) == nlp.tokenizer.to_bytes(exclude=["vocab"])
    assert nlp.tokenizer.to_bytes(exclude=["vocab"]) == saved  # as Language.to_disk writes it


def test_a_scispacy_that_compiles_its_affixes_otherwise_still_gets_the_hyphen_rules(monkeypatch):
    own = custom_tokenizer.combined_rule_tokenizer

    def elsewhere(nlp):  # compiles through its own module's globals, which the copy does not replace
        return own(nlp)

    monkeypatch.setattr(custom_tokenizer, "combined_rule_tokenizer", elsewhere)
    split = scispacy_blank(split_hyphens=True)
    assert split.tokenizer.infix_finditer.__self__.pattern.endswith(f"|{HYPHEN_INFIX}")
    assert [t.text for t in split("cocaine-induced")] == ["cocaine", "-", "induced"]
    assert [t.text for t in split("(NTG)-induced")] == ["(", "NTG", ")", "-", "induced"]
