"""Load time and peak memory of the embedded default pipeline, each in a fresh process.

Every run is a new Python process that imports spaCy, loads the pipeline (timed), runs it
over the documents of a PubTator file (timed) and reports its peak RSS. The first run
after a build or a reboot reads the files from disk ("first"); the following ones find
them in the page cache ("warm", the median is reported).

    python benchmarks/load_and_memory.py --corpus assets/corpora/ncbi-disease/NCBItestset_corpus.txt \\
        --runs 4 --output metrics/benchmarks/load-default.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import json, resource, sys, time
start = time.perf_counter()
import spacy, spacy_sapbert
imported = time.perf_counter()
nlp = spacy_sapbert.load() if sys.argv[1] == "default" else spacy.load(sys.argv[1])
loaded = time.perf_counter()
from spacy_sapbert.annotate import Record, read_records
texts = [r.text for r in read_records(sys.argv[2], fmt="pubtator") if isinstance(r, Record)]
run_start = time.perf_counter()
ents = sum(len(doc.ents) for doc in nlp.pipe(texts, batch_size=32))
done = time.perf_counter()
print(json.dumps({"import_s": imported - start, "load_s": loaded - imported, "docs": len(texts), "entities": ents,
                  "pipe_s": done - run_start, "docs_per_s": len(texts) / (done - run_start),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipeline", default="default", help="'default' or a pipeline folder/package")
    parser.add_argument("--corpus", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", PROBE, args.pipeline, str(args.corpus)], check=True,
                             capture_output=True, text=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    warm = runs[1:] or runs
    summary = {"pipeline": args.pipeline, "corpus": args.corpus.name, "runs": runs,
               "first_load_s": round(runs[0]["load_s"], 2),
               "warm_load_s_median": round(statistics.median(r["load_s"] for r in warm), 2),
               "import_s_median": round(statistics.median(r["import_s"] for r in runs), 2),
               "docs_per_s_median": round(statistics.median(r["docs_per_s"] for r in runs), 2),
               "peak_rss_mb_max": round(max(r["peak_rss_mb"] for r in runs), 1)}
    print(f"pipeline {args.pipeline}, {runs[0]['docs']} documents of {args.corpus.name}, {args.runs} fresh processes")
    print(f"  import spacy + spacy_sapbert  {summary['import_s_median']:.2f} s (median)")
    print(f"  load, first run               {summary['first_load_s']:.2f} s")
    print(f"  load, warm (median)           {summary['warm_load_s_median']:.2f} s")
    print(f"  nlp.pipe, whole pipeline      {summary['docs_per_s_median']:.2f} docs/s (median)")
    print(f"  peak RSS                      {summary['peak_rss_mb_max']:.0f} MB (max over runs)")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
