"""Acc@1/Acc@5 under the BioSyn/SapBERT protocol, with GenBioEL-style sub-populations.

Protocol (what the published NCBI/BC5CDR numbers used; see :mod:`spacy_sapbert.training.evaluation.queries`
for the query side):

- **Queries**: gold mentions with an ID, abbreviations expanded from their abstract,
  composite mentions split, normalised.
- **Dictionary**: the KB plus the normalised training mentions as extra names of their
  gold concept (BioSyn's "test dictionary": train + dev mentions for a test set, train
  mentions for a dev set), or the KB alone (``kb_only``: what a user without annotated
  data has). A training mention whose ID the KB lacks becomes a concept of its own, as
  in BioSyn. Composite training mentions add their parts only where the corpus aligns
  parts with IDs (BC5CDR's 7th column); NCBI's split parts are not reliably in ID order.
  Built by :mod:`spacy_sapbert.training.evaluation.datasets`.
- **Correctness**: a predicted concept is right when any of its IDs (``Concept.ids``,
  the ``|``-joined equivalents) is a gold ID (:func:`spacy_sapbert.kb.matching.is_gold`, the
  rule the end-to-end NER scores use too). Each composite part must be right on its
  own (BioSyn's rule: a part may match any of the mention's gold IDs, because the
  corpora do not keep parts and IDs in the same order); Acc@k counts a query when every
  part has a right concept among its top k *concepts* (BioSyn ranked names).
- **Sub-populations**: single-word / multi-word queries, mentions and concepts unseen in
  the training split(s), mentions that are not a KB synonym of their gold concept, the
  100 most frequent gold concepts of the evaluated set, gold IDs the KB has / lacks,
  composite mentions, abbreviations expanded; each reported with its count.
"""
from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.matching import concept_key, is_gold

from .datasets import EvalSet
from .queries import Query
from .systems import LinkingSystem

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
KS = (1, 5)
TOP_CONCEPTS = 100


# -- scoring ------------------------------------------------------------------------------
def query_hits(query: Query, ranked_parts: Sequence[Sequence[str]], dictionary: KnowledgeBase,
               ks: Sequence[int] = KS) -> Dict[int, bool]:
    """For each k: is every part's gold among its top-k concepts (:func:`spacy_sapbert.kb.matching.is_gold`)?"""
    hits = {}
    for k in ks:
        hits[k] = all(any(is_gold(cid, query.gold, dictionary) for cid in ranked[:k]) for ranked in ranked_parts)
    return hits


def score_queries(system: LinkingSystem, eval_set: EvalSet, ks: Sequence[int] = KS) -> List[Dict[str, Any]]:
    """Per query, its hits and its top concepts (:meth:`LinkingSystem.rank_queries`)."""
    system.prepare(eval_set.dictionary)
    rows = []
    for query, parts_ranked in zip(eval_set.queries, system.rank_queries(eval_set.queries, max(ks))):
        rows.append({"query": query, "hits": query_hits(query, parts_ranked, eval_set.dictionary, ks),
                     "ranked": parts_ranked})
    return rows


# -- sub-populations ----------------------------------------------------------------------
def subpopulations(eval_set: EvalSet) -> Dict[str, List[bool]]:
    """Membership masks (one bool per query) of GenBioEL's analysis groups and a few more."""
    kb = eval_set.kb
    queries = eval_set.queries
    train_parts: Set[str] = {p for q in eval_set.train_queries for p in q.parts}
    train_concepts: Set[str] = {concept_key(g, kb) for q in eval_set.train_queries for g in q.gold}
    frequency = Counter(concept_key(g, kb) for q in queries for g in q.gold)
    top = {cid for cid, _ in sorted(frequency.items(), key=lambda item: -item[1])[:TOP_CONCEPTS]}

    def is_synonym(query: Query) -> bool:
        names: Set[str] = set()
        for gid in query.gold:
            concept = kb.resolve(gid)
            if concept is not None:
                names.update(KnowledgeBase.normalized_names(concept))
        return all(p in names for p in query.parts)

    tests: Dict[str, Callable[[Query], bool]] = {
        "single-word": lambda q: all(len(p.split()) == 1 for p in q.parts),
        "multi-word": lambda q: any(len(p.split()) > 1 for p in q.parts),
        "unseen mention": lambda q: any(p not in train_parts for p in q.parts),
        "unseen concept": lambda q: any(concept_key(g, kb) not in train_concepts for g in q.gold),
        "not a KB synonym": lambda q: not is_synonym(q),
        f"top-{TOP_CONCEPTS} concepts": lambda q: all(concept_key(g, kb) in top for g in q.gold),
        "gold in KB": lambda q: all(kb.resolve(g) is not None for g in q.gold),
        "gold not in KB": lambda q: any(kb.resolve(g) is None for g in q.gold),
        "composite": lambda q: q.is_composite,
        "abbreviation expanded": lambda q: q.was_expanded,
    }
    return {name: [test(q) for q in queries] for name, test in tests.items()}


def _accuracy(rows: Sequence[Dict[str, Any]], mask: Optional[Sequence[bool]], ks: Sequence[int]) -> Dict[str, Any]:
    chosen = [r for i, r in enumerate(rows) if mask is None or mask[i]]
    out: Dict[str, Any] = {"count": len(chosen)}
    for k in ks:
        out[f"acc@{k}"] = round(100.0 * sum(r["hits"][k] for r in chosen) / len(chosen), 2) if chosen else None
    return out


def coverage(eval_set: EvalSet) -> Dict[str, Any]:
    """How much of the gold the KB can possibly get right (queries and distinct IDs)."""
    kb = eval_set.kb
    ids = {g for q in eval_set.queries for g in q.gold}
    covered_ids = {g for g in ids if kb.resolve(g) is not None}
    covered_queries = sum(all(kb.resolve(g) is not None for g in q.gold) for q in eval_set.queries)
    dictionary_queries = sum(all(eval_set.dictionary.resolve(g) is not None for g in q.gold)
                             for q in eval_set.queries)
    n = len(eval_set.queries)
    return {
        "gold_ids": len(ids), "gold_ids_in_kb": len(covered_ids),
        "gold_ids_in_kb_pct": round(100.0 * len(covered_ids) / len(ids), 2) if ids else None,
        "queries_with_gold_in_kb_pct": round(100.0 * covered_queries / n, 2) if n else None,
        "queries_with_gold_in_dictionary_pct": round(100.0 * dictionary_queries / n, 2) if n else None,
    }


def evaluate(system: LinkingSystem, eval_set: EvalSet, ks: Sequence[int] = KS,
             predictions: Optional[PathLike] = None) -> Dict[str, Any]:
    """One system on one dataset and dictionary: overall Acc@k, sub-populations, coverage."""
    if not eval_set.queries:
        raise InputError(f"{eval_set.name}: no queries with an ID to evaluate", eval_set.files.get("eval"))
    started = time.perf_counter()
    rows = score_queries(system, eval_set, ks)
    seconds = time.perf_counter() - started
    masks = subpopulations(eval_set)
    result: Dict[str, Any] = {
        "dataset": eval_set.name,
        "dictionary": eval_set.mode,
        "system": system.name,
        "system_info": system.describe(),
        **_accuracy(rows, None, ks),
        "subpopulations": {name: _accuracy(rows, mask, ks) for name, mask in masks.items()},
        "coverage": coverage(eval_set),
        "queries": {"count": len(eval_set.queries), "composite": sum(q.is_composite for q in eval_set.queries),
                    "abbreviation_expanded": sum(q.was_expanded for q in eval_set.queries),
                    "training_queries": len(eval_set.train_queries)},
        "kb": {"name": eval_set.kb.name, "fingerprint": eval_set.kb.fingerprint(), "concepts": len(eval_set.kb)},
        "dictionary_info": {"name": eval_set.dictionary.name, "concepts": len(eval_set.dictionary),
                            "names": sum(1 for _ in eval_set.dictionary.name_concept_pairs())},
        "files": eval_set.files,
        "seconds": round(seconds, 2),
    }
    logger.info("%s | %s | %s: Acc@1 %.2f Acc@5 %.2f (%d queries, %.1f s)", eval_set.name, eval_set.mode,
                system.name, result["acc@1"], result[f"acc@{max(ks)}"], result["count"], seconds)
    if predictions is not None:
        write_predictions(rows, predictions)
    return result


def write_predictions(rows: Sequence[Dict[str, Any]], path: PathLike) -> Path:
    """One JSON line per query (text, parts, gold, top concepts per part, hits): for error analysis."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            q: Query = row["query"]
            out.write(json.dumps({"source": q.source, "pmid": q.pmid, "mention": q.mention, "parts": list(q.parts),
                                  "gold": list(q.gold), "ranked": row["ranked"],
                                  "hits": {f"acc@{k}": v for k, v in row["hits"].items()}},
                                 ensure_ascii=False) + "\n")
    return path
