"""The ``sapbert_linker`` pipe's optional second stage: the context re-ranker (``rerank``), adaptive (``rerank_max_gap``)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import spacy
import torch

from spacy_sapbert.linking.rerank.stage import ContextReranking, needs_rerank
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.linking.rerank.model import Reranker, softmax
from spacy_sapbert.linking.rerank.settings import RerankerSettings
from spacy_sapbert.linking.rerank.inputs import candidate_text
from spacy_sapbert.linking.settings import SettingError
from tests.linker_fixtures import write_small_kb
from tests.pipes.test_component import TEXTS, links, make_nlp


def _reranker(tiny_bert, folder, **settings):
    from spacy_sapbert.training.rerank.model import load_cross_encoder

    torch.manual_seed(0)
    model, config, tokenizer = load_cross_encoder(str(tiny_bert), 0.0)
    with torch.no_grad():  # a random head that moves scores by a few logits, so the order can change
        model.classifier.weight.normal_(0.0, 2.0)
    return Reranker(model, RerankerSettings(**settings), config, tokenizer).save(folder, weights_dtype="float32")


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return write_small_kb(tmp_path_factory.mktemp("kb"))


@pytest.fixture(scope="module")
def prior_reranker(tiny_bert, tmp_path_factory):
    return _reranker(tiny_bert, tmp_path_factory.mktemp("rr") / "prior", k=4, first_stage_weight=20.0,
                     temperature=1.5)


def test_needs_rerank():
    assert not needs_rerank([], None) and not needs_rerank([0.9], None)
    assert needs_rerank([0.9, 0.2], None)
    assert needs_rerank([0.9, 0.86], 0.05) and not needs_rerank([0.9, 0.85], 0.05)
    assert not needs_rerank([0.9, 0.9], 0.0)


def test_every_span_reranked_in_its_document(tiny_bert, kb_path, prior_reranker):
    nlp = make_nlp(tiny_bert, kb_path, abbreviations=True, rerank=str(prior_reranker))
    pipe = nlp.get_pipe("sapbert_linker")
    reranker = pipe.reranking.reranker
    seen = []
    original = reranker.probabilities

    def spy(contexts, texts, batch_size=None, first_stage=None):
        seen.extend(zip(contexts, texts, first_stage))
        return original(contexts, texts, batch_size, first_stage)

    reranker.probabilities = spy
    docs = list(nlp.pipe(TEXTS))
    spans = [span for doc in docs for span in doc.ents]
    queries = [q for doc in docs for q in pipe._queries(doc)[1]]
    found = pipe.linker.named_candidates(queries, pipe.linker.types_for([s.label_ for s in spans]))
    assert pipe.reranking.reranked == len(seen) == sum(len(f) >= 2 for f in found) > 0
    # what the cross-encoder read: the document, the span's offsets, the searched text normalised
    # (an abbreviation's long form), each of the top k's best name and canonical name, their cosines
    by_offsets = {(c.text, c.start, c.end): (c, t, f) for c, t, f in seen}
    for span, query, top in zip(spans, queries, found):
        if len(top) < 2:
            continue
        context, texts, cosines = by_offsets[(span.doc.text, span.start_char, span.end_char)]
        assert context.mention == normalize(query)
        top = top[:4]
        assert texts == [candidate_text(name, pipe.kb[cid].canonical_name) for cid, _, name in top]
        assert cosines == [score for _, score, _ in top]
        probs = original([context], [texts], first_stage=[cosines])[0]
        expected = [(top[j][0], pytest.approx(float(probs[j]), abs=1e-6)) for j in reranker.order(probs)]
        assert span._.kb_ents == expected[:5] and span.kb_id_ == expected[0][0]
    assert any(query != span.text for span, query in zip(spans, queries))  # "KF" went as its long form


def test_adaptive_rerank_and_first_stage_probabilities(tiny_bert, kb_path, prior_reranker):
    nlp = make_nlp(tiny_bert, kb_path, rerank=str(prior_reranker), rerank_max_gap=0.0)
    pipe = nlp.get_pipe("sapbert_linker")
    docs = list(nlp.pipe(TEXTS))
    assert pipe.reranking.reranked == 0 and pipe.reranking.kept > 0  # a gap of 0: the first stage decides all
    for doc in docs:
        for span in doc.ents:
            first = pipe.linker.candidates([pipe._queries(doc)[1][list(doc.ents).index(span)]],
                                           pipe.linker.types_for([span.label_]))[0][:4]
            probs = softmax(20.0 * np.array([s for _, s in first]), 1.5)
            assert span._.kb_ents == [(cid, pytest.approx(float(p), abs=1e-9)) for (cid, _), p in zip(first, probs)]
    pipe.rerank_max_gap = 2.0  # live: now every span with two candidates goes to the cross-encoder
    list(nlp.pipe(TEXTS))
    assert pipe.reranking.max_gap == 2.0 and pipe.reranking.reranked > 0
    pipe.threshold = 0.99  # scores are probabilities: a threshold on them abstains
    assert all(s >= 0.99 for doc in nlp.pipe(TEXTS) for e in doc.ents for _, s in e._.kb_ents)
    with pytest.raises(InputError, match="rerank cannot change"):
        pipe.rerank = None  # the re-ranker is a part: loaded with the others
    with pytest.raises(SettingError, match="rerank_max_gap"):
        make_nlp(tiny_bert, kb_path, rerank_max_gap=3)
    with pytest.raises(SettingError, match="'rerank'"):
        make_nlp(tiny_bert, kb_path, rerank="")


def test_saved_with_its_reranker_and_without(tiny_bert, kb_path, prior_reranker, tmp_path):
    folder = shutil.copytree(prior_reranker, tmp_path / "rr")
    nlp = make_nlp(tiny_bert, kb_path, rerank=str(folder), rerank_max_gap=1.0)
    before = [links(doc) for doc in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(folder)  # the saved pipeline carries its own copy
    saved = tmp_path / "pipeline" / "sapbert_linker" / "reranker"
    assert (saved / "reranker.json").is_file() and (saved / "model.safetensors").is_file()
    loaded = spacy.load(tmp_path / "pipeline")
    assert [links(doc) for doc in loaded.pipe(TEXTS)] == before
    assert loaded.get_pipe("sapbert_linker").reranking.max_gap == 1.0
    # a pipe without a re-ranker saved over it leaves no re-ranker behind to be loaded back
    make_nlp(tiny_bert, kb_path).to_disk(tmp_path / "pipeline")
    assert not saved.exists()
    assert spacy.load(tmp_path / "pipeline").get_pipe("sapbert_linker").reranking is None


def test_reranker_without_first_stage_weight_keeps_cosines_where_it_does_not_rerank(tiny_bert, kb_path, tmp_path):
    folder = _reranker(tiny_bert, tmp_path / "plain", k=3)
    nlp = make_nlp(tiny_bert, kb_path, rerank=str(folder), rerank_max_gap=0.0)
    pipe = nlp.get_pipe("sapbert_linker")
    plain = make_nlp(tiny_bert, kb_path).get_pipe("sapbert_linker")
    for doc in nlp.pipe(TEXTS):
        for span in doc.ents:
            query = pipe._queries(doc)[1][list(doc.ents).index(span)]
            expected = plain.linker.link([query], plain.linker.types_for([span.label_]))[0][:3]
            assert [c for c, _ in span._.kb_ents] == [c for c, _ in expected]  # the same cosines, to float32's
            assert [s for _, s in span._.kb_ents] == pytest.approx([s for _, s in expected], abs=1e-6)  # last bit
    assert isinstance(pipe.reranking, ContextReranking) and pipe.reranking.k == 3
