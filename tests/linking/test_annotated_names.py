"""The annotated-names stage: what training mentions of a wording were linked to decides its concept."""
from __future__ import annotations

import json

import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.annotated_names import AnnotatedNames
from tests.linker_fixtures import small_kb, write_small_kb

DISEASE = frozenset({"Disease"})
CHEMICAL = frozenset({"Chemical"})


def table() -> AnnotatedNames:
    pairs = [("D051437", "Renal failure"), ("D051437", "renal failure"), ("D007674", "renal failure"),
             ("D006886", "HCQ"), ("MESH:D009203", "heart attack"), ("OMIM:114480", "breast cancer"),
             ("D001943", "Breast-cancer"), ("D009103", "MS"), ("D009081", "MS"), ("C999999", "old drug")]
    return AnnotatedNames.from_pairs(pairs).for_kb(small_kb())


def test_votes_resolve_through_the_kb_and_score_by_the_rule_of_succession():
    names = table()
    assert names.lookup("renal  FAILURE") == ("D051437", pytest.approx(3 / 5))  # 2 of 3 votes: (2+1)/(3+2)
    # an OMIM ID and the MeSH ID of one concept vote together; wordings are normalised
    assert names.lookup("breast cancer") == ("D001943|OMIM:114480", pytest.approx(3 / 4))
    assert names.lookup("heart attack") == ("D009203", pytest.approx(2 / 3))  # MESH: prefix resolved
    assert names.lookup("MS") is None  # a tie decides nothing
    assert names.lookup("old drug") is None  # an ID the KB lacks is dropped
    assert names.lookup("aspirin") is None


def test_a_wording_is_decided_when_asked_and_summary_decides_them_all():
    names = table()
    assert names._decisions == {}  # attaching the KB decides nothing
    assert names.lookup("renal failure") == ("D051437", pytest.approx(3 / 5))
    assert list(names._decisions) == ["renal failure"]  # the one asked, kept
    # every wording: renal failure, HCQ, heart attack, breast cancer decide; MS is tied; old drug names an ID
    # the KB lacks (one annotation)
    assert names.summary() == {"concepts": 4, "coordinated_sets": 0, "tied": 1, "annotations_without_kb_id": 1}
    assert names.lookup("renal failure") == ("D051437", pytest.approx(3 / 5))  # the same after summary
    assert coordinated().summary()["coordinated_sets"] == 2
    with pytest.raises(RuntimeError, match="for_kb"):
        AnnotatedNames({"x": {"D1": 1}}).lookup("x")


def test_apply_puts_the_annotated_concept_first_within_types_and_threshold():
    names = table()
    dense = [[("D007674", 0.9), ("D051437", 0.8)], [("D002738", 0.7)], [("D007674", 0.9)], [("D007674", 0.9)]]
    out = names.apply(["renal failure", "HCQ", "renal failure", "kidney disease"],
                      [DISEASE, CHEMICAL, CHEMICAL, DISEASE], dense, threshold=0.5, limit=5)
    assert out[0] == [("D051437", 0.8), ("D007674", 0.9)]  # first, with the larger of its two scores
    assert out[1] == [("D006886", pytest.approx(2 / 3)), ("D002738", 0.7)]
    assert out[2] == dense[2]  # a CHEMICAL span never gets a disease from the table
    assert out[3] == dense[3]  # no annotated wording: unchanged
    # below the threshold the table says nothing; the cut-off still holds
    assert names.apply(["renal failure"], None, [[]], threshold=0.61, limit=1) == [[]]
    assert names.apply(["renal failure"], None, [[("D007674", 0.9)]], threshold=None, limit=1) == [
        [("D051437", pytest.approx(0.6))]]


def test_an_id_the_kb_lacks_is_matched_by_its_wordings_and_resolves_once_attached():
    kb = small_kb()
    names = AnnotatedNames.from_pairs([("C047426", "Plaquenil"), ("C047426", "plaquenil"), ("C000001", "MS"),
                                       ("C000002", "unknown wording"), ("C000003", "aralen"), ("C000003", "HCQ")])
    # "MS" names two concepts, "unknown wording" none, C000003's wordings name two: none of them is matched
    assert names.crosswalk(kb) == {"C047426": "D006886"}
    assert kb.resolve("C047426") is None  # the crosswalk alone does not touch the KB
    names.for_kb(kb)
    assert kb.resolve("C047426").concept_id == "D006886"  # an evaluation against the old ID counts the new one
    assert names.lookup("plaquenil") == ("D006886", pytest.approx(3 / 4))
    assert kb.add_former_id("D009203", "D006886") is False  # an ID the KB has keeps its concept
    assert kb.resolve("D009203").concept_id == "D009203"


def coordinated() -> AnnotatedNames:
    """'heart and kidney failure' annotated twice as two concepts, once as one; 'diabetic nephropathy' as a
    pair and as one concept, once each (a tie); one pair names an ID the KB lacks."""
    singles = [("D051437", "heart and kidney failure"), ("D003924", "diabetic nephropathy"), ("D009103", "ms lesions")]
    pairs = [(("D009203", "D051437"), "Heart and kidney failure"), (("D009203", "D051437"), "heart and kidney failure"),
             (("D003924", "D007674"), "diabetic nephropathy"), (("D009203", "C999999"), "heart and old failure"),
             (("D009103", "D009103"), "MS lesions"), (("D006886", "OMIM:114480"), "HCQ and breast cancer")]
    return AnnotatedNames.from_pairs(singles, pairs).for_kb(small_kb())


def test_a_coordinated_annotation_votes_for_its_concepts_together():
    names = coordinated()
    # 2 votes of 3 for the pair: its concepts are the parts, scored (2+1)/(3+2), and the wording decides no concept
    assert names.parts(["heart and kidney failure"], None, [None]) == [
        [("D009203", pytest.approx(3 / 5)), ("D051437", pytest.approx(3 / 5))]]
    assert names.lookup("heart and kidney failure") is None
    assert names.parts(["diabetic nephropathy", "heart and old failure", "renal failure"], None, [None] * 3) == [
        None, None, None]  # a tie; an ID the KB lacks; no coordinated annotation
    # one ID given twice is one concept: a single vote (with the single one, 2 of 2)
    assert names.lookup("MS lesions") == ("D009103", pytest.approx(3 / 4))
    # a part of each type: a DISEASE span gets none of them, a span of any type both
    assert names.parts(["HCQ and breast cancer"] * 2, [DISEASE, None], [None, None]) == [
        None, [("D006886", pytest.approx(2 / 3)), ("D001943|OMIM:114480", pytest.approx(2 / 3))]]
    # below its threshold the table says nothing
    assert names.parts(["heart and kidney failure"] * 2, [DISEASE, DISEASE], [0.61, 0.6]) == [
        None, [("D009203", pytest.approx(0.6)), ("D051437", pytest.approx(0.6))]]
    with pytest.raises(RuntimeError, match="for_kb"):
        AnnotatedNames({}).parts(["x"], None, [None])


def test_coordinated_annotations_round_trip_and_their_errors_name_the_entry(tmp_path):
    path = tmp_path / "names.json"
    coordinated().to_disk(path)
    again = AnnotatedNames.from_disk(path)
    assert again.composites == coordinated().composites
    assert again.composites["heart and kidney failure"] == {("D009203", "D051437"): 2}
    assert again.for_kb(small_kb()).parts(["heart and kidney failure"], None, [None]) == coordinated().parts(
        ["heart and kidney failure"], None, [None])
    table().to_disk(path)
    assert "composites" not in json.loads(path.read_text(encoding="utf-8"))  # a table without any writes none
    for bad in ({"x": [{"ids": ["D1"], "count": 1}]}, {"x": [{"ids": ["D1", "D1"], "count": 1}]}, {"x": []},
                {"x": [{"ids": [["D1"], "D2"], "count": 1}]}, {"x": [{"ids": ["D1", "D2"], "count": True}]},
                {"x": [{"ids": ["D1", "D2"], "count": 0}]}, {"x": {"ids": ["D1", "D2"], "count": 1}},
                {"x": [{"ids": ["D1", "D2"], "count": 1}, {"ids": ["D1", "D2"], "count": 2}]}):
        path.write_text(json.dumps({"format_version": 1, "names": {}, "composites": bad}), encoding="utf-8")
        with pytest.raises(InputError) as err:
            AnnotatedNames.from_disk(path)
        assert err.value.field == "composites.x" and "names.json" in str(err.value)
    path.write_text(json.dumps({"format_version": 1, "names": {}, "composites": []}), encoding="utf-8")
    with pytest.raises(InputError) as err:
        AnnotatedNames.from_disk(path)
    assert err.value.field == "composites"


def test_a_table_of_coordinated_wordings_alone_is_a_table(tmp_path):
    only = AnnotatedNames({}, composites={"heart and kidney failure": {("D009203", "D051437"): 1,
                                                                       ("D051437", "D009203"): 2}})
    assert len(only) == 1  # not an empty table: the pipe keeps it and saves it
    # both orders vote together (3 of 3); the parts come in the order most mentions give
    assert only.for_kb(small_kb()).parts(["heart and kidney failure"], None, [None]) == [
        [("D051437", pytest.approx(4 / 5)), ("D009203", pytest.approx(4 / 5))]]
    path = tmp_path / "only.json"
    only.to_disk(path)
    first = path.read_bytes()
    AnnotatedNames.from_disk(path).to_disk(path)
    assert path.read_bytes() == first  # read and written again, byte for byte


def test_the_pipe_states_a_coordinated_annotation_as_parts(tiny_bert, tmp_path):
    kb_file = write_small_kb(tmp_path)
    names_file = tmp_path / "names.json"
    coordinated().to_disk(names_file)

    def parts(split: bool, text: str = "heart and kidney failure", threshold: float = 0.5) -> list:
        nlp = spacy.blank("en")
        nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "pooling": "mean",
                                               "annotated_names": str(names_file), "split_composites": split,
                                               "threshold": threshold})
        doc = nlp.make_doc(text)
        doc.ents = [Span(doc, 0, len(doc), label="DISEASE")]
        return nlp.get_pipe("sapbert_linker")(doc).ents[0]._.kb_ents_parts

    assert parts(True) == [("Myocardial Infarction", [("D009203", pytest.approx(0.6))]),
                           ("Renal Insufficiency", [("D051437", pytest.approx(0.6))])]
    assert parts(False) == []  # parts are split_composites' to give
    # the set below the threshold: what the coordination rules split stands
    assert [text for text, _ in parts(True, threshold=0.61)] == ["heart failure", "kidney failure"]
    assert parts(True, "diabetic nephropathy") == []


def test_round_trip_and_errors_name_the_file(tmp_path):
    path = tmp_path / "names.json"
    written = table()
    written.former_ids = {"C047426": "D006886"}
    written.to_disk(path)
    written.sources = ["CDR_TrainingSet.PubTator.txt"]
    written.to_disk(path)
    again = AnnotatedNames.from_disk(path).for_kb(small_kb())
    assert again.names == written.names and again.former_ids == written.former_ids
    assert again.sources == ["CDR_TrainingSet.PubTator.txt"]
    assert again.lookup("renal failure") == table().lookup("renal failure")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format_version": 1, "names": {"x": {"D1": 0}}}), encoding="utf-8")
    with pytest.raises(InputError) as err:
        AnnotatedNames.from_disk(bad)
    assert "bad.json" in str(err.value) and "names['x']" in str(err.value)
    bad.write_text(json.dumps({"format_version": 1, "names": {}, "sources": "train.txt"}), encoding="utf-8")
    with pytest.raises(InputError) as err:
        AnnotatedNames.from_disk(bad)
    assert err.value.field == "sources"
    bad.write_text(json.dumps({"format_version": 7, "names": {}}), encoding="utf-8")
    with pytest.raises(InputError, match="format"):
        AnnotatedNames.from_disk(bad)


def test_the_pipe_applies_saves_and_loads_the_table(tiny_bert, tmp_path):
    kb_file = write_small_kb(tmp_path)
    names_file = tmp_path / "names.json"
    table().to_disk(names_file)
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "pooling": "mean",
                                           "annotated_names": str(names_file)})

    def linked(nlp_) -> str:
        doc = nlp_.make_doc("renal failure")
        doc.ents = [Span(doc, 0, 2, label="DISEASE")]
        return nlp_.get_pipe("sapbert_linker")(doc).ents[0].kb_id_

    assert linked(nlp) == "D051437"
    nlp.to_disk(tmp_path / "saved")
    names_file.unlink()  # the saved pipe carries its own copy
    loaded = spacy.load(tmp_path / "saved")
    assert (tmp_path / "saved" / "sapbert_linker" / "annotated_names.json").is_file()
    assert linked(loaded) == "D051437"
    loaded.get_pipe("sapbert_linker").annotated_table = None  # switched off: the dense linker alone decides
    plain = spacy.blank("en")
    plain.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "pooling": "mean"})
    assert linked(loaded) == linked(plain)
    loaded.to_disk(tmp_path / "saved")  # saved again without it: the stale file goes
    assert not (tmp_path / "saved" / "sapbert_linker" / "annotated_names.json").exists()


def test_a_missing_file_is_named(tiny_bert, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(write_small_kb(tmp_path)),
                                           "annotated_names": str(tmp_path / "nowhere.json")})
    with pytest.raises(InputError, match="nowhere.json"):
        nlp.initialize()
