"""Load time and peak memory of the embedded default pipeline, each in a fresh process.

Every run is a new Python process that imports spaCy, loads the pipeline (timed), annotates one
sentence (timed with the load: "ready", since the NER reads its model and gazetteer on first use),
runs it over the documents of a PubTator file (timed) and reports its peak RSS. The first run
after a build or a reboot reads the files from disk ("first"); the following ones find
them in the page cache ("warm", the median is reported).

Variants are the linker's encoder settings, given as ``--variant LABEL=BACKEND,PRECISION`` (BACKEND ``onnx``: the
NER's too, in a process that never imports torch, as ``sapbert annotate --onnx``)
(default: ``default=auto,auto`` and the baseline ``transformers-fp32=transformers,float32``,
the configuration before the native backend and CPU bf16), optionally with a checkout whose
code (and embedded default) the process runs instead of this one's,
``LABEL=BACKEND,PRECISION,FOLDER`` (``git worktree add /tmp/wt-before REV``), and optionally with glibc's
mmap threshold held before the pipeline loads, ``LABEL=BACKEND,PRECISION,FOLDER,held`` (FOLDER may be empty),
as ``sapbert annotate --low-memory`` holds it (:mod:`spacy_sapbert.util.heap`), or ``paged``: the clean
shared-library pages dropped from the resident set after the imports, as ``sapbert annotate`` does
(:mod:`spacy_sapbert.util.resident`), and optionally with the NER's precision,
``LABEL=BACKEND,PRECISION,FOLDER,HEAP,NER_PRECISION`` (``torch-fp32=auto,float32,,,float32``: both models in float32
on torch, what a CPU without native bf16 computes; default: the pipeline's own); runs alternate between them and the
ratios against the last variant are printed beside the numbers.

With ``--job-input FILE``, each round also runs what ``make run`` runs, ``sapbert annotate FILE`` (its
output in a temporary folder), as a fresh process of its own, and reports its wall time and peak RSS
(the process's own, from ``wait4``): the memory a user's first command takes, import and all.

    python benchmarks/load_and_memory.py --corpus assets/corpora/ncbi-disease/NCBItestset_corpus.txt \\
        --runs 4 --output metrics/benchmarks/load-default.json
    python benchmarks/load_and_memory.py --corpus assets/corpora/ncbi-disease/NCBItestset_corpus.txt \\
        --variant after=auto,auto --variant before=auto,auto,/tmp/wt-before --runs 4
    python benchmarks/load_and_memory.py --corpus assets/corpora/ncbi-disease/NCBItestset_corpus.txt \\
        --job-input examples/abstracts.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling fresh_process, also when loaded by path

from fresh_process import fresh, usage_of  # noqa: E402

PROBE = r"""
import json, resource, sys, time
start = time.perf_counter()
if sys.argv[5] == "held":
    from spacy_sapbert.util.heap import hold_mmap_threshold
    assert hold_mmap_threshold(), "glibc's mmap threshold could not be held here"
if sys.argv[3] == "onnx":  # both transformers on ONNX Runtime, torch never imported (sapbert annotate --onnx)
    from spacy_sapbert.util.torch_free import block_torch
    assert block_torch(), "torch was imported before the probe could block it"
import spacy, spacy_sapbert
if sys.argv[5] == "paged":
    from spacy_sapbert.util.resident import drop_library_pages
    assert drop_library_pages(), "no shared-library page could be dropped here"
imported = time.perf_counter()
overrides = {"components.sapbert_linker.backend": sys.argv[3], "components.sapbert_linker.precision": sys.argv[4]}
if sys.argv[3] == "onnx":
    overrides["components.sapbert_ner.backend"] = "onnx"
if sys.argv[6]:
    overrides["components.sapbert_ner.precision"] = sys.argv[6]
nlp = spacy_sapbert.load(config=overrides) if sys.argv[1] == "default" else spacy.load(sys.argv[1], config=overrides)
loaded = time.perf_counter()
nlp("Cisplatin nephrotoxicity in patients with familial adenomatous polyposis (FAP).")
ready = time.perf_counter()
from spacy_sapbert.annotate import Record, read_records
texts = [r.text for r in read_records(sys.argv[2], fmt="pubtator") if isinstance(r, Record)]
run_start = time.perf_counter()
ents = sum(len(doc.ents) for doc in nlp.pipe(texts, batch_size=32))
done = time.perf_counter()
print(json.dumps({"import_s": imported - start, "load_s": loaded - imported, "ready_s": ready - imported,
                  "docs": len(texts), "entities": ents,
                  "pipe_s": done - run_start, "docs_per_s": len(texts) / (done - run_start),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def job_peak(command: Sequence[str]) -> Dict[str, float]:
    """Wall time and peak RSS of ``command`` run to its end as a fresh process (its own, whatever the
    size of this one: :mod:`fresh_process`)."""
    stderr = subprocess.run(fresh(command), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            errors="replace").stderr
    usage = usage_of(stderr)
    if usage.get("code", 1) != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {usage.get('code', '?')}:\n{stderr[-2000:]}")
    return {"seconds": usage["seconds"], "peak_rss_mb": usage["peak_rss_mb"]}


def annotate_job(path: Path, folder: str) -> List[str]:
    """``make run``'s command on ``path``, its output in ``folder`` (a new one per run: nothing is overwritten)."""
    return [sys.executable, "-m", "spacy_sapbert.cli", "annotate", str(path), "--output",
            str(Path(folder) / "annotations.jsonl"), "--show"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipeline", default="default", help="'default' or a pipeline folder/package")
    parser.add_argument("--corpus", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--variant", action="append",
                        help="LABEL=BACKEND,PRECISION[,CHECKOUT[,held|paged[,NER_PRECISION]]] (repeatable; the last "
                             "one is the baseline of the ratios)")
    parser.add_argument("--job-input", type=Path,
                        help="also run `sapbert annotate` on this file each round (make run's job): time and peak RSS")
    parser.add_argument("--job-flags", action="append", default=[],
                        help="with --job-input: also run the job with these flags each round (repeatable; e.g. "
                             "'--onnx --low-memory')")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.job_input is not None and not args.job_input.is_file():
        parser.error(f"--job-input {args.job_input}: no such file")
    variants = {}
    for item in args.variant or ["default=auto,auto", "transformers-fp32=transformers,float32"]:
        label, _, settings = item.partition("=")
        backend, precision, checkout, heap, ner_precision = (settings.split(",", 4) + ["", "", "", ""])[:5]
        if heap not in ("", "glibc", "held", "paged"):
            parser.error(f"--variant {item}: the fourth field is 'held', 'paged' or 'glibc' (glibc's own mmap "
                         f"threshold), got {heap!r}")
        if checkout and not (Path(checkout) / "spacy_sapbert").is_dir():
            parser.error(f"--variant {item}: {checkout} is not a checkout of this project (no spacy_sapbert/)")
        variants[label] = (backend or "auto", precision or "auto", checkout, heap or "glibc", ner_precision)
    runs: Dict[str, List[Dict[str, Any]]] = {label: [] for label in variants}
    corpus = args.corpus.resolve()
    jobs: List[Dict[str, float]] = []
    flagged: Dict[str, List[Dict[str, float]]] = {flags: [] for flags in args.job_flags}
    with tempfile.TemporaryDirectory(prefix="load-and-memory-") as scratch:
        for _ in range(args.runs):
            if args.job_input is not None:
                jobs.append(job_peak(annotate_job(args.job_input, tempfile.mkdtemp(dir=scratch))))
                for flags, done in flagged.items():
                    done.append(job_peak(annotate_job(args.job_input, tempfile.mkdtemp(dir=scratch)) + flags.split()))
            for label, (backend, precision, checkout, heap, ner_precision) in variants.items():
                # a checkout's code comes first on the path (and it is the working folder, so `python -c` finds it)
                path = os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))
                probe = [sys.executable, "-c", PROBE, args.pipeline, str(corpus), backend, precision, heap, ner_precision]
                out = subprocess.run(fresh(probe), check=True, capture_output=True, text=True, cwd=checkout or None,
                                     env=dict(os.environ, PYTHONPATH=path))
                runs[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    summaries = {}
    for label, done in runs.items():
        warm = done[1:] or done
        summaries[label] = {"backend": variants[label][0], "precision": variants[label][1],
                            "checkout": variants[label][2] or None, "heap": variants[label][3],
                            "ner_precision": variants[label][4] or None, "runs": done,
                            "first_load_s": round(done[0]["load_s"], 2),
                            "warm_load_s_median": round(statistics.median(r["load_s"] for r in warm), 2),
                            "warm_ready_s_median": round(statistics.median(r["ready_s"] for r in warm), 2),
                            "import_s_median": round(statistics.median(r["import_s"] for r in done), 2),
                            "docs_per_s_median": round(statistics.median(r["docs_per_s"] for r in done), 2),
                            "peak_rss_mb_max": round(max(r["peak_rss_mb"] for r in done), 1)}
    baseline = summaries[list(summaries)[-1]]
    docs = next(iter(runs.values()))[0]["docs"]
    print(f"pipeline {args.pipeline}, {docs} documents of {args.corpus.name}, {args.runs} fresh processes per "
          f"variant, alternating; ratio = baseline / variant for times, variant / baseline for docs/s and RSS")
    rows = [("import spacy + spacy_sapbert, s (median)", "import_s_median", False),
            ("load, first run, s", "first_load_s", False), ("load, warm (median), s", "warm_load_s_median", False),
            ("load + first sentence, warm (median), s", "warm_ready_s_median", False),
            ("nlp.pipe, whole pipeline, docs/s (median)", "docs_per_s_median", True),
            ("peak RSS, MB (max over runs)", "peak_rss_mb_max", True)]
    print(f"  {'':<44}" + "".join(f"{label:>22}" for label in summaries))
    for title, key, higher in rows:
        cells = []
        for summary in summaries.values():
            ratio = summary[key] / baseline[key] if higher else baseline[key] / summary[key]
            cells.append(f"{summary[key]:>10.2f} ({ratio:4.2f}x)")
        print(f"  {title:<44}" + "".join(f"{c:>22}" for c in cells))
    job = None
    if jobs:
        job = {"command": f"sapbert annotate {args.job_input}", "runs": jobs,
               "seconds_median": round(statistics.median(j["seconds"] for j in jobs), 2),
               "peak_rss_mb_max": round(max(j["peak_rss_mb"] for j in jobs), 1)}
        print(f"  {job['command']} (make run's job), {len(jobs)} fresh processes: {job['seconds_median']:.2f} s "
              f"(median), peak RSS {job['peak_rss_mb_max']:.1f} MB (max)")
        job["with_flags"] = {}
        for flags, done in flagged.items():
            job["with_flags"][flags] = {"runs": done,
                                        "seconds_median": round(statistics.median(j["seconds"] for j in done), 2),
                                        "peak_rss_mb_max": round(max(j["peak_rss_mb"] for j in done), 1)}
            print(f"  the same with {flags}: {job['with_flags'][flags]['seconds_median']:.2f} s (median), peak RSS "
                  f"{job['with_flags'][flags]['peak_rss_mb_max']:.1f} MB (max)")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"pipeline": args.pipeline, "corpus": args.corpus.name,
                                           "baseline": list(summaries)[-1], "variants": summaries,
                                           "job": job},
                                          indent=1) + "\n", encoding="utf-8")

if __name__ == "__main__":
    main()
