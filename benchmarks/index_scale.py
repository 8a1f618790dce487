"""Index kinds at scale: memory, search latency and recall@1 against exact search.

Real name vectors (a saved flat NameIndex, e.g. the default encoder over mesh-medic) are
replicated with small Gaussian noise and renormalised up to each size (10^5, 10^6, …), so
the collection keeps the clustered shape of real KB names; queries are held-out real
vectors with noise. Ground truth is exact inner-product search, done in chunks so that
sizes whose flat index would not fit in memory can still be scored. For each size and
kind: bytes per name of the index, build seconds, median milliseconds per query (single
thread, batches of 64), recall@1 (the exact nearest row is the approximate top 1; ties
count) and recall@1 within the top 10.

    python benchmarks/index_scale.py --vectors-from models/demo/index-default-flat \\
        --sizes 100000 1000000 --kinds flat hnsw ivfpq pq --output metrics/benchmarks/index-scale.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_sapbert.index import NameIndex, _make_faiss_index  # noqa: E402


def synthetic(base: np.ndarray, n: int, seed: int, noise: float, chunk: int = 500_000) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        rows = base[rng.integers(0, len(base), size)]
        rows = rows + rng.normal(0, noise, rows.shape).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        yield rows.astype(np.float32)


def row_vector(chunks: List[np.ndarray], row: int) -> np.ndarray:
    size = len(chunks[0])
    return chunks[row // size][row % size]


def exact_top1(queries: np.ndarray, chunks: List[np.ndarray]) -> np.ndarray:
    best = np.full(len(queries), -np.inf, dtype=np.float32)
    for chunk in chunks:
        best = np.maximum(best, (queries @ chunk.T).max(axis=1))
    return best


def main() -> None:
    import faiss

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors-from", required=True, type=Path, help="a saved flat NameIndex folder")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--kinds", nargs="+", default=["flat", "hnsw", "ivfpq", "pq"])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    faiss.omp_set_num_threads(args.threads)
    base_index = NameIndex.load(args.vectors_from)
    base = np.ascontiguousarray(base_index.vectors(), dtype=np.float32)
    rng = np.random.default_rng(0)
    held = rng.choice(len(base), args.queries, replace=False)
    queries = base[held] + rng.normal(0, args.noise, (args.queries, base.shape[1])).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    results: List[Dict[str, Any]] = []
    for n in args.sizes:
        chunks = list(synthetic(base, n, seed=n, noise=args.noise))
        truth = exact_top1(queries, chunks)
        for kind in args.kinds:
            if kind in ("flat", "hnsw") and n * base.shape[1] * 4 > 8e9:
                results.append({"names": n, "kind": kind, "skipped": "float32 vectors alone exceed 8 GB"})
                continue
            start = time.perf_counter()
            sample = chunks[0][: min(len(chunks[0]), 256 * 1000)]
            index, params = _make_faiss_index(kind, base.shape[1], sample, {})
            for chunk in chunks:
                index.add(chunk)
            build = time.perf_counter() - start
            if kind == "hnsw":
                index.hnsw.efSearch = params["ef_search"]
            elif kind == "ivfpq":
                faiss.extract_index_ivf(index).nprobe = params["nprobe"]
            size = len(faiss.serialize_index(index))
            timings = []
            rows_found = []
            for s in range(0, len(queries), 64):
                t = time.perf_counter()
                _, rows = index.search(queries[s:s + 64], 10)
                timings.append((time.perf_counter() - t) * 1000 / len(queries[s:s + 64]))
                rows_found.append(rows)
            rows = np.vstack(rows_found)
            # PQ scores are approximate: score each returned row exactly and compare with the true
            # best (ties count as found)
            exact_scores = np.array([[queries[i] @ row_vector(chunks, r) if r >= 0 else -np.inf for r in rows[i]]
                                     for i in range(len(queries))], dtype=np.float32)
            hits = np.isclose(exact_scores, truth[:, None], atol=1e-5)
            recall1 = float(hits[:, 0].mean())
            in10 = float(hits.any(axis=1).mean())
            row = {"names": n, "kind": kind, "params": params, "bytes_per_name": round(size / n, 1),
                   "index_mb": round(size / 1e6, 1), "build_s": round(build, 1),
                   "ms_per_query": round(statistics.median(timings), 3), "recall_at_1": round(recall1, 4),
                   "recall_at_1_in_top10": round(in10, 4)}
            results.append(row)
            print(json.dumps(row), flush=True)
            del index
        del chunks
    print(f"\n{'names':>10} {'kind':<6} {'B/name':>7} {'MB':>8} {'build s':>8} {'ms/query':>9} {'R@1':>6} {'R@1∈10':>7}")
    for r in results:
        if "skipped" in r:
            print(f"{r['names']:>10} {r['kind']:<6} skipped: {r['skipped']}")
            continue
        print(f"{r['names']:>10} {r['kind']:<6} {r['bytes_per_name']:>7} {r['index_mb']:>8} {r['build_s']:>8} "
              f"{r['ms_per_query']:>9} {r['recall_at_1']:>6} {r['recall_at_1_in_top10']:>7}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"noise": args.noise, "queries": args.queries, "threads": args.threads,
                                           "results": results}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
