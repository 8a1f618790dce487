"""What bf16 compute costs in accuracy and gains in speed: KB-only Acc@1 with float32 and bf16.

The linker's default CPU precision (``auto``) is bf16 autocast where the CPU has AMX or
AVX512-BF16. This script measures, for one model, the KB-only Acc@1 (the evaluation's
protocol: normalised, abbreviation-expanded queries; composite mentions need every part
right) with

- float32 names and float32 queries (the evaluation table's setting),
- bf16 names and bf16 queries (an index a user builds with the default precision),
- float32 names and bf16 queries (the shipped index, built in float32, queried in bf16),

and the encoding speed (names/s) of each precision over the KB's names. Exact search (FAISS
flat inner product), top-1 name → its concept. Prints a table and writes JSON.

    python benchmarks/precision_accuracy.py --model sapbert-default -d ncbi-dev -d ncbi-test \\
        -d bc5cdr-disease-dev -d bc5cdr-chemical-dev --output metrics/benchmarks/precision-default.json
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_sapbert.encoding.encoder import Encoder, cpu_has_native_bf16  # noqa: E402
from spacy_sapbert.kb.knowledge_base import KnowledgeBase  # noqa: E402
from spacy_sapbert.training.evaluation.accuracy import query_hits  # noqa: E402
from spacy_sapbert.training.evaluation.datasets import EvalSet, Loader  # noqa: E402

logger = logging.getLogger("benchmark")
SETTINGS = (("float32", "float32"), ("bfloat16", "bfloat16"), ("float32", "bfloat16"))  # (names, queries)


def top1(names: np.ndarray, queries: np.ndarray) -> np.ndarray:
    import faiss

    index = faiss.IndexFlatIP(names.shape[1])
    index.add(np.ascontiguousarray(names, dtype=np.float32))
    _, rows = index.search(np.ascontiguousarray(queries, dtype=np.float32), 1)
    return rows[:, 0]


def timed_encode(encoder: Encoder, texts: List[str]) -> Tuple[np.ndarray, float]:
    start = time.perf_counter()
    vectors = encoder.encode(texts, show_progress=True)
    return vectors, time.perf_counter() - start


def name_table(dictionary: KnowledgeBase) -> Tuple[List[str], List[List[str]]]:
    """Distinct normalised names and, per name, its concepts in dictionary order (the KB's alias table)."""
    table = [(name, cids) for name, cids in dictionary.alias_to_concepts.items() if name]
    return [name for name, _ in table], [cids for _, cids in table]


def label(setting: Tuple[str, str]) -> str:
    return "acc@1 names %s / queries %s" % setting


def measure_kb(group: Sequence[EvalSet], encoders: Dict[str, Encoder]) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """One dictionary's encoding speed per precision, and each dataset's Acc@1 in each setting."""
    dictionary = group[0].dictionary
    names, name_concepts = name_table(dictionary)
    strings = list(dict.fromkeys(p for s in group for q in s.queries for p in q.parts))
    name_vectors, query_vectors, speed = {}, {}, {}
    for precision, encoder in encoders.items():
        name_vectors[precision], seconds = timed_encode(encoder, names)
        speed[precision] = round(len(names) / seconds, 1)
        query_vectors[precision], _ = timed_encode(encoder, strings)
    logger.info("%s: %d names; names/s %s", dictionary.name, len(names), speed)
    predicted = {}
    for name_p, query_p in SETTINGS:
        rows = top1(name_vectors[name_p], query_vectors[query_p])
        predicted[(name_p, query_p)] = {s: name_concepts[r][0] for s, r in zip(strings, rows)}
    datasets = []
    for eval_set in group:
        row: Dict[str, Any] = {"dataset": eval_set.name, "kb": dictionary.name, "queries": len(eval_set.queries)}
        for setting, chosen in predicted.items():
            hits = [query_hits(q, [[chosen[p]] for p in q.parts], eval_set.dictionary, ks=(1,))[1]
                    for q in eval_set.queries]
            row[label(setting)] = round(100 * sum(hits) / len(hits), 2)
        datasets.append(row)
        logger.info("%s", json.dumps(row))
    return {"names": len(names), "names_per_s": speed}, datasets


def print_table(result: Dict[str, Any]) -> None:
    """The Acc@1 of each setting per dataset (adding each row's largest change), then the encoding speeds."""
    labels = [label(s) for s in SETTINGS]
    print(f"\nmodel {result['model']}; {result['cpus']} CPUs; native bf16: {result['cpu_native_bf16']}")
    print(f"{'dataset':<22} {'n':>5} {'fp32/fp32':>10} {'bf16/bf16':>10} {'fp32/bf16':>10} {'max |delta|':>11}")
    for row in result["datasets"]:
        values = [row[name] for name in labels]
        delta = max(abs(v - values[0]) for v in values[1:])
        row["max_abs_delta"] = round(delta, 2)
        print(f"{row['dataset']:<22} {row['queries']:>5} " + " ".join(f"{v:>10.2f}" for v in values) + f" {delta:>11.2f}")
    for kb, info in result["kbs"].items():
        print(f"encoding {kb} ({info['names']:,} names): " +
              ", ".join(f"{p} {v:,.0f} names/s" for p, v in info["names_per_s"].items()))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="sapbert-default")
    parser.add_argument("-d", "--dataset", action="append", required=True)
    parser.add_argument("--assets", type=Path, default=Path("assets"))
    parser.add_argument("--kbs", type=Path, default=Path("kbs"))
    parser.add_argument("--output", type=Path)
    parser.add_argument("--emulated-bf16", action="store_true",
                        help="Measure even where the CPU has no native bf16 (emulated: hours for a KB's names)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not cpu_has_native_bf16() and not args.emulated_bf16:
        # there `precision: auto` computes in float32, so bf16's cost is no question the linker asks
        print("this CPU has no native bf16 (AMX / AVX512-BF16): the linker computes in float32 here, and emulated "
              "bf16 would take hours; nothing measured" +
              (f", {args.output} left as it is" if args.output else "") + " (--emulated-bf16 measures anyway)")
        return

    loader = Loader()
    sets = [loader.dataset(name, args.assets, args.kbs, kb_only=True) for name in args.dataset]
    encoders = {p: Encoder(args.model, device="cpu", dtype=p) for p in ("float32", "bfloat16")}
    result: Dict[str, Any] = {"model": args.model, "cpus": len(os.sched_getaffinity(0)),
                              "cpu_native_bf16": cpu_has_native_bf16(), "kbs": {}, "datasets": []}
    by_kb: Dict[str, List[EvalSet]] = {}
    for eval_set in sets:
        by_kb.setdefault(eval_set.dictionary.fingerprint(), []).append(eval_set)
    for group in by_kb.values():
        result["kbs"][group[0].dictionary.name], rows = measure_kb(group, encoders)
        result["datasets"].extend(rows)
    print_table(result)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
