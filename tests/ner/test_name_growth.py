"""KB names a NER entity grows to (``spacy_sapbert.ner.name_growth``, in ``dictionary_entities``)."""
from __future__ import annotations

import gzip

import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.ner.name_growth import NameGrowth, kb_grow_names, read_grow_names, write_grow_names

NAMES = [("DISEASE", "secondary hyperparathyroidism"), ("DISEASE", "migraine with aura"),
         ("DISEASE", "other cancers"), ("DISEASE", "wilms tumor 1"), ("DISEASE", "levodopa - induced dyskinesias"),
         ("DISEASE", "muscle rigidity"), ("DISEASE", "open - angle glaucoma"), ("DISEASE", "angle glaucoma"),
         ("DISEASE", "calcium channel blockers")]


def _ents(nlp, text, spans):
    doc = nlp.make_doc(text)
    words = [t.text for t in doc]
    out = []
    for phrase, label in spans:
        tokens = [t.text for t in nlp.make_doc(phrase)]
        start = next(i for i in range(len(words)) if words[i:i + len(tokens)] == tokens)
        out.append(Span(doc, start, start + len(tokens), label=label))
    return doc, out


@pytest.mark.parametrize("text, spans, expected", [
    ("Patients with secondary hyperparathyroidism.", [("hyperparathyroidism", "DISEASE")],
     [("secondary hyperparathyroidism", "DISEASE")]),
    # two entities of the label inside one name become that name; the stop word inside is fine
    ("Migraine with aura was seen.", [("Migraine", "DISEASE"), ("aura", "DISEASE")],
     [("Migraine with aura", "DISEASE")]),
    # the longest name wins, hyphens are added
    ("An open-angle glaucoma case.", [("glaucoma", "DISEASE")], [("open-angle glaucoma", "DISEASE")]),
    # an added edge that is a stop word, a digit, or punctuation: no growth
    ("In other cancers too.", [("cancers", "DISEASE")], [("cancers", "DISEASE")]),
    ("The Wilms tumor 1 gene.", [("Wilms tumor", "DISEASE")], [("Wilms tumor", "DISEASE")]),
    ("Muscle, rigidity and pain.", [("rigidity", "DISEASE")], [("rigidity", "DISEASE")]),
    # a name never swallows an entity of another label
    ("Levodopa-induced dyskinesias.", [("Levodopa", "CHEMICAL"), ("dyskinesias", "DISEASE")],
     [("Levodopa", "CHEMICAL"), ("dyskinesias", "DISEASE")]),
    # an entity grows to names of its own label only, and nothing is tagged where the NER tagged nothing
    ("Calcium channel blockers; secondary hyperparathyroidism.", [("Calcium", "CHEMICAL")],
     [("Calcium", "CHEMICAL")]),
])
def test_an_entity_grows_to_the_longest_name_of_its_label_it_lies_in(text, spans, expected):
    nlp = spacy.blank("en")
    growth = NameGrowth((label, " ".join(t.lower_ for t in nlp.make_doc(name))) for label, name in
                        [(label, name.replace(" - ", "-")) for label, name in NAMES])
    doc, ents = _ents(nlp, text, spans)
    assert [(e.text, e.label_) for e in growth.grow(doc, ents)] == expected


def test_the_dictionary_pipe_grows_entities_and_saves_the_names(tmp_path):
    nlp = spacy.blank("en")
    pipe = nlp.add_pipe("dictionary_entities")
    pipe.add_exclusions([("DISEASE", "aura")])  # exclusions first: "aura" goes, "migraine" alone still grows
    pipe.add_grow_names([("DISEASE", "migraine with aura"), ("DISEASE", "secondary hyperparathyroidism")])
    pipe.add_patterns([{"label": "DISEASE", "pattern": [{"LOWER": "hyperparathyroidism"}]}])

    def ner(doc):
        doc.ents = [Span(doc, 0, 1, label="DISEASE"), Span(doc, 2, 3, label="DISEASE")]
        return doc

    text = "Migraine with aura and secondary hyperparathyroidism; hyperparathyroidism."
    doc = pipe(ner(nlp.make_doc(text)))
    assert [(e.text, e.label_) for e in doc.ents] == [("Migraine with aura", "DISEASE"),
                                                       ("hyperparathyroidism", "DISEASE"),
                                                       ("hyperparathyroidism", "DISEASE")]
    nlp.to_disk(tmp_path / "p")
    saved = tmp_path / "p" / "dictionary_entities" / "grow_names.tsv.gz"
    assert gzip.decompress(saved.read_bytes()).decode().splitlines() == [
        "DISEASE\tmigraine with aura", "DISEASE\tsecondary hyperparathyroidism"]
    loaded = spacy.load(tmp_path / "p")
    again = loaded.get_pipe("dictionary_entities")(ner(loaded.make_doc(text)))
    assert [(e.text, e.label_) for e in again.ents] == [(e.text, e.label_) for e in doc.ents]
    # saved again without names, the earlier file does not come back
    loaded.get_pipe("dictionary_entities").growth = NameGrowth()
    loaded.get_pipe("dictionary_entities").to_disk(tmp_path / "p" / "dictionary_entities")
    assert not saved.exists() and len(spacy.load(tmp_path / "p").get_pipe("dictionary_entities").growth) == 0


def test_kb_names_of_a_label_are_cut_by_the_tokenizer_and_punctuated_ones_left_out(tmp_path):
    nlp = spacy.blank("en")
    concepts = [Concept("D1", "Migraine with Aura", ["Epilepsy, Generalized", "aura"], ["Disease"]),
                Concept("D2", "Open-angle glaucoma", [], ["Phenotype"]),
                Concept("C1", "calcium channel", [], ["Chemical"])]
    growth = kb_grow_names(concepts, {"DISEASE": ["Disease", "Phenotype"]}, nlp.make_doc)
    assert growth.pairs() == [("DISEASE", "migraine with aura"), ("DISEASE", "open - angle glaucoma")]
    path = write_grow_names(tmp_path / "g.tsv.gz", growth)
    assert read_grow_names(path).pairs() == growth.pairs()


def test_a_bad_names_file_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "grow.tsv"
    path.write_text("DISEASE\tmigraine with aura\nDISEASE migraine\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"grow.tsv:2.*LABEL<TAB>"):
        read_grow_names(path)
    # written on Windows, a label spelt with a space: the same names
    path.write_bytes(b"DISEASE\tmigraine with aura\r\nDISEASE \tsecondary hyperparathyroidism\r\n")
    assert read_grow_names(path).pairs() == [("DISEASE", "migraine with aura"),
                                              ("DISEASE", "secondary hyperparathyroidism")]
    # written by hand: upper case and extra spaces are compared as the tokens are
    path.write_text("DISEASE\tMigraine  with aura\nCHEMICAL\tcalcium channel\n", encoding="utf-8")
    assert read_grow_names(path).pairs() == [("CHEMICAL", "calcium channel"), ("DISEASE", "migraine with aura")]


def test_hashed_strings_answer_membership_keep_the_order_given_and_rehash_in_another_process(tmp_path):
    """The names entities grow to and the excluded wordings are kept as hashes beside one text: members are
    found, others not, the strings come back in the order first given, and a copy pickled into a process
    with another hash salt (PYTHONHASHSEED) hashes them again there."""
    import os
    import pickle
    import subprocess
    import sys

    from spacy_sapbert.util.hashed_strings import HashedStrings

    wordings = HashedStrings(["secondary hyperparathyroidism", "open - angle glaucoma", "secondary hyperparathyroidism"])
    assert list(wordings) == ["secondary hyperparathyroidism", "open - angle glaucoma"] and len(wordings) == 2
    assert "open - angle glaucoma" in wordings and "glaucoma" not in wordings and 3 not in wordings
    grown = wordings.union(["migraine with aura", "open - angle glaucoma"])
    assert list(grown) == [*wordings, "migraine with aura"] and "migraine with aura" not in wordings
    assert "x" not in HashedStrings() and list(HashedStrings()) == []
    for bad in (["two\nlines"], [""]):
        with pytest.raises(ValueError):
            HashedStrings(bad)
    growth = NameGrowth([("DISEASE", "migraine with aura"), ("DISEASE", "open - angle glaucoma")])
    (tmp_path / "g.pkl").write_bytes(pickle.dumps((grown, growth)))
    probe = ("import pickle, sys; s, g = pickle.loads(open(sys.argv[1], 'rb').read()); "
             "print('migraine with aura' in s, 'aura' in s, g.pairs())")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "g.pkl")], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONHASHSEED="12345"), check=True).stdout.strip()
    assert out == "True False [('DISEASE', 'migraine with aura'), ('DISEASE', 'open - angle glaucoma')]"
