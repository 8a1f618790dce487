"""The linker's candidate stages are registered functions the config names; the pipe chains them."""
from __future__ import annotations

import re

import pytest
import spacy
from spacy.util import registry

from spacy_sapbert.annotate.identity import pipeline_identity, saved_pipeline_identity
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.linking.calibration import Calibration
from spacy_sapbert.linking.stages import STAGE_CONFIG, Mentions, Ranked, context_rerank, named_candidates
from spacy_sapbert.pipes.linker import SapBertLinker
from tests.linker_fixtures import write_small_kb
from tests.pipes.test_component import TEXTS, links, make_nlp

CALLS = []


@registry.misc("test.ExactNames.v1")
def make_exact_names(score: float = 1.0):
    """A first stage of the user's: the concepts with a name equal to the mention, all scored ``score``."""

    def exact_names(linker, mentions):
        CALLS.append(list(mentions.texts))
        return [Ranked([(cid, score) for cid in linker.kb.alias_to_concepts.get(normalize(text), [])], True)
                for text in mentions.texts]

    return exact_names


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return write_small_kb(tmp_path_factory.mktemp("kb"))


def test_the_config_names_each_stage_and_a_pipeline_saved_without_them_loads_the_defaults(tiny_bert, kb_path,
                                                                                          tmp_path):
    nlp = make_nlp(tiny_bert, kb_path, abbreviations=True)
    block = nlp.config["components"]["sapbert_linker"]
    assert {key: block[key] for key in STAGE_CONFIG} == STAGE_CONFIG
    expected = [links(doc) for doc in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / "saved")
    config = (tmp_path / "saved" / "config.cfg").read_text(encoding="utf-8")
    assert '[components.sapbert_linker.get_candidates]\n@misc = "sapbert.DenseCandidates.v1"' in config
    assert [links(doc) for doc in spacy.load(tmp_path / "saved").pipe(TEXTS)] == expected
    # a pipeline saved before the stages were named in the config (the embedded default's layout)
    older = re.sub(r"\[components\.sapbert_linker\.(get_candidates|rerank_candidates|prefer_annotated)\]\n@misc = "
                   r"\"[^\"]+\"\n\n", "", config)
    assert "get_candidates" not in older
    (tmp_path / "saved" / "config.cfg").write_text(older, encoding="utf-8")
    reloaded = spacy.load(tmp_path / "saved")
    assert "get_candidates" in reloaded.config["components"]["sapbert_linker"]  # filled in from the factory
    assert reloaded.get_pipe("sapbert_linker").stages == nlp.get_pipe("sapbert_linker").stages
    assert [links(doc) for doc in reloaded.pipe(TEXTS)] == expected
    # `annotate --resume` takes the loaded pipeline (default blocks) and its config.cfg (none) as one pipeline
    assert pipeline_identity(reloaded) == saved_pipeline_identity(tmp_path / "saved") == pipeline_identity(nlp)
    exact = make_nlp(tiny_bert, kb_path, get_candidates={"@misc": "test.ExactNames.v1"})
    assert pipeline_identity(exact)["config_sha256"] != pipeline_identity(nlp)["config_sha256"]


def test_a_registered_first_stage_replaces_the_dense_search_and_comes_back_from_disk(tiny_bert, kb_path, tmp_path):
    CALLS.clear()
    nlp = make_nlp(tiny_bert, kb_path, abbreviations=True, threshold=0.5, label_to_types=None,
                   get_candidates={"@misc": "test.ExactNames.v1", "score": 0.9})
    docs = list(nlp.pipe(TEXTS))
    # one call for the batch; abbreviations reach the stage as their long forms ("KF" → kidney failure)
    assert CALLS == [["Plaquenil", "hydroxychloroquine", "heart attack", "Renal failure", "kidney failure",
                      "kidney failure", "kidney failure", "MS", "breast tumour", "Diabetes", "Heart attack",
                      "renal failure"]]
    assert [(e.text, e.kb_id_, e._.kb_ents) for e in docs[1].ents] == [
        ("Renal failure", "D051437", [("D051437", 0.9)]), ("kidney failure", "D051437", [("D051437", 0.9)]),
        ("KF", "D051437", [("D051437", 0.9)]), ("KF", "D051437", [("D051437", 0.9)])]
    ms = docs[4].ents[0]
    assert ms.text == "MS" and {cid for cid, _ in ms._.kb_ents} == {"D009103", "D009081"}
    assert docs[4].ents[1].text == "breast tumour" and docs[4].ents[1]._.kb_ents == []  # no such name: no concept
    pipe = nlp.get_pipe("sapbert_linker")
    assert pipe.linker.cache_info()["misses"] == 0  # the dense search never ran
    pipe.calibration = Calibration((5.0, 0.0), -1.0)  # scores the stage gives as probabilities are not calibrated
    assert [links(doc) for doc in nlp.pipe(TEXTS)] == [links(doc) for doc in docs]
    pipe.calibration = None
    # the threshold is the pipe's: above every score, nothing is linked
    nlp.get_pipe("sapbert_linker").threshold = 0.95
    assert all(e.kb_id_ == "" and e._.kb_ents == [] for doc in nlp.pipe(TEXTS) for e in doc.ents)
    nlp.get_pipe("sapbert_linker").threshold = 0.5
    nlp.to_disk(tmp_path / "saved")
    CALLS.clear()
    again = spacy.load(tmp_path / "saved")
    assert [links(doc) for doc in again.pipe(TEXTS)] == [links(doc) for doc in docs] and len(CALLS) == 1


def test_a_stage_that_is_not_a_function_is_refused_by_its_key():
    nlp = spacy.blank("en")
    with pytest.raises(InputError, match="'get_candidates' must be a registered function") as err:
        SapBertLinker(nlp, "sapbert_linker", get_candidates="dense")
    assert err.value.field == "get_candidates"


@registry.misc("test.OneTooMany.v1")
def make_one_too_many():
    def one_too_many(linker, mentions):
        return [Ranked([], True)] * (len(mentions.texts) + 1)

    return one_too_many


def test_a_stage_giving_another_count_than_one_per_mention_is_refused_by_its_key(tiny_bert, kb_path):
    nlp = make_nlp(tiny_bert, kb_path, get_candidates={"@misc": "test.OneTooMany.v1"})
    with pytest.raises(InputError, match="the get_candidates stage gave 4 results for 3 mentions") as err:
        nlp(TEXTS[0])
    assert err.value.field == "get_candidates"


def test_the_reranker_refuses_scores_that_are_probabilities_already():
    doc = spacy.blank("en")("heart attack")
    mentions = Mentions([doc[0:2]], ["heart attack"], None)
    found = [Ranked([("D1", 0.9), ("D2", 0.4)], True, ("heart attack", "myocardial infarction"))]
    assert context_rerank(None, mentions, found) == found  # no re-ranker: passed on as they came
    with pytest.raises(InputError, match="reads the first stage's cosines") as err:
        context_rerank(object(), mentions, found)
    assert err.value.field == "rerank"


def test_the_reranker_refuses_a_first_stage_that_names_no_candidate():
    assert named_candidates(Ranked([("D1", 0.9)], False, ("heart attack",)), 0) == [("D1", 0.9, "heart attack")]
    assert named_candidates(Ranked([], True), 3) == []
    with pytest.raises(InputError, match="mention 2 1 candidates and 0 names"):
        named_candidates(Ranked([("D1", 0.9)], True), 2)


def test_mentions_give_the_reranker_each_span_in_its_document():
    nlp = spacy.blank("en")
    doc = nlp("Acute kidney failure (KF) was seen.")
    spans = [doc[1:3], doc[4:5]]
    contexts = Mentions(spans, ["kidney failure", "kidney failure"], None).contexts()
    assert [(c.start, c.end, c.mention) for c in contexts] == [(6, 20, "kidney failure"), (22, 24, "kidney failure")]
    assert all(c.text == doc.text for c in contexts)
