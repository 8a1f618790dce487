"""Acc@1/Acc@5 under the BioSyn/SapBERT protocol, with GenBioEL-style sub-populations.

Protocol (what the published NCBI/BC5CDR numbers used; see :mod:`training.eval_queries`
for the query side):

- **Queries**: gold mentions with an ID, abbreviations expanded from their abstract,
  composite mentions split, normalised.
- **Dictionary**: the KB plus the normalised training mentions as extra names of their
  gold concept (BioSyn's "test dictionary": train + dev mentions for a test set, train
  mentions for a dev set), or the KB alone (``kb_only``: what a user without annotated
  data has). A training mention whose ID the KB lacks becomes a concept of its own, as
  in BioSyn. Composite training mentions add their parts only where the corpus aligns
  parts with IDs (BC5CDR's 7th column); NCBI's split parts are not reliably in ID order.
- **Correctness**: a predicted concept is right when any of its IDs (``Concept.ids``,
  the ``|``-joined equivalents) is a gold ID. Each composite part must be right on its
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb import Concept, KnowledgeBase

from .baselines import LinkingSystem
from .eval_queries import AbbreviationExpander, Query, load_queries

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
KS = (1, 5)
TOP_CONCEPTS = 100


@dataclass(frozen=True)
class DatasetSpec:
    """A benchmark: the file to evaluate, the files whose mentions join the dictionary, the KB."""

    name: str
    eval_file: str
    train_files: Tuple[str, ...]
    kb: str
    types: Optional[Tuple[str, ...]] = None
    note: str = ""


_NCBI = "corpora/ncbi-disease/"
_CDR = "corpora/bc5cdr/"
DATASETS: Dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec("ncbi-dev", _NCBI + "NCBIdevelopset_corpus.txt", (_NCBI + "NCBItrainset_corpus.txt",), "medic"),
        DatasetSpec("ncbi-test", _NCBI + "NCBItestset_corpus.txt",
                    (_NCBI + "NCBItrainset_corpus.txt", _NCBI + "NCBIdevelopset_corpus.txt"), "medic"),
        DatasetSpec("bc5cdr-disease-dev", _CDR + "CDR_DevelopmentSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt",), "medic", ("Disease",)),
        DatasetSpec("bc5cdr-chemical-dev", _CDR + "CDR_DevelopmentSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt",), "mesh", ("Chemical",),
                    "MeSH 2024 descriptors only: CTD chemicals and MeSH supplementary (C…) concepts are missing"),
        # Not in the offline mirror (kept as an independent check); used when a user has the file.
        DatasetSpec("bc5cdr-disease-test", _CDR + "CDR_TestSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt", _CDR + "CDR_DevelopmentSet.PubTator.txt"), "medic",
                    ("Disease",)),
        DatasetSpec("bc5cdr-chemical-test", _CDR + "CDR_TestSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt", _CDR + "CDR_DevelopmentSet.PubTator.txt"), "mesh",
                    ("Chemical",)),
    )
}
# The four benchmarks of the README table (the BC5CDR test split is not distributed here).
DEFAULT_DATASETS = ("ncbi-dev", "ncbi-test", "bc5cdr-disease-dev", "bc5cdr-chemical-dev")


@dataclass
class EvalSet:
    """Everything a system is scored on: queries, training queries, KB and dictionary."""

    name: str
    mode: str
    queries: List[Query]
    train_queries: List[Query]
    kb: KnowledgeBase
    dictionary: KnowledgeBase
    files: Dict[str, Any] = field(default_factory=dict)


# -- dictionary ---------------------------------------------------------------------------
def training_names(train_queries: Iterable[Query]) -> List[Tuple[str, str]]:
    """(gold ID, normalised name) pairs the training mentions contribute to the dictionary.

    Single-ID queries contribute their text; composite ones only when the corpus gave
    the parts in ID order (BC5CDR's 7th column). Parts split by text patterns (NCBI) are
    not reliably in ID order ("pineal and retinal tumours" is D019572|D010871, retinal first), so
    they would teach the dictionary wrong names.
    """
    pairs: List[Tuple[str, str]] = []
    for query in train_queries:
        if len(query.gold) == 1 and len(query.parts) == 1:
            pairs.append((query.gold[0], query.parts[0]))
        elif query.parts_aligned:
            pairs.extend(zip(query.gold, query.parts))
    return [(gid, name) for gid, name in pairs if name]


def build_dictionary(kb: KnowledgeBase, train_queries: Iterable[Query], name: Optional[str] = None) -> KnowledgeBase:
    """The KB plus the training mentions as names of their gold concepts (BioSyn's dictionary)."""
    dictionary = KnowledgeBase(iter(kb), name=name or f"{kb.name}+train")
    added = new_concepts = 0
    for gid, mention in training_names(train_queries):
        concept = kb.resolve(gid) or dictionary.resolve(gid)
        if concept is None:
            dictionary.add(Concept(gid, mention))
            new_concepts += 1
        else:
            dictionary.add(Concept(concept.concept_id, concept.canonical_name, [mention]))
        added += 1
    logger.info("dictionary %s: %d training names added (%d concepts not in the KB), %d concepts",
                dictionary.name, added, new_concepts, len(dictionary))
    return dictionary


# -- loading ------------------------------------------------------------------------------
def kb_path(kbs_dir: PathLike, kb_name: str) -> Path:
    """``<kbs>/<name>.jsonl.gz`` (or ``.jsonl``), as ``spacy project run kb`` writes them."""
    base = Path(kbs_dir)
    for suffix in (".jsonl.gz", ".jsonl", ".json"):
        candidate = base / f"{kb_name}{suffix}"
        if candidate.is_file():
            return candidate
    raise InputError(f"knowledge base {kb_name!r} not found (expected {kb_name}.jsonl.gz; run `spacy project run kb`)",
                     base)


class Loader:
    """Loads queries and KBs once per run (a KB or a corpus is shared by several datasets)."""

    def __init__(self, expand_abbreviations: bool = True) -> None:
        self.expand = expand_abbreviations
        self._expander: Optional[AbbreviationExpander] = None
        self._queries: Dict[Tuple[str, Optional[Tuple[str, ...]]], List[Query]] = {}
        self._kbs: Dict[str, KnowledgeBase] = {}
        self._dictionaries: Dict[Tuple[str, Tuple[str, ...], Optional[Tuple[str, ...]]], KnowledgeBase] = {}

    def queries(self, path: PathLike, types: Optional[Sequence[str]] = None) -> List[Query]:
        key = (str(Path(path).resolve()), tuple(types) if types else None)
        if key not in self._queries:
            if self.expand and self._expander is None:
                self._expander = AbbreviationExpander()
            self._queries[key] = load_queries(path, types, expand=self.expand, expander=self._expander)
        return self._queries[key]

    def kb(self, path: PathLike) -> KnowledgeBase:
        key = str(Path(path).resolve())
        if key not in self._kbs:
            started = time.perf_counter()
            self._kbs[key] = KnowledgeBase.from_jsonl(path)
            logger.info("KB %s: %d concepts (%.1f s)", path, len(self._kbs[key]), time.perf_counter() - started)
        return self._kbs[key]

    def eval_set(self, name: str, eval_file: PathLike, train_files: Sequence[PathLike], kb_file: PathLike,
                 types: Optional[Sequence[str]] = None, kb_only: bool = False) -> EvalSet:
        queries = self.queries(eval_file, types)
        train_queries = [q for f in train_files for q in self.queries(f, types)]
        kb = self.kb(kb_file)
        if kb_only:
            dictionary = kb
        else:
            key = (str(Path(kb_file).resolve()), tuple(str(Path(f).resolve()) for f in train_files),
                   tuple(types) if types else None)
            if key not in self._dictionaries:
                self._dictionaries[key] = build_dictionary(kb, train_queries)
            dictionary = self._dictionaries[key]
        files = {"eval": str(eval_file), "train": [str(f) for f in train_files], "kb": str(kb_file),
                 "types": list(types) if types else None}
        return EvalSet(name, "kb" if kb_only else "kb+train", queries, train_queries, kb, dictionary, files)

    def dataset(self, name: str, assets_dir: PathLike, kbs_dir: PathLike, kb_only: bool = False) -> EvalSet:
        spec = DATASETS.get(name)
        if spec is None:
            raise InputError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)} (or give --corpus and --kb)",
                             field="dataset")
        assets = Path(assets_dir)
        eval_file = assets / spec.eval_file
        if not eval_file.is_file():
            raise InputError(f"corpus file for {name} not found (run `spacy project run assets`)", eval_file)
        eval_set = self.eval_set(name, eval_file, [assets / f for f in spec.train_files],
                                 kb_path(kbs_dir, spec.kb), spec.types, kb_only)
        if spec.note:
            eval_set.files["note"] = spec.note
        return eval_set


# -- scoring ------------------------------------------------------------------------------
def concept_ids(dictionary: KnowledgeBase, concept_id: str) -> Tuple[str, ...]:
    """Every ID a predicted concept carries (its ``|``-joined equivalents)."""
    concept = dictionary.get(concept_id)
    return concept.ids if concept is not None else tuple(concept_id.split("|"))


def query_hits(query: Query, ranked_parts: Sequence[Sequence[str]], dictionary: KnowledgeBase,
               ks: Sequence[int] = KS) -> Dict[int, bool]:
    """For each k: is every part's gold among its top-k concepts?"""
    gold = set(query.gold)
    hits = {}
    for k in ks:
        hits[k] = all(any(gold.intersection(concept_ids(dictionary, cid)) for cid in ranked[:k])
                      for ranked in ranked_parts)
    return hits


def score_queries(system: LinkingSystem, eval_set: EvalSet, ks: Sequence[int] = KS) -> List[Dict[str, Any]]:
    """Rank every distinct query string once; per query, its hits and its top concepts."""
    system.prepare(eval_set.dictionary)
    strings = list(dict.fromkeys(p for q in eval_set.queries for p in q.parts))
    ranked = dict(zip(strings, system.rank(strings, max(ks))))
    rows = []
    for query in eval_set.queries:
        parts_ranked = [ranked[p] for p in query.parts]
        rows.append({"query": query, "hits": query_hits(query, parts_ranked, eval_set.dictionary, ks),
                     "ranked": parts_ranked})
    return rows


# -- sub-populations ----------------------------------------------------------------------
def _canonical(kb: KnowledgeBase, gid: str) -> str:
    concept = kb.resolve(gid)
    return concept.concept_id if concept is not None else gid


def subpopulations(eval_set: EvalSet) -> Dict[str, List[bool]]:
    """Membership masks (one bool per query) of GenBioEL's analysis groups and a few more."""
    kb = eval_set.kb
    queries = eval_set.queries
    train_parts: Set[str] = {p for q in eval_set.train_queries for p in q.parts}
    train_concepts: Set[str] = {_canonical(kb, g) for q in eval_set.train_queries for g in q.gold}
    frequency = Counter(_canonical(kb, g) for q in queries for g in q.gold)
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
        "unseen concept": lambda q: any(_canonical(kb, g) not in train_concepts for g in q.gold),
        "not a KB synonym": lambda q: not is_synonym(q),
        f"top-{TOP_CONCEPTS} concepts": lambda q: all(_canonical(kb, g) in top for g in q.gold),
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
