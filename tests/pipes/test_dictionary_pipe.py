"""``dictionary_entities``: listed wordings become entities, after the NER, never over its spans."""
from __future__ import annotations

import json

import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.errors import InputError

PATTERNS = [{"label": "CHEMICAL", "pattern": [{"LOWER": "oxygen"}]},
            {"label": "DISEASE", "pattern": [{"LOWER": "heart"}, {"LOWER": "failure"}]},
            {"label": "DISEASE", "pattern": [{"LOWER": "acute"}, {"LOWER": "heart"}, {"LOWER": "failure"}]},
            {"label": "CHEMICAL", "pattern": [{"LOWER": "lithium"}]}]
TEXT = "Oxygen for acute heart failure; lithium carbonate and lithium."


def _with_ner_span(nlp):
    """Stands for the NER: "lithium carbonate" is already an entity."""
    def ner(doc):
        doc.ents = [Span(doc, 6, 8, label="CHEMICAL")]
        return doc
    return ner


def test_matches_fill_only_free_tokens_and_the_longest_wins(tmp_path):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("dictionary_entities")
    pipe.add_patterns(PATTERNS)
    doc = _with_ner_span(nlp)(nlp.make_doc(TEXT))
    doc = pipe(doc)
    assert [(e.text, e.label_) for e in doc.ents] == [
        ("Oxygen", "CHEMICAL"), ("acute heart failure", "DISEASE"), ("lithium carbonate", "CHEMICAL"),
        ("lithium", "CHEMICAL")]
    assert pipe.labels == ("CHEMICAL", "DISEASE")

    # the same file gives spaCy's entity_ruler (overwrite_ents false) the same entities
    nlp.to_disk(tmp_path / "p")
    assert json.loads((tmp_path / "p" / "dictionary_entities" / "patterns.jsonl").read_text().splitlines()[0]) == \
        PATTERNS[0]
    ruler_nlp = spacy.blank("en")
    ruler = ruler_nlp.add_pipe("entity_ruler", config={"overwrite_ents": False})
    ruler.from_disk(tmp_path / "p" / "dictionary_entities" / "patterns.jsonl")
    assert [(e.text, e.label_) for e in ruler(_with_ner_span(ruler_nlp)(ruler_nlp.make_doc(TEXT))).ents] == \
        [(e.text, e.label_) for e in doc.ents]

    loaded = spacy.load(tmp_path / "p")
    again = loaded.get_pipe("dictionary_entities")(_with_ner_span(loaded)(loaded.make_doc(TEXT)))
    assert [(e.text, e.label_) for e in again.ents] == [(e.text, e.label_) for e in doc.ents]


def test_bad_patterns_are_named_by_file_and_line(tmp_path):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("dictionary_entities")
    with pytest.raises(InputError, match="LOWER"):
        pipe.add_patterns([{"label": "X", "pattern": "phrase patterns are not read"}])
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "patterns.jsonl").write_text(json.dumps(PATTERNS[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"patterns.jsonl:2: invalid JSON"):
        pipe.from_disk(folder)
    (folder / "patterns.jsonl").write_text(json.dumps({"label": "", "pattern": [{"LOWER": "x"}]}) + "\n")
    with pytest.raises(InputError, match=r"patterns.jsonl:1: field 'pattern'"):
        pipe.from_disk(folder)


def test_extend_lets_a_longer_wording_replace_the_entities_it_covers_whole():
    patterns = [{"label": "DISEASE", "pattern": [{"LOWER": "high"}, {"LOWER": "blood"}, {"LOWER": "pressure"}]},
                {"label": "CHEMICAL", "pattern": [{"LOWER": "blood"}]},
                {"label": "DISEASE", "pattern": [{"LOWER": "pressure"}, {"LOWER": "ulcers"}]}]
    found = {}
    for extend in (False, True):
        nlp = spacy.blank("en")
        pipe = nlp.add_pipe("dictionary_entities", config={"extend": extend})
        pipe.add_patterns(patterns)
        # the NER stands for: "high" (inside the longer wording) and "ulcers" (crossed by "pressure ulcers")
        doc = nlp.make_doc("high blood pressure and pressure ulcers")
        doc.ents = [Span(doc, 0, 1, label="DISEASE"), Span(doc, 5, 6, label="DISEASE")]
        found[extend] = [(e.text, e.label_) for e in pipe(doc).ents]
    assert found[False] == [("high", "DISEASE"), ("blood", "CHEMICAL"), ("ulcers", "DISEASE")]
    # "pressure ulcers" covers "ulcers" whole and is longer: it replaces it too
    assert found[True] == [("high blood pressure", "DISEASE"), ("pressure ulcers", "DISEASE")]
    nlp = spacy.blank("en")
    nlp.add_pipe("dictionary_entities", config={"extend": True}).add_patterns(patterns[:1])
    doc = nlp.make_doc("high blood pressure")
    doc.ents = [Span(doc, 0, 3, label="CHEMICAL")]
    assert [(e.text, e.label_) for e in nlp.get_pipe("dictionary_entities")(doc).ents] == [
        ("high blood pressure", "CHEMICAL")]  # a wording no longer than the entity changes nothing


def test_matches_are_what_a_phrase_matcher_on_lower_finds(mirror):
    """The pipe's table lookup against spaCy's PhraseMatcher (attr LOWER) with the embedded default's
    3,768 patterns, on 60 BC5CDR dev abstracts and on text where wordings overlap and repeat."""
    from spacy.matcher import PhraseMatcher
    from spacy.tokens import Doc

    from spacy_sapbert.default import default_pipeline_path
    from spacy_sapbert.formats.pubtator import read_blocks
    from spacy_sapbert.pipes.dictionary import PATTERNS_FILE, read_patterns

    patterns = read_patterns(default_pipeline_path() / "dictionary_entities" / PATTERNS_FILE)
    patterns += [{"label": "CHEMICAL", "pattern": [{"LOWER": "Heart"}]}]  # a listed token not in lower case
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("dictionary_entities")
    pipe.add_patterns(patterns)
    matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
    for pattern in patterns:
        matcher.add(pattern["label"], [Doc(nlp.vocab, words=[t["LOWER"] for t in pattern["pattern"]])])
    corpus = mirror / "corpora" / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt"
    with corpus.open(encoding="utf-8") as lines:
        texts = [block.text for _, block in zip(range(60), read_blocks(enumerate(lines, 1), corpus))]
    texts += [
        "Acute renal failure, renal failure and RENAL FAILURE; heart failure of the heart.", ""]
    total = 0
    for doc in nlp.pipe(texts):
        expected = sorted((start, end, nlp.vocab.strings[key]) for key, start, end in matcher(doc))
        assert sorted((s.start, s.end, s.label_) for s in pipe.matches(doc)) == expected
        total += len(expected)
    assert total > 300  # the comparison saw many matches, overlapping ones among them


def test_exclusions_remove_ner_entities_that_are_exactly_an_excluded_wording_with_its_label(tmp_path):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("dictionary_entities")
    pipe.add_patterns(PATTERNS)
    pipe.add_exclusions([("DISEASE", "Acute"), ("CHEMICAL", "lithium  carbonate")])  # compared normalised

    def ner(doc):  # "Acute" as a disease, "lithium carbonate" as a disease (not an excluded label for it)
        doc.ents = [Span(doc, 2, 3, label="DISEASE"), Span(doc, 6, 8, label="DISEASE")]
        return doc

    doc = pipe(ner(nlp.make_doc(TEXT)))
    # "acute" went, so the listed "acute heart failure" fills its tokens; "lithium carbonate" stays a
    # DISEASE entity: only its CHEMICAL entities are excluded
    assert [(e.text, e.label_) for e in doc.ents] == [
        ("Oxygen", "CHEMICAL"), ("acute heart failure", "DISEASE"), ("lithium carbonate", "DISEASE"),
        ("lithium", "CHEMICAL")]
    doc = pipe(_with_ner_span(nlp)(nlp.make_doc(TEXT)))  # the NER's CHEMICAL "lithium carbonate" is removed
    assert ("lithium carbonate", "CHEMICAL") not in [(e.text, e.label_) for e in doc.ents]
    assert [(e.text, e.label_) for e in doc.ents][-2:] == [("lithium", "CHEMICAL"), ("lithium", "CHEMICAL")]

    nlp.to_disk(tmp_path / "p")
    saved = tmp_path / "p" / "dictionary_entities" / "exclusions.tsv"
    assert saved.read_text().splitlines()[1:] == ["DISEASE\tacute", "CHEMICAL\tlithium carbonate"]
    loaded = spacy.load(tmp_path / "p").get_pipe("dictionary_entities")
    assert sorted(loaded.exclusions) == sorted(pipe.exclusions) and loaded.patterns == pipe.patterns
    again = loaded(_with_ner_span(nlp)(nlp.make_doc(TEXT)))
    assert [(e.text, e.label_) for e in again.ents] == [(e.text, e.label_) for e in doc.ents]
    # saved again without exclusions, the earlier file does not come back
    loaded.exclusions = []
    loaded.to_disk(tmp_path / "p" / "dictionary_entities")
    assert spacy.load(tmp_path / "p").get_pipe("dictionary_entities").exclusions == []


def test_bad_exclusions_are_named_by_file_and_line(tmp_path):
    from spacy_sapbert.pipes.dictionary import read_exclusions

    path = tmp_path / "exclusions.tsv"
    bad = [("# comment\nDISEASE\tacute\nDISEASE acute\n", r"exclusions.tsv:3.*LABEL<TAB>wording"),
           ("DISEASE\t  \n", r"exclusions.tsv:1.*wording"),
           ("DISEASE\tacute\n  \tacute\n", r"exclusions.tsv:2.*label"),
           ("DISEASE\tacute\tpain\n", r"exclusions.tsv:1.*got 3 field")]
    for text, error in bad:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=error):
            read_exclusions(path)
    # read as exclusion() checks one: the wording normalised, the label stripped, Windows line ends, blank lines
    path.write_bytes(b"# c\r\n DISEASE \t Acute  Pain\r\n\r\n  \nCHEMICAL\tLithium\n")
    assert read_exclusions(path) == [("DISEASE", "acute pain"), ("CHEMICAL", "lithium")]
    with pytest.raises(InputError, match="label"):
        spacy.blank("en").add_pipe("dictionary_entities").add_exclusions([("", "acute")])


def test_exclusions_replaced_whole_or_not_at_all_and_a_label_with_a_line_break_is_refused():
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("dictionary_entities")
    pipe.exclusions = [("DISEASE", "Acute  pain"), ("CHEMICAL", "lithium")]
    assert pipe.exclusions == [("DISEASE", "acute pain"), ("CHEMICAL", "lithium")]
    with pytest.raises(InputError, match="line breaks"):
        pipe.exclusions = [("DISEASE", "gout"), ("DIS\nEASE", "gout")]
    assert pipe.exclusions == [("DISEASE", "acute pain"), ("CHEMICAL", "lithium")]  # the old ones kept
