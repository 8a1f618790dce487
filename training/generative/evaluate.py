"""Acc@k of the generative linker on BioSyn queries, alone and as a re-scorer of the dense top-k.

The queries come from a re-ranker data file (``sapbert rerank build-data``): each
(sub-)mention with its abstract and the dense first stage's candidates, so the three systems
see the same items. SapBERT's rules: a candidate is right when its ``|``-split IDs meet the
query's gold IDs; a query counts at rank r when its last sub-mention finds its first right
candidate at rank r.

- **generative**: constrained beam search over a trie of every dictionary name;
- **dense**: the first stage's order;
- **dense + generative**: the dense top ``k`` re-ordered by ``cosine + weight × mean token
  log-probability`` of each candidate's name given the mention (the generative model
  teacher-forced, constrained to those names), for each weight given; pick the weight on dev.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence, Tuple

from tqdm import tqdm

from spacy_sapbert.generative.seq2seq import GenerativeModel, Mention

from spacy_sapbert.formats.biosyn import read_dictionary
from spacy_sapbert.kb.matching import is_gold
from ..rerank.data import RerankData

NOT_FOUND = 10_000


def mention_of(data: RerankData, item: Any) -> Mention:
    return Mention.around(data.documents[item.doc], item.start, item.end, item.mention)


def _first_right(ranked: Sequence[str], gold: Sequence[str]) -> int:
    return next((rank for rank, cui in enumerate(ranked) if is_gold(cui, gold, None)), NOT_FOUND)


def _rates(items: Sequence[Any], first: Sequence[int], at: Sequence[int] = (1, 5)) -> Dict[str, float]:
    by_query: Dict[int, int] = {}
    for item, rank in zip(items, first):
        by_query[item.query] = max(by_query.get(item.query, 0), rank)
    ranks = list(by_query.values())
    return {f"acc@{k}": round(100.0 * sum(r < k for r in ranks) / len(ranks), 2) for k in at}


def evaluate(model: GenerativeModel, data: RerankData, dictionary: Sequence[Tuple[str, str]], k: int = 8,
             beams: int = 5, weights: Sequence[float] = (0.02, 0.05, 0.1, 0.2), limit: int = 0) -> Dict[str, Any]:
    """The three systems' Acc@1/@5 on ``data`` (see the module's docstring), with mentions/s."""
    items = data.items[:limit] if limit else data.items
    trie = model.build_trie([(name, cui) for cui, name in dictionary])
    report: Dict[str, Any] = {"items": len(items), "queries": len({i.query for i in items}), "k": k, "beams": beams,
                              "trie_names": trie.names}
    report["dense"] = _rates(items, [_first_right([c[0] for c in i.candidates], i.query_gold) for i in items])
    started = time.perf_counter()
    generated = [[cui for cui, _ in model.generate(mention_of(data, i), trie, beams=beams, top=5)]
                 for i in tqdm(items, desc="generating", unit="mention")]
    seconds = time.perf_counter() - started
    report["generative"] = {**_rates(items, [_first_right(g, i.query_gold) for g, i in zip(generated, items)]),
                            "mentions_per_s": round(len(items) / seconds, 2)}
    started = time.perf_counter()
    scores = [model.score_names(mention_of(data, i), [c[1] for c in i.candidates[:k]])
              for i in tqdm(items, desc="re-scoring", unit="mention")]
    seconds = time.perf_counter() - started
    rescored: Dict[str, Any] = {"mentions_per_s": round(len(items) / seconds, 2)}
    for weight in [*weights, float("inf")]:
        first = []
        for item, gen in zip(items, scores):
            top = item.candidates[:k]
            key = (lambda j: gen[j]) if weight == float("inf") else (lambda j: top[j][2] + weight * gen[j])
            order = sorted(range(len(top)), key=lambda j: -key(j))
            ranked = [top[j][0] for j in order] + [c[0] for c in item.candidates[k:]]
            first.append(_first_right(ranked, item.query_gold))
        rescored["generative only" if weight == float("inf") else f"w={weight}"] = _rates(items, first)
    report["dense+generative"] = rescored
    return report


def read_dictionary_pairs(path: Any) -> List[Tuple[str, str]]:
    """``(CUI, name)`` pairs of a BioSyn dictionary file, in file order."""
    names, cuis = read_dictionary(path)
    return list(zip(cuis, names))


__all__ = ["evaluate", "mention_of", "read_dictionary_pairs"]
