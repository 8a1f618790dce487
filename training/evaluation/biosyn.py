"""BioSyn-format evaluation, scored exactly as SapBERT's ``evaluation/utils.py`` scores it.

The published NCBI-disease / BC5CDR-disease Acc@k figures (BioSyn, SapBERT, ResCNN, GenBioEL)
are computed on BioSyn's preprocessed data: a folder of ``<PMID>.concept`` files (one query a
line, ``PMID||start|end||type||mention||CUI``) and a dictionary file (``CUI||name`` a line).
Users of those systems have the same format for their own datasets, so it is read as it is
(:mod:`spacy_sapbert.formats.biosyn`, with the ID rules below).

The scoring follows SapBERT's code, not our PubTator protocol: every query line counts (no
de-duplication, CUI-less ``-1`` queries included); a query's mention is split on ``|`` (and
``+``) into sub-mentions, each searched alone over every dictionary name; a candidate is right
when its ``|``-split CUIs intersect the gold CUIs; a query is right at k when every sub-mention
has a right candidate among its first k names. SapBERT ranks by the raw inner product of the
pooled vectors (``dot``); the product ranks by cosine (``cosine``): both are reported, with the
recall of the cosine ranking at 1, 5, 10 and 20 (``cosine_recall``: what a re-ranker would see).

Hybrid mode (``sparse_weights``), as BioSyn scores: the candidates of a sub-mention are the union
of its dense (cosine) top-``candidates`` and its character n-gram TF-IDF top-``candidates``
(:mod:`spacy_sapbert.index.char_ngrams`, fitted on the dictionary's distinct names), ranked by
``cosine + w · sparse cosine``; Acc@k and recall@k follow the same rules over that ranking, and
``recall@union`` counts a right name anywhere among the candidates.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from spacy_sapbert.formats.biosyn import BiosynQuery, dictionary_ids, gold_ids, sub_mentions
from spacy_sapbert.index.char_ngrams import CharNgramIndex, CharNgramSettings
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)
SCORINGS = ("cosine", "dot")
RECALL_AT = (1, 5, 10, 20)
DEFAULT_CANDIDATES = 20
DEFAULT_WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0)
_NOT_FOUND = np.iinfo(np.int64).max


def _best(scores: np.ndarray, k: int) -> np.ndarray:
    """Column numbers of the ``k`` highest scores of each row, best first."""
    part = np.argpartition(-scores, kth=min(k, scores.shape[1] - 1), axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def top_candidates(query_vectors: np.ndarray, name_vectors: np.ndarray, k: int, chunk: int = 256) -> np.ndarray:
    """Row numbers of the ``k`` (at most every) best-scoring names of each query (exact search, best first)."""
    k = min(k, len(name_vectors))
    out = np.empty((len(query_vectors), k), dtype=np.int64)
    for start in range(0, len(query_vectors), chunk):
        out[start:start + chunk] = _best(query_vectors[start:start + chunk] @ name_vectors.T, k)
    return out


def _unions(query_vectors: np.ndarray, name_vectors: np.ndarray, sparse_rows: np.ndarray, k: int,
            chunk: int = 256) -> Tuple[np.ndarray, np.ndarray]:
    """Each query's dense top-``k`` rows followed by its ``sparse_rows`` not among them (padded with
    -1), and their dense scores (-inf for padding), taken from the very products that ranked them."""
    k = min(k, len(name_vectors))
    width = k + sparse_rows.shape[1]
    rows = np.full((len(query_vectors), width), -1, dtype=np.int64)
    dense = np.full((len(query_vectors), width), -np.inf, dtype=np.float32)
    for start in range(0, len(query_vectors), chunk):
        scores = query_vectors[start:start + chunk] @ name_vectors.T
        for i, top in enumerate(_best(scores, k)):
            union = list(dict.fromkeys([*top.tolist(), *(r for r in sparse_rows[start + i].tolist() if r >= 0)]))
            rows[start + i, :len(union)] = union
            dense[start + i, :len(union)] = scores[i, union]
    return rows, dense


def right_candidates(rows: np.ndarray, gold: Sequence[set], cui_sets: Sequence[frozenset]) -> np.ndarray:
    """Whether each candidate (row number; -1: none) of each sub-mention is right: its ``cui_sets`` (the
    :func:`~spacy_sapbert.formats.biosyn.dictionary_ids`, split once) meet the gold, which is
    :func:`spacy_sapbert.kb.matching.is_gold` without a KB over many candidates at a time."""
    right = np.zeros(rows.shape, dtype=bool)
    for i, (candidates, wanted) in enumerate(zip(rows.tolist(), gold)):
        right[i] = [row >= 0 and bool(cui_sets[row] & wanted) for row in candidates]
    return right


def query_ranks(right: np.ndarray, parts: Sequence[Sequence[str]]) -> np.ndarray:
    """Per query, the rank at which its last sub-mention finds its first right candidate."""
    first = np.where(right.any(axis=1), right.argmax(axis=1), _NOT_FOUND)
    return np.maximum.reduceat(first, np.cumsum([0] + [len(p) for p in parts[:-1]]))


def rates(ranks: np.ndarray, prefix: str, at: Sequence[int]) -> Dict[str, float]:
    """``{prefix@i: % of queries whose rank is below i}`` for each ``i`` in ``at``."""
    return {f"{prefix}@{i}": round(100.0 * float(np.mean(ranks < i)), 2) for i in at}


def score(encoder: Encoder, queries: Sequence[BiosynQuery], names: Sequence[str], cuis: Sequence[str],
          scorings: Sequence[str] = SCORINGS, k: int = 5, sparse_weights: Sequence[float] = (),
          sparse_schemes: Sequence[CharNgramSettings] = (), candidates: int = DEFAULT_CANDIDATES,
          ) -> Dict[str, Any]:
    """Acc@1..k of ``encoder`` per scoring, as SapBERT's ``evaluate_topk_acc`` computes them (plus
    ``cosine_recall``, and ``hybrid``: one entry per sparse scheme and weight when weights are given)."""
    flat = [p for mention_parts in sub_mentions(queries) for p in mention_parts]
    raw_names = encoder.encode(list(names), show_progress=True, normalize=False)
    raw_queries = encoder.encode(flat, normalize=False)
    return score_vectors(queries, names, cuis, raw_queries, raw_names, scorings, k, sparse_weights, sparse_schemes,
                         candidates)


def score_vectors(queries: Sequence[BiosynQuery], names: Sequence[str], cuis: Sequence[str],
                  raw_queries: np.ndarray, raw_names: np.ndarray, scorings: Sequence[str] = SCORINGS, k: int = 5,
                  sparse_weights: Sequence[float] = (), sparse_schemes: Sequence[CharNgramSettings] = (),
                  candidates: int = DEFAULT_CANDIDATES) -> Dict[str, Any]:
    """:func:`score` from the pooled vectors of the sub-mentions (in :func:`sub_mentions` order) and names."""
    for scoring in scorings:
        if scoring not in SCORINGS:
            raise InputError(f"unknown scoring {scoring!r}: use {', '.join(SCORINGS)}", field="scoring")
    if not queries or not names:
        raise InputError("nothing to score: no queries or no dictionary names")
    if candidates < 1:
        raise InputError(f"candidates must be positive, got {candidates}", field="candidates")
    parts = sub_mentions(queries)
    flat = [p for mention_parts in parts for p in mention_parts]
    if len(flat) != len(raw_queries) or len(names) != len(raw_names) or len(names) != len(cuis):
        raise InputError("vectors, sub-mentions, names and CUIs do not match in number")
    gold = [gold_ids(q.cui) for q, p in zip(queries, parts) for _ in p]
    cui_sets = [dictionary_ids(cui) for cui in cuis]
    unit_names, unit_queries = unit_rows(raw_names), unit_rows(raw_queries)
    results: Dict[str, Any] = {}
    for scoring in scorings:
        cosine = scoring == "cosine"
        depth = max(k, *RECALL_AT) if cosine else k
        best = top_candidates(unit_queries if cosine else raw_queries, unit_names if cosine else raw_names, depth)
        ranks = query_ranks(right_candidates(best, gold, cui_sets), parts)
        results[scoring] = rates(ranks, "acc", range(1, k + 1))
        if cosine:
            results["cosine_recall"] = rates(ranks, "recall", RECALL_AT)
    results["exact_name_ceiling"] = exact_name_ceiling(parts, gold, names, cui_sets)
    if sparse_weights:
        results["hybrid"] = _hybrid(flat, parts, gold, cui_sets, names, unit_queries, unit_names, k,
                                    sparse_weights, sparse_schemes or (CharNgramSettings(),), candidates)
    return results


def exact_name_ceiling(parts: Sequence[Sequence[str]], gold: Sequence[set], names: Sequence[str],
                       cui_sets: Sequence[frozenset]) -> Dict[str, Any]:
    """How many queries no context-free ranking by cosine can get right: those with a sub-mention
    that is, verbatim, a dictionary name of wrong concepts only. Its vector is that name's, so the
    name scores 1.0 and comes first (or ties) whatever the encoder. The rest is the Acc@1 ceiling.

    Why report it: on NCBI test with the train dictionary (MEDIC alone) 54 of 960 queries are such
    (``dm`` is a MEDIC name of myotonic dystrophy 1, ``160900|C538008``, where NCBI's annotators chose
    Myotonic Dystrophy, ``D009223``): a limit that no encoder training moves."""
    ids_of_name: Dict[str, set] = {}
    for name, ids in zip(names, cui_sets):
        ids_of_name.setdefault(name, set()).update(ids)
    flat = [p for mention_parts in parts for p in mention_parts]
    blocked = np.array([p in ids_of_name and not ids_of_name[p] & wanted for p, wanted in zip(flat, gold)])
    starts = np.cumsum([0] + [len(p) for p in parts[:-1]])
    per_query = np.logical_or.reduceat(blocked, starts) if len(flat) else blocked
    return {"queries": int(per_query.sum()), "acc@1": round(100.0 * (1.0 - float(np.mean(per_query))), 2)}


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1 (a zero row stays zero)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _hybrid(flat: List[str], parts: Sequence[Sequence[str]], gold: Sequence[set], cui_sets: Sequence[frozenset],
            names: Sequence[str], unit_queries: np.ndarray, unit_names: np.ndarray, k: int,
            weights: Sequence[float], schemes: Sequence[CharNgramSettings], candidates: int) -> List[Dict[str, Any]]:
    distinct = list(dict.fromkeys(names))  # the sparse index has one row per distinct name
    position = {name: i for i, name in enumerate(distinct)}
    distinct_of_row = np.array([position[name] for name in names], dtype=np.int64)
    rows_of: List[List[int]] = [[] for _ in distinct]
    for row, d in enumerate(distinct_of_row.tolist()):
        rows_of[d].append(row)
    entries = []
    for scheme in schemes:
        index = CharNgramIndex.fit(distinct, scheme)
        _, hits = index.search(flat, candidates)
        expanded = [[r for d in query_hits for r in rows_of[d]] for query_hits in hits.tolist()]
        sparse_rows = np.full((len(flat), max(map(len, expanded))), -1, dtype=np.int64)
        for i, rows in enumerate(expanded):
            sparse_rows[i, :len(rows)] = rows
        union, dense = _unions(unit_queries, unit_names, sparse_rows, candidates)
        sparse = index.score_pairs(flat, np.where(union >= 0, distinct_of_row[np.maximum(union, 0)], -1))
        right = right_candidates(union, gold, cui_sets)
        for weight in weights:
            order = np.argsort(-(dense + np.float32(weight) * sparse), axis=1, kind="stable")
            ranks = query_ranks(np.take_along_axis(right, order, axis=1), parts)
            entries.append({"sparse": scheme.label(), "sparse_weight": float(weight), "candidates": candidates,
                            **rates(ranks, "acc", range(1, k + 1)), **rates(ranks, "recall", RECALL_AT),
                            "recall@union": round(100.0 * float(np.mean(ranks < _NOT_FOUND)), 2)})
            logger.info("hybrid %s w=%g: acc@1 %.2f", scheme.label(), weight, entries[-1]["acc@1"])
    return entries


def best_hybrid(entries: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The entry of highest Acc@1 (then highest Acc@5, or the deepest Acc@k reported; then the smaller weight)."""
    if not entries:
        raise InputError("no hybrid results to choose from: give --sparse-weight values")
    deepest = max(int(key.split("@")[1]) for key in entries[0] if key.startswith("acc@"))
    tie = f"acc@{min(5, deepest)}"
    return max(entries, key=lambda e: (e["acc@1"], e[tie], -e["sparse_weight"]))


__all__ = ["DEFAULT_CANDIDATES", "DEFAULT_WEIGHTS", "RECALL_AT", "SCORINGS", "best_hybrid", "exact_name_ceiling",
           "query_ranks", "rates", "right_candidates", "score", "score_vectors", "top_candidates", "unit_rows"]
