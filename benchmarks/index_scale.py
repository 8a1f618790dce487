"""Index kinds at scale: memory, search latency and recall@1 against exact search.

Real name vectors (a saved flat NameIndex, e.g. the default encoder over MEDIC) are
replicated with small Gaussian noise and renormalised up to each size (10^5, 10^6, 10^7),
so the collection keeps the clustered shape of real KB names; queries are held-out real
vectors with noise. The collection is generated once per size into a float32 file under
``--workdir`` and read back memory-mapped, so a 10^7-name collection (15 GB) never has to
fit in RAM; ground truth is exact inner-product search over it, chunk by chunk.

Kinds: ``flat``, ``hnsw``, ``ivfpq``, ``pq`` as NameIndex builds them, and ``ivfpq+rerank`` /
``pq+rerank``: the same compressed index whose top ``--rerank`` candidates are scored again
exactly against float16 copies of the vectors kept in a memory-mapped file (NameIndex's
``rerank``; a query reads ``rerank × dim × 2`` bytes of it). For each size and kind: bytes per
name of the index (what it holds in RAM), MB of the re-ranking file on disk, build seconds,
median milliseconds per query (batches of 64), recall@1 (the returned top row has the exact
best score; ties count) and recall@1 within the top 10. An index kind and its ``+rerank``
variant share one build.

    python benchmarks/index_scale.py --vectors-from models/index-medic-flat --sizes 10000000 \\
        --kinds ivfpq ivfpq+rerank --workdir /tmp/scale --output metrics/benchmarks/index-scale-1e7.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_sapbert.index.name_index import NameIndex, make_faiss_index, rerank_exact  # noqa: E402

CHUNK = 250_000


def generate(base: np.ndarray, n: int, seed: int, noise: float, path: Path) -> np.memmap:
    """``n`` noisy, renormalised copies of random ``base`` rows, written to ``path`` (float32)."""
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, base.shape[1]))
    for start in tqdm(range(0, n, CHUNK), desc=f"generating {n:,}", unit="chunk"):
        size = min(CHUNK, n - start)
        rows = base[rng.integers(0, len(base), size)]
        rows += noise * rng.standard_normal(rows.shape, dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        out[start:start + size] = rows
    out.flush()
    return np.load(path, mmap_mode="r")


def exact_top1(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    best = np.full(len(queries), -np.inf, dtype=np.float32)
    for start in tqdm(range(0, len(vectors), CHUNK), desc="exact search", unit="chunk"):
        best = np.maximum(best, (queries @ np.asarray(vectors[start:start + CHUNK]).T).max(axis=1))
    return best


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors-from", required=True, type=Path, help="a saved flat NameIndex folder")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--kinds", nargs="+", default=["flat", "hnsw", "ivfpq", "pq"])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--rerank", type=int, default=100, help="candidates re-scored by the +rerank kinds")
    parser.add_argument("--nlist", type=int, default=0, help="IVF lists (0: NameIndex's 4·sqrt(n))")
    parser.add_argument("--nprobe", type=int, default=0, help="IVF lists searched (0: NameIndex's 16)")
    parser.add_argument("--train-size", type=int, default=256_000, help="vectors the quantisers are trained on")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/sapbert-index-scale"))
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


def held_out_queries(base: np.ndarray, count: int, noise: float) -> np.ndarray:
    """``count`` real vectors with noise, renormalised (seeded: every run asks the same queries)."""
    rng = np.random.default_rng(0)
    held = rng.choice(len(base), count, replace=False)
    queries = base[held] + rng.normal(0, noise, (count, base.shape[1])).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return queries


def write_half(vectors: np.ndarray, path: Path) -> None:
    """float16 copies of ``vectors`` in a memory-mapped file: what ``+rerank`` kinds score exactly."""
    half = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=vectors.shape)
    for start in range(0, len(vectors), CHUNK):
        half[start:start + CHUNK] = vectors[start:start + CHUNK]
    half.flush()
    del half


def build(kind: str, vectors: np.ndarray, args: argparse.Namespace) -> Tuple[Any, Dict[str, int], float]:
    """One index of ``kind`` trained on the first ``--train-size`` vectors, then filled chunk by chunk."""
    params: Dict[str, int] = {}
    if kind == "ivfpq":
        params.update({k: v for k, v in (("nlist", args.nlist), ("nprobe", args.nprobe)) if v})
    start = time.perf_counter()
    sample = np.ascontiguousarray(vectors[: min(len(vectors), args.train_size)])
    index, used = make_faiss_index(kind, vectors.shape[1], sample, params)
    for s in tqdm(range(0, len(vectors), CHUNK), desc=f"adding ({kind})", unit="chunk"):
        index.add(np.ascontiguousarray(vectors[s:s + CHUNK]))
    return index, used, time.perf_counter() - start


def search(index: Any, queries: np.ndarray, half: Optional[np.ndarray], rerank: int) -> Tuple[np.ndarray, List[float]]:
    """Top-10 rows per query (re-ranked against ``half`` when given), and milliseconds per query per batch."""
    fetch = max(10, rerank) if half is not None else 10
    timings, found = [], []
    for s in range(0, len(queries), 64):
        batch = queries[s:s + 64]
        t = time.perf_counter()
        _, rows = index.search(batch, fetch)
        if half is not None:
            _, rows = rerank_exact(batch, rows.astype(np.int64), lambda r: half[r], 10)
        timings.append((time.perf_counter() - t) * 1000 / len(batch))
        found.append(rows)
    return np.vstack(found), timings


def measure(kind_name: str, built: Tuple[Any, Dict[str, int], float], queries: np.ndarray, vectors: np.ndarray,
            truth: np.ndarray, half_path: Path, rerank: int) -> Dict[str, Any]:
    """One kind at one size: memory, build time, latency and recall@1 against the exact best score."""
    import faiss

    index, used, build_s = built
    kind, _, extra = kind_name.partition("+")
    if kind == "hnsw":
        index.hnsw.efSearch = used["ef_search"]
    elif kind == "ivfpq":
        faiss.extract_index_ivf(index).nprobe = used["nprobe"]
    half = np.load(half_path, mmap_mode="r") if extra == "rerank" else None
    rows, timings = search(index, queries, half, rerank)
    # the returned rows scored exactly (float32 vectors), against the true best score
    exact_scores = np.array([[queries[i] @ vectors[r] if r >= 0 else -np.inf for r in rows[i]]
                             for i in range(len(queries))], dtype=np.float32)
    hits = np.isclose(exact_scores, truth[:, None], atol=1e-5)
    size = len(faiss.serialize_index(index))
    n = len(vectors)
    return {"names": n, "kind": kind_name, "params": dict(used, rerank=rerank if half is not None else 0),
            "bytes_per_name": round(size / n, 1), "index_mb": round(size / 1e6, 1),
            "rerank_disk_mb": round(half_path.stat().st_size / 1e6, 1) if half is not None else 0,
            "build_s": round(build_s, 1), "ms_per_query": round(statistics.median(timings), 3),
            "recall_at_1": round(float(hits[:, 0].mean()), 4),
            "recall_at_1_in_top10": round(float(hits.any(axis=1).mean()), 4)}


def measure_size(n: int, base: np.ndarray, queries: np.ndarray, args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Every kind at ``n`` names; the collection's files are removed afterwards."""
    results: List[Dict[str, Any]] = []
    vectors = generate(base, n, seed=n, noise=args.noise, path=args.workdir / f"vectors-{n}.npy")
    truth = exact_top1(queries, vectors)
    half_path = args.workdir / f"vectors-{n}-f16.npy"
    if any(k.endswith("+rerank") for k in args.kinds):
        write_half(vectors, half_path)
    built: Dict[str, Any] = {}  # kind -> (index, params, build seconds): "ivfpq+rerank" reuses "ivfpq"
    for kind_name in args.kinds:
        kind = kind_name.partition("+")[0]
        if kind in ("flat", "hnsw") and n * base.shape[1] * 4 > 8e9:
            results.append({"names": n, "kind": kind_name, "skipped": "float32 vectors alone exceed 8 GB"})
            continue
        if kind not in built:
            built = {kind: build(kind, vectors, args)}  # one index in memory at a time
        row = measure(kind_name, built[kind], queries, vectors, truth, half_path, args.rerank)
        results.append(row)
        print(json.dumps(row), flush=True)
    del built, vectors
    for path in (args.workdir / f"vectors-{n}.npy", half_path):
        path.unlink(missing_ok=True)
    return results


def print_table(results: List[Dict[str, Any]]) -> None:
    print(f"\n{'names':>10} {'kind':<13} {'B/name':>7} {'RAM MB':>8} {'disk MB':>8} {'build s':>8} {'ms/query':>9} "
          f"{'R@1':>6} {'R@1∈10':>7}")
    for r in results:
        if "skipped" in r:
            print(f"{r['names']:>10} {r['kind']:<13} skipped: {r['skipped']}")
            continue
        print(f"{r['names']:>10} {r['kind']:<13} {r['bytes_per_name']:>7} {r['index_mb']:>8} {r['rerank_disk_mb']:>8} "
              f"{r['build_s']:>8} {r['ms_per_query']:>9} {r['recall_at_1']:>6} {r['recall_at_1_in_top10']:>7}")


def main(argv: Optional[List[str]] = None) -> None:
    import faiss

    args = parse_args(argv)
    faiss.omp_set_num_threads(args.threads)
    args.workdir.mkdir(parents=True, exist_ok=True)
    base = np.ascontiguousarray(NameIndex.load(args.vectors_from).vectors(), dtype=np.float32)
    queries = held_out_queries(base, args.queries, args.noise)
    results = [row for n in args.sizes for row in measure_size(n, base, queries, args)]
    print_table(results)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"noise": args.noise, "queries": args.queries, "threads": args.threads,
                                           "vectors_from": str(args.vectors_from), "results": results},
                                          indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
