"""Accuracy against throughput of five linkers on BioSyn-format data, in one run on one machine.

Why one run: accuracy and speed measured apart cannot say what a point of Acc@1 costs, and speeds
taken on other machines or days do not compare. So each system makes one timed pass over the same
sub-mentions, and the answers of that very pass are scored:

- ``scispacy``: scispaCy's candidate generator over the same dictionary, the baseline (the
  ``sapbert evaluate -m scispacy`` system, :class:`~.evaluation.baselines.ScispacyCandidates`);
- ``dense``: the bi-encoder, exact cosine search (``sapbert evaluate-biosyn``'s ``cosine``);
- ``hybrid``: dense + character n-gram TF-IDF, through ``evaluate-biosyn --sparse-weight``'s code
  path (:func:`~.evaluation.biosyn.score_vectors`);
- ``rerank-always``: the dense top ``k`` concepts of each sub-mention (best name per concept, as
  ``training/rerank/data.py`` builds them, here live) re-ordered by the cross-encoder, reading the
  mention in title + " " + abstract (``read_split``); ``rerank-adaptive``: only the sub-mentions
  :func:`~spacy_sapbert.linking.rerank.stage.needs_rerank` picks (best two cosines closer than ``--max-gap``),
  through the pipe's own second stage, :class:`~spacy_sapbert.linking.rerank.stage.ContextReranking`.

Scoring is SapBERT's, as :mod:`~.evaluation.biosyn` implements it: every query line counts, a
mention is split on ``|``/``+`` and each sub-mention searched alone, a candidate is right when its
``|``-split CUIs meet the gold CUIs, a query when all its sub-mentions are. Timing: after one
untimed encoding of the sub-mentions (warm-up), the wall time of one pass per system (no repeats)
over every sub-mention (none de-duplicated, no cache), encoding them included; dictionary-side
work (encoding the names, fitting the n-gram index, building scispaCy's index) is timed apart.

    python benchmarks/accuracy_throughput.py --queries assets/biosyn-protocol/ncbi-disease/processed_test \\
        --dictionary assets/biosyn-protocol/ncbi-disease/test_dictionary.txt --model sapbert-default \\
        --reranker models/reranker-prior --device cpu --output metrics/benchmarks/accuracy-throughput-ncbi-test.json
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import logging
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_sapbert.formats import biosyn as biosyn_format  # noqa: E402
from spacy_sapbert.index.char_ngrams import CharNgramIndex, CharNgramSettings  # noqa: E402
from spacy_sapbert.linking.rerank.stage import ContextReranking  # noqa: E402
from spacy_sapbert.errors import InputError, exit_on_input_error  # noqa: E402
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase  # noqa: E402
from spacy_sapbert.linking.rerank.inputs import MentionContext  # noqa: E402
from spacy_sapbert.training.evaluation import biosyn  # noqa: E402
from spacy_sapbert.training.evaluation.baselines import ScispacyCandidates  # noqa: E402
from spacy_sapbert.training.rerank.data import RerankData, group_by_concept, read_split  # noqa: E402

logger = logging.getLogger("benchmark")
K = 5
FIRST_STAGE_NAMES = 16 * 8  # names grouped into the re-ranker's concepts: data.build's store_k × names_per_concept
TIMED = {"scispacy": "ScispacyCandidates.rank (TF-IDF vectors, nmslib HNSW, 30 neighbours)",
         "dense": "encoding + exact cosine search of the top 5 names",
         "hybrid": "encoding + score_vectors' hybrid pass (n-gram search, union with the dense top --candidates, "
                   "fusion), with the dictionary-side work it redoes per call (name -> row maps, normalising the "
                   "name vectors: see indexing.unit_name_vectors_s) and its scoring; the n-gram index fitted before",
         "rerank": "encoding + exact cosine search + best name per concept + the cross-encoder where sent"}


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def concept_accuracy(queries: Sequence[biosyn_format.BiosynQuery], ranked: Sequence[Sequence[str]], k: int = K
                     ) -> Dict[str, float]:
    """Acc@1..k of dictionary CUIs ranked per sub-mention (in ``sub_mentions`` order), by score_vectors' rules."""
    parts = biosyn_format.sub_mentions(queries)
    gold = [biosyn_format.gold_ids(q.cui) for q, p in zip(queries, parts) for _ in p]
    ids = list(dict.fromkeys(c for row in ranked for c in row))
    where = {c: i for i, c in enumerate(ids)}
    rows = np.full((len(ranked), k), -1, dtype=np.int64)
    for i, row in enumerate(ranked):
        rows[i, :len(row[:k])] = [where[c] for c in row[:k]]
    right = biosyn.right_candidates(rows, gold, [biosyn_format.dictionary_ids(c) for c in ids])
    return biosyn.rates(biosyn.query_ranks(right, parts), "acc", range(1, k + 1))


def fitted(index: CharNgramIndex) -> Any:
    """score_vectors fits its n-gram index on every call: hand it the one fitted (and timed) with the dictionary,
    so that only its query pass is timed (a patch, as baselines.py patches scispaCy's index builder)."""
    def fit(names: Sequence[str], settings: Optional[CharNgramSettings] = None) -> CharNgramIndex:
        if settings != index.settings or list(names) != index.names:
            raise RuntimeError("score_vectors asked for an n-gram index other than the one fitted")
        return index

    return mock.patch.object(biosyn.CharNgramIndex, "fit", fit)


def reranked_pass(reranker: Any, encoder: Any, data: RerankData, unit_names: np.ndarray, names: List[str],
                  cuis: List[str], max_gap: Optional[float]) -> Tuple[List[List[str]], int]:
    """The live dense top k of every item, then the pipe's own second stage
    (:meth:`~spacy_sapbert.linking.rerank.stage.ContextReranking.apply`, adaptive with ``max_gap``):
    (CUIs best first per item, items re-ranked). Fills ``item.candidates`` as data.build does."""
    k = int(reranker.settings.k)
    vectors = biosyn.unit_rows(encoder.encode([item.mention for item in data.items], normalize=False))
    best = biosyn.top_candidates(vectors, unit_names, max(FIRST_STAGE_NAMES, 8 * k))
    for i, item in enumerate(data.items):
        item.candidates = group_by_concept(best[i], unit_names[best[i]] @ vectors[i], names, cuis, k)
    stage = ContextReranking(reranker, lambda cui: data.canonical.get(cui, ""), max_gap)
    ranked = stage.apply([MentionContext(*data.context(item)) for item in data.items],
                         [[(cui, score, name) for cui, name, score in item.candidates] for item in data.items])
    return [[cui for cui, _ in found.candidates] for found in ranked], stage.reranked


def entry(system: str, label: str, accuracy: Dict[str, float], seconds: float, mentions: int,
          **extra: Any) -> Dict[str, Any]:
    logger.info("%s: acc@1 %.2f, %.1f s", label, accuracy["acc@1"], seconds)
    return {"system": system, "label": label, "acc@1": accuracy["acc@1"], "acc@5": accuracy.get(f"acc@{K}"),
            "seconds": round(seconds, 3), "mentions_per_s": round(mentions / max(seconds, 1e-9), 1),
            "timed": TIMED[system.split("-")[0]], **extra}


def load_reranking(args: argparse.Namespace, queries: Sequence[biosyn_format.BiosynQuery], flat: List[str],
                   by_cui: Dict[str, List[str]]) -> Tuple[Any, Optional[RerankData]]:
    """The re-ranker and the mentions in their abstracts, or (None, None) without ``--reranker``."""
    if args.reranker is None:
        logger.info("no --reranker: the dense + re-ranker systems are skipped")
        return None, None
    from spacy_sapbert.linking.rerank.model import Reranker

    reranker = Reranker.load(args.reranker, device=args.device, dtype=args.precision)
    documents, items = read_split(args.queries)
    items = [item for item in items if item.query < len(queries)]
    if [item.mention for item in items] != [p.strip() for p in flat]:
        raise InputError("the sub-mentions read with the abstracts are not the queries'", args.queries)
    canonical = {cui: found[0] for cui, found in by_cui.items()}  # the dictionary's first name, as data.build
    return reranker, RerankData(args.queries, {"first_stage": "live"}, documents, canonical, items, "")


def scispacy_row(queries: Sequence[biosyn_format.BiosynQuery], flat: List[str], by_cui: Dict[str, List[str]],
                 indexing: Dict[str, float]) -> Optional[Dict[str, Any]]:
    """The baseline's row (its index building timed into ``indexing``), or None without scispaCy."""
    baseline, concepts = ScispacyCandidates(), list(by_cui)  # KB IDs c<n>: some CUIs are none ("D008661| D008661")
    kb = KnowledgeBase((Concept(f"c{n}", found[0], found[1:]) for n, found in enumerate(by_cui.values())))
    try:
        importlib.import_module("scispacy.candidate_generation")  # imported untimed: its import is no searching
    except ImportError as err:
        logger.warning("scispaCy is not installed (%s): its baseline is skipped", err)
        return None
    _, indexing["scispacy_index_s"] = timed(baseline.prepare, kb)
    ranked, seconds = timed(baseline.rank, flat, K)
    ranked = [[concepts[int(cid[1:])] for cid in row] for row in ranked]
    return entry("scispacy", "scispaCy", concept_accuracy(queries, ranked), seconds, len(flat))


def rerank_rows(args: argparse.Namespace, reranker: Any, encoder: Any, data: RerankData,
                queries: Sequence[biosyn_format.BiosynQuery], flat: List[str], unit_names: np.ndarray,
                names: List[str], cuis: List[str]) -> List[Dict[str, Any]]:
    """The re-ranker's two rows: every sub-mention re-ranked, and only those ``--max-gap`` picks."""
    rows, k = [], int(reranker.settings.k)
    for system, gap in (("rerank-always", None), ("rerank-adaptive", args.max_gap)):
        (ranked, reranked), seconds = timed(reranked_pass, reranker, encoder, data, unit_names, names, cuis, gap)
        label = "dense + re-ranker, " + ("always" if gap is None else f"adaptive (gap < {gap:g})")
        first_stage = [[c[0] for c in item.candidates] for item in data.items]
        rows.append(entry(system, label, concept_accuracy(queries, ranked), seconds, len(flat), k=k,
                          max_gap=gap, reranked=reranked, reranked_share=round(reranked / len(flat), 4),
                          first_stage_acc_at_k=concept_accuracy(queries, first_stage, k)[f"acc@{k}"]))
    return rows


def run(args: argparse.Namespace, command: str) -> Dict[str, Any]:
    import torch

    from spacy_sapbert.encoding.encoder import Encoder

    importlib.import_module("sklearn.feature_extraction.text")  # imported now: its import is no index building
    if args.reranker is not None and not args.reranker.exists():
        raise InputError("re-ranker folder not found (--reranker)", args.reranker)
    if args.threads:
        torch.set_num_threads(args.threads)
    queries = biosyn_format.read_queries(args.queries)[: args.limit or None]
    flat = [p for parts in biosyn_format.sub_mentions(queries) for p in parts]
    names, cuis = biosyn_format.read_dictionary(args.dictionary)
    by_cui: Dict[str, List[str]] = {}
    for cui, name in zip(cuis, names):
        by_cui.setdefault(cui, []).append(name)
    scheme = CharNgramSettings.parse(args.sparse_scheme)
    reranker, data = load_reranking(args, queries, flat, by_cui)
    encoder = Encoder(args.model, device=args.device, dtype=args.precision)
    logger.info("%d queries, %d sub-mentions; %d dictionary names", len(queries), len(flat), len(names))
    indexing: Dict[str, float] = {}
    raw_names, indexing["encode_names_s"] = timed(encoder.encode, names, show_progress=True, normalize=False)
    unit_names, indexing["unit_name_vectors_s"] = timed(biosyn.unit_rows, raw_names)
    sparse, indexing["char_ngrams_fit_s"] = timed(CharNgramIndex.fit, list(dict.fromkeys(names)), scheme)
    encoder.encode(flat, normalize=False)  # warm-up, untimed: torch's first calls on these shapes are nobody's cost
    systems = [row for row in [scispacy_row(queries, flat, by_cui, indexing)] if row is not None]

    def dense() -> np.ndarray:
        raw = encoder.encode(flat, normalize=False)
        biosyn.top_candidates(biosyn.unit_rows(raw), unit_names, K)
        return raw

    def hybrid() -> Dict[str, Any]:
        with fitted(sparse):
            return biosyn.score_vectors(queries, names, cuis, encoder.encode(flat, normalize=False), raw_names,
                                        scorings=(), k=K, sparse_weights=[args.sparse_weight],
                                        sparse_schemes=[scheme], candidates=args.candidates)["hybrid"][0]

    raw, seconds = timed(dense)
    accuracy = biosyn.score_vectors(queries, names, cuis, raw, raw_names, scorings=("cosine",), k=K)["cosine"]
    systems.append(entry("dense", "dense (cosine)", accuracy, seconds, len(flat)))
    accuracy, seconds = timed(hybrid)
    systems.append(entry("hybrid", f"hybrid ({scheme.label()}, w={args.sparse_weight:g})", accuracy, seconds,
                         len(flat), sparse=scheme.label(), sparse_weight=args.sparse_weight,
                         candidates=args.candidates))
    if reranker is not None and data is not None:
        systems += rerank_rows(args, reranker, encoder, data, queries, flat, unit_names, names, cuis)
    base = next((s["mentions_per_s"] for s in systems if s["system"] == "scispacy"), None)
    for system_row in systems:
        system_row["x_scispacy"] = round(system_row["mentions_per_s"] / base, 2) if base else None
    return record(args, command, encoder, reranker, indexing, systems,
                  {"n_queries": len(queries), "sub_mentions": len(flat), "names": len(names), "concepts": len(by_cui)})


def record(args: argparse.Namespace, command: str, encoder: Any, reranker: Any, indexing: Dict[str, float],
           systems: List[Dict[str, Any]], counts: Dict[str, int]) -> Dict[str, Any]:
    """The run's JSON: what ran where, how it was timed, and the rows."""
    import torch

    from spacy_sapbert.encoding.encoder import cpu_has_native_bf16

    return {"command": command, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": {"cpus": len(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(),
                        "python": platform.python_version(), "platform": platform.platform(),
                        "cpu_native_bf16": cpu_has_native_bf16(), "device": encoder.device, "dtype": encoder.dtype},
            "queries": str(args.queries), "n_queries": counts["n_queries"], "sub_mentions": counts["sub_mentions"],
            "dictionary": str(args.dictionary), "names": counts["names"], "concepts": counts["concepts"],
            "model": args.model, "reranker": str(args.reranker) if args.reranker else None,
            "reranker_settings": None if reranker is None else {
                key: getattr(reranker.settings, key) for key in ("k", "temperature", "margin", "first_stage_weight")},
            "timed": "after one untimed encoding of the sub-mentions (warm-up), the wall time of one pass per system "
                     "(no repeats) over every sub-mention, none de-duplicated (the re-ranker's first call is not "
                     "warmed: the 'always' pass pays it); mentions_per_s = sub-mentions / seconds; indexing apart",
            "acc_at_5": "dense and hybrid: top 5 names (SapBERT's rule); scispaCy: top 5 concepts; re-ranker: its "
                        "order of the k concepts (acc@5 = acc@k when k < 5)",
            "indexing": {key: round(value, 3) for key, value in indexing.items()}, "systems": systems}


def table(result: Dict[str, Any]) -> str:
    lines = ["| system | Acc@1 | Acc@5 | mentions/s | × scispaCy | re-ranked share |",
             "|---|---:|---:|---:|---:|---:|"]
    for s in result["systems"]:
        ratio = f"{s['x_scispacy']:.2f}" if s["x_scispacy"] is not None else "–"
        share = f"{100 * s['reranked_share']:.1f}%" if "reranked_share" in s else "–"
        lines.append(f"| {s['label']} | {s['acc@1']:.2f} | {s['acc@5']:.2f} | {s['mentions_per_s']:.1f} | {ratio} "
                     f"| {share} |")
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=Path, required=True, help="A BioSyn processed_<split> folder")
    parser.add_argument("--dictionary", type=Path, required=True, help="Its BioSyn dictionary (CUI||name)")
    parser.add_argument("--model", default="sapbert-default", help="The bi-encoder (folder or name)")
    parser.add_argument("--reranker", type=Path, help="A re-ranker folder (without: no re-ranker systems)")
    parser.add_argument("--max-gap", type=float, default=0.05, help="Adaptive: re-rank below this cosine gap")
    parser.add_argument("--sparse-scheme", default="char_wb:2-3", help="Hybrid n-grams, ANALYZER:MIN-MAX")
    parser.add_argument("--sparse-weight", type=float, default=0.6, help="Hybrid: cosine + W x sparse cosine")
    parser.add_argument("--candidates", type=int, default=biosyn.DEFAULT_CANDIDATES, help="Hybrid: top N of each")
    parser.add_argument("--precision", default="float32", help="Encoder and re-ranker: float32 | bfloat16 | auto ...")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda[:N] (scispaCy runs on CPU)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--limit", type=int, default=0, help="Only the first N queries (0: all)")
    parser.add_argument("--output", type=Path, help="Write the JSON here")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.max_gap + args.sparse_weight) and min(args.max_gap, args.sparse_weight, args.limit) >= 0
            and args.candidates >= 1):
        parser.error("--max-gap and --sparse-weight must be finite and >= 0, --limit >= 0, --candidates >= 1")
    return args


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with exit_on_input_error():
        result = run(args, shlex.join(["python", "benchmarks/accuracy_throughput.py", *argv]))
    if args.output:
        from spacy_sapbert.util.atomic import atomic_write_text

        args.output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.output, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"\n{result['n_queries']} queries ({result['sub_mentions']} sub-mentions), {result['names']} names; "
          f"{result['machine']['cpus']} CPUs, torch threads {result['machine']['torch_threads']}; indexing "
          f"{json.dumps(result['indexing'])}\n\n{table(result)}")
    return result


if __name__ == "__main__":
    main()
