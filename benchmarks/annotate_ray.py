"""Documents per second of ``sapbert annotate``: the local engine against the Ray engine with 1
and 2 actors, on the same input on this machine, and the PubMed-scale estimate that follows.

Each engine annotates the NCBI-disease and BC5CDR abstracts (the PubTator files given, joined
into one input) with the embedded default pipeline. The Ray output is checked against the
local engine's (every document once, the same entities). Reported per run: wall time from
the call to the summary (pipeline loading and Ray start included) and the steady rate while
annotating (the local engine: after loading; Ray: documents over the actors' summed shard
times divided by the number of actors). The runs share the machine one after another, so
the ratios against the local engine are comparable; absolute rates move with other load.

From the 2-actor run's steady rate per CPU core, the estimate for PubMed (``--documents``,
37M abstracts) on N machines of C cores assumes linear scaling (shards are independent;
the driver only sums rows), at ``--usd-per-core-hour``.

    python benchmarks/annotate_ray.py --corpus assets/corpora/ncbi-disease/NCBI*_corpus.txt \\
        assets/corpora/bc5cdr/CDR_*.PubTator.txt --output metrics/benchmarks/annotate-ray.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

PUBMED = 37_000_000


def join_corpora(files: List[str], target: Path) -> int:
    """The PubTator files as one input (a blank line between files); the number of documents."""
    with target.open("w", encoding="utf-8") as out:
        for name in files:
            text = Path(name).read_text(encoding="utf-8").strip("\n")
            out.write(text + "\n\n")
    return sum(1 for line in target.open(encoding="utf-8") if "|t|" in line.split("\t", 1)[0])


def run_local(source: Path, work: Path) -> Dict[str, Any]:
    import spacy_sapbert
    from spacy_sapbert.annotate import annotate

    started = time.perf_counter()
    nlp = spacy_sapbert.load()
    loaded = time.perf_counter()
    summary = annotate(nlp, source, work / "local.jsonl", resume=False, show_progress=False)
    done = time.perf_counter()
    return {"engine": "local", "actors": 0, "documents": summary.written, "wall_s": done - started,
            "annotate_s": done - loaded, "steady_docs_per_s": summary.written / (done - loaded),
            "wall_docs_per_s": summary.written / (done - started)}


def run_ray(source: Path, work: Path, actors: int, cpus: float, shard_mb: float) -> Dict[str, Any]:
    from spacy_sapbert.annotate.ray_engine import annotate_with_ray

    out = work / f"ray-{actors}"
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    summary = annotate_with_ray("default", source, out, num_actors=actors, num_cpus_per_actor=cpus,
                                shard_bytes=int(shard_mb * (1 << 20)), show_progress=False)
    wall = time.perf_counter() - started
    shard_seconds = sum(json.loads(p.read_text())["seconds"] for p in (out / "_done").glob("part-*.json"))
    steady = summary.written / (shard_seconds / actors)
    return {"engine": "ray", "actors": actors, "cpus_per_actor": cpus, "shards": summary.shards,
            "documents": summary.written, "wall_s": wall, "shard_seconds": shard_seconds,
            "steady_docs_per_s": steady, "wall_docs_per_s": summary.written / wall}


def estimate(per_core: float, documents: int, usd_per_core_hour: float, cores: int) -> List[Dict[str, Any]]:
    rows = []
    for machines in (1, 10, 50, 100):
        hours = documents / (per_core * cores * machines) / 3600
        rows.append({"machines": machines, "cores_each": cores, "hours": hours,
                     "usd": hours * machines * cores * usd_per_core_hour})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", required=True, help="PubTator files to annotate (joined).")
    parser.add_argument("--shard-mb", type=float, default=0.25, help="Ray shard size (MB): enough shards for 2.")
    parser.add_argument("--documents", type=int, default=PUBMED, help="Documents in the estimate (PubMed).")
    parser.add_argument("--cores", type=int, default=16, help="Cores per machine in the estimate.")
    parser.add_argument("--usd-per-core-hour", type=float, default=0.045,
                        help="Price assumed in the estimate (on-demand compute-optimised cloud vCPU, 2026).")
    parser.add_argument("--output", type=Path, help="Write the results as JSON here.")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a Ray started here, for here only
    work = Path(tempfile.mkdtemp(prefix="annotate-ray-"))
    source = work / "ncbi-bc5cdr.pubtator"
    documents = join_corpora(args.corpus, source)
    cores = os.cpu_count() or 1
    print(f"{documents} documents, {source.stat().st_size / 1e6:.2f} MB; this machine has {cores} cores")
    runs = [run_local(source, work), run_ray(source, work, 1, float(cores), args.shard_mb),
            run_ray(source, work, 2, max(1.0, cores / 2), args.shard_mb)]
    from spacy_sapbert.annotate.compare import compare_outputs

    for run in runs[1:]:
        run["same_as_local"] = compare_outputs(work / "local.jsonl", work / f"ray-{run['actors']}").line()
    base = runs[0]["steady_docs_per_s"]
    print(f"{'engine':<10}{'actors':>7}{'wall s':>9}{'docs/s (wall)':>15}{'docs/s (steady)':>17}{'vs local':>10}")
    for run in runs:
        print(f"{run['engine']:<10}{run['actors']:>7}{run['wall_s']:>9.1f}{run['wall_docs_per_s']:>15.1f}"
              f"{run['steady_docs_per_s']:>17.1f}{run['steady_docs_per_s'] / base:>9.2f}×")
    for run in runs[1:]:
        print(f"ray, {run['actors']} actor(s): {run['same_as_local']}")
    per_core = runs[2]["steady_docs_per_s"] / cores
    table = estimate(per_core, args.documents, args.usd_per_core_hour, args.cores)
    print(f"\n{per_core:.1f} documents/s per core (2 actors); {args.documents:,} documents at "
          f"${args.usd_per_core_hour}/core-hour:")
    for row in table:
        print(f"  {row['machines']:>4} × {row['cores_each']} cores: {row['hours']:>8.1f} h  ${row['usd']:,.0f}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"documents": documents, "cores": cores, "runs": runs,
                                           "per_core_docs_per_s": per_core, "estimate": table}, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
