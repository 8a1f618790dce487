"""Re-ranker data: BioSyn queries in their abstracts, with the dense first stage's candidates, built once.

**Reading.** A BioSyn ``processed_<split>/<PMID>.concept`` line is ``PMID||start|end||type||
mention||CUI``; the abstract is ``<split>/<PMID>.txt``, title, blank line, abstract. The offsets
index PubTator's text, *title + one space + abstract*: on the ``.txt`` as written (two newlines
after the title) they are right in the title and one character early in the abstract. Measured
on NCBI-disease and BC5CDR-disease train/dev/test, every span falls on word boundaries of
title + " " + abstract, except two NCBI-train spans that end one character inside a word
(``disorde``, ``complemen``: the corpus's own annotations), which the context window
widens to the whole word. The mention text is BioSyn's normalised form (lower case,
punctuation removed, abbreviations expanded), which is what the first stage searches and what
the re-ranker sees between its markers.

**Items.** Each ``|``/``+``-separated sub-mention of a query is an item (SapBERT's rule); an
item's ``gold`` is the ID at its position when a composite has as many IDs as parts, all the
query's IDs otherwise; ``query_gold`` (all of them) is what evaluation counts as right.

**Candidates.** The first stage encodes every dictionary name and every item's mention
(cosine, exact search: :func:`spacy_sapbert.training.evaluation.biosyn.top_candidates`), takes
the best names and keeps the first ``store_k`` distinct concepts (a dictionary CUI, ``|``-joined
IDs included), each with its best-matching name and score: the Linker's rule (a concept scores
as its best name). For each gold concept the best-matching of its names is stored too, so that
training can put the gold in when the first stage missed it. The file records the first stage
(model, fingerprint) and the dictionary (path, hash), and each concept's canonical name (the
dictionary's first name for that CUI).
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from spacy_sapbert.util.atomic import atomic_write_text
from spacy_sapbert.formats.biosyn import id_list, query_span, read_dictionary, read_queries, split_mention
from spacy_sapbert.kb.matching import is_gold
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.jsonfile import read_json_object


logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
FORMAT_VERSION = 1
FORMAT = "sapbert-rerank-candidates"
Candidate = Tuple[str, str, float]
"""(dictionary CUI, best-matching name, first-stage cosine)."""


@dataclass
class Item:
    """One (sub-)mention with its first-stage candidates (best first)."""

    query: int
    doc: str
    start: int
    end: int
    mention: str
    gold: List[str]
    query_gold: List[str]
    candidates: List[Candidate]
    gold_candidates: List[Candidate]
    source: str


def read_split(folder: PathLike, first_query: int = 0) -> Tuple[Dict[str, str], List[Item]]:
    """(documents, items without candidates) of one ``processed_<split>`` folder."""
    folder = Path(folder)
    texts = folder.parent / folder.name.replace("processed_", "", 1)
    dataset = folder.parent.name
    docs: Dict[str, str] = {}
    items: List[Item] = []
    for query, q in enumerate(read_queries(folder), first_query):
        key = f"{dataset}/{q.document}"
        start, end = query_span(q)
        if key not in docs:
            raw_path = texts / f"{q.document}.txt"
            if not raw_path.is_file():
                raise InputError(f"no abstract {raw_path.name} for the context of {q.where}", raw_path)
            title, _, abstract = raw_path.read_text(encoding="utf-8").partition("\n\n")
            docs[key] = f"{title} {abstract.rstrip()}" if abstract else title.rstrip()
        text = docs[key]
        if not 0 <= start <= end <= len(text):
            raise InputError(f"span {start}-{end} outside the abstract ({len(text)} characters)", *q.file_and_line,
                             "span")
        parts = [part.strip() for part in split_mention(q.mention)]
        query_gold = id_list(q.cui)
        aligned = len(parts) > 1 and len(parts) == len(query_gold)
        for i, part in enumerate(parts):
            items.append(Item(query, key, start, end, part, [query_gold[i]] if aligned else list(query_gold),
                              list(query_gold), [], [], q.where))
    return docs, items


def group_by_concept(rows: Sequence[int], scores: Sequence[float], names: Sequence[str], cuis: Sequence[str],
                     limit: int) -> List[Candidate]:
    """Best name per concept, in score order, at most ``limit`` concepts."""
    out: Dict[str, Candidate] = {}
    for row, score in zip(rows, scores):
        if cuis[row] not in out:
            out[cuis[row]] = (cuis[row], names[row], round(float(score), 5))
            if len(out) == limit:
                break
    return list(out.values())


def build(folders: Sequence[PathLike], dictionary: PathLike, encoder: Any, store_k: int = 16,
          names_per_concept: int = 8) -> Dict[str, Any]:
    """The data of ``folders`` (BioSyn ``processed_<split>`` folders) against ``dictionary`` with the
    first stage ``encoder`` (an :class:`~spacy_sapbert.encoding.encoder.Encoder`)."""
    from ..evaluation.biosyn import top_candidates

    docs: Dict[str, str] = {}
    items: List[Item] = []
    for folder in folders:
        more_docs, more = read_split(folder, first_query=items[-1].query + 1 if items else 0)
        docs.update(more_docs)
        items.extend(more)
    names, cuis = read_dictionary(dictionary)
    logger.info("%d items from %d documents; encoding %d dictionary names", len(items), len(docs), len(names))
    name_vectors = encoder.encode(names, show_progress=True)
    mentions = list(dict.fromkeys(item.mention for item in items))
    vectors = encoder.encode(mentions, show_progress=True)
    best = top_candidates(vectors, name_vectors, min(len(names), store_k * names_per_concept))
    rows_of_id: Dict[str, List[int]] = {}
    for row, cui in enumerate(cuis):
        for one in id_list(cui):
            rows_of_id.setdefault(one, []).append(row)
    by_mention = {m: i for i, m in enumerate(mentions)}
    for item in items:
        i = by_mention[item.mention]
        item.candidates = group_by_concept(best[i], vectors[i] @ name_vectors[best[i]].T, names, cuis, store_k)
        rows = sorted({r for one in item.gold for r in rows_of_id.get(one, [])})
        scores = name_vectors[rows] @ vectors[i] if rows else np.zeros(0)
        order = np.argsort(-scores, kind="stable")
        item.gold_candidates = group_by_concept([rows[j] for j in order], scores[order], names, cuis, 3)
    canonical: Dict[str, str] = {}
    for cui, name in zip(cuis, names):
        canonical.setdefault(cui, name)
    used = {c[0] for item in items for c in item.candidates + item.gold_candidates}
    digest = hashlib.sha256(Path(dictionary).read_bytes()).hexdigest()[:16]
    stats = coverage(items, [1, 2, 4, 8, store_k])
    logger.info("first stage on these items: %s", json.dumps(stats))
    return {"format": FORMAT, "format_version": FORMAT_VERSION,
            "first_stage": {"model": encoder.source, "fingerprint": encoder.fingerprint, "pooling": encoder.pooling,
                            "max_length": encoder.max_length, "scoring": "cosine"},
            "dictionary": {"path": str(dictionary), "sha256": digest, "names": len(names)},
            "folders": [str(f) for f in folders], "store_k": store_k, "stats": stats, "documents": docs,
            "canonical": {c: canonical[c] for c in sorted(used)},
            "items": [_item_json(item) for item in items]}


def coverage(items: Sequence[Item], ks: Sequence[int]) -> Dict[str, Any]:
    """Share of items whose gold is among the first-stage top k (per k), and items whose gold is not in
    the dictionary at all."""
    ranks = [next((r for r, c in enumerate(item.candidates) if is_gold(c[0], item.gold, None)), None) for item in items]
    n = max(len(items), 1)
    return {"items": len(items), **{f"gold_in_top{k}": round(100 * sum(r is not None and r < k for r in ranks) / n, 2)
                                    for k in ks},
            "gold_not_in_dictionary": sum(not item.gold_candidates for item in items)}


def _item_json(item: Item) -> Dict[str, Any]:
    return {"query": item.query, "doc": item.doc, "start": item.start, "end": item.end, "mention": item.mention,
            "gold": item.gold, "query_gold": item.query_gold, "candidates": [list(c) for c in item.candidates],
            "gold_candidates": [list(c) for c in item.gold_candidates], "source": item.source}


def write(data: Dict[str, Any], path: PathLike) -> Path:
    return atomic_write_text(path, json.dumps(data, ensure_ascii=False, separators=(",", ":")))


@dataclass
class RerankData:
    """A data file as read back: documents, canonical names and items."""

    path: Path
    header: Dict[str, Any]
    documents: Dict[str, str]
    canonical: Dict[str, str]
    items: List[Item]
    fingerprint: str

    @classmethod
    def read(cls, path: PathLike) -> "RerankData":
        from ..common.fingerprint import file_fingerprint

        path = Path(path)
        data = read_json_object(path, FORMAT_VERSION, "re-ranker data")
        if data.get("format") != FORMAT:
            raise InputError(f"not a re-ranker data file (format {data.get('format')!r})", path)
        items = [Item(d["query"], d["doc"], d["start"], d["end"], d["mention"], d["gold"], d["query_gold"],
                      [tuple(c) for c in d["candidates"]], [tuple(c) for c in d["gold_candidates"]], d["source"])
                 for d in data.pop("items")]
        documents, canonical = data.pop("documents"), data.pop("canonical")
        return cls(path, data, documents, canonical, items, file_fingerprint(path))

    def context(self, item: Item) -> Tuple[str, int, int, str]:
        return (self.documents[item.doc], item.start, item.end, item.mention)

    def texts(self, candidates: Sequence[Candidate], separator: str) -> List[str]:
        from spacy_sapbert.linking.rerank.inputs import candidate_text

        return [candidate_text(name, self.canonical.get(cui, name), separator) for cui, name, _ in candidates]


@dataclass
class Example:
    """A training mention: its context, k candidates, which of them are right, and how hard it was."""

    context: Tuple[str, int, int, str]
    candidates: List[str]
    positive: List[bool]
    first_stage: List[float]
    """Each candidate's first-stage cosine."""
    inserted: bool
    first_stage_right: bool
    margin: float


def training_examples(datasets: Sequence[RerankData], k: int, separator: str, max_items: int = 0,
                      ) -> Tuple[List[Example], Dict[str, int]]:
    """Deduplicated training examples of ``k`` candidates each, the gold always among them.

    Identical (abstract text, span, mention, gold) items count once. When the first stage's top k
    miss the gold, the gold's best-matching name takes the k-th place; items whose gold concept is
    not in the dictionary are dropped. With ``max_items``, the hard ones come first: those the first
    stage gets wrong (by the first-stage score of the gold, lowest first), then those it gets right
    by the smallest margin over the best wrong candidate."""
    seen = set()
    examples: List[Example] = []
    stats = {"items": 0, "duplicates": 0, "gold_not_in_dictionary": 0, "gold_inserted": 0, "first_stage_wrong": 0}
    for data in datasets:
        for item in data.items:
            stats["items"] += 1
            key = (data.documents[item.doc], item.start, item.end, item.mention, tuple(sorted(item.gold)))
            if key in seen:
                stats["duplicates"] += 1
                continue
            seen.add(key)
            chosen = list(item.candidates[:k])
            positive = [is_gold(c[0], item.gold, None) for c in chosen]
            inserted = not any(positive)
            if inserted:
                if not item.gold_candidates:
                    stats["gold_not_in_dictionary"] += 1
                    continue
                chosen = chosen[:k - 1] + [item.gold_candidates[0]] if len(chosen) >= k else \
                    chosen + [item.gold_candidates[0]]
                positive = [is_gold(c[0], item.gold, None) for c in chosen]
                stats["gold_inserted"] += 1
            right = positive[0]
            stats["first_stage_wrong"] += not right
            gold_score = max(c[2] for c, p in zip(chosen, positive) if p)
            wrong_score = max([c[2] for c, p in zip(chosen, positive) if not p], default=-1.0)
            examples.append(Example(data.context(item), data.texts(chosen, separator), positive,
                                    [float(c[2]) for c in chosen], inserted, right, gold_score - wrong_score))
    stats["examples"] = len(examples)
    if max_items and len(examples) > max_items:
        # stable: equally hard items keep file order
        order = sorted(range(len(examples)), key=lambda i: (examples[i].first_stage_right, examples[i].margin))
        examples = [examples[i] for i in order[:max_items]]
        stats["selected"] = len(examples)
        stats["selected_first_stage_wrong"] = sum(not e.first_stage_right for e in examples)
    return examples, stats


@dataclass
class EvalRows:
    """The first stage's top k of every item, nothing inserted: what evaluation and calibration score."""

    contexts: List[Tuple[str, int, int, str]]
    texts: List[List[str]]
    right: List[List[bool]]
    """Which candidates are right (the query's gold)."""
    first_stage: List[List[float]]
    queries: List[int]


def eval_rows(data: RerankData, k: int, separator: str) -> EvalRows:
    rows = EvalRows([], [], [], [], [])
    for item in data.items:
        chosen = item.candidates[:k]
        rows.contexts.append(data.context(item))
        rows.texts.append(data.texts(chosen, separator))
        rows.right.append([is_gold(c[0], item.query_gold, None) for c in chosen])
        rows.first_stage.append([float(c[2]) for c in chosen])
        rows.queries.append(item.query)
    return rows
