"""The embedded default pipeline against the pipeline a scispaCy user runs, on the same raw abstracts.

The peer is spaCy's CNN NER (tok2vec + transition-based NER, the architecture of scispaCy's
``en_ner_bc5cdr_md``; scispaCy's models cannot be downloaded here, so it is trained on the corpora
our NER uses: ``spacy project run ner-train-tok2vec``), scispaCy's abbreviation detector, and
scispaCy's ``EntityLinker`` with its own defaults (k 30, threshold 0.7, at most 5 concepts, long
forms for abbreviations) over its TF-IDF + HNSW index of the default's own KB (built once:
:mod:`training.evaluation.scispacy_peer`). Ours is ``spacy_sapbert.load()`` as shipped, and beside it the same pipeline with
its NER in int8 (``ours_int8``, ``precision: int8``), so that what int8 gains and costs is measured in the same run,
and the same pipeline as ``sapbert annotate --onnx`` runs it (``ours_onnx``: the NER and the encoder on ONNX
Runtime in a process that never imports torch).

Every measurement is a fresh process: it imports spaCy, loads one pipeline (timed) and annotates one
sentence (timed with the load: "ready"; our NER reads its files on first use), runs it over
every document of a PubTator file with ``nlp.pipe`` at the pipeline's own batch size (timed) and
reports its peak RSS. Runs alternate (ours, ours_int8, peer, ours, …) and the median of ``--runs`` is kept;
one more process per system scores its output with the ``sapbert ner-e2e`` table (NER strict,
linked mentions, document-level concepts, per type, at the pipeline's own threshold). The
machine's matrix-multiply peak is measured in the same run. Prints a table, writes JSON.

    python benchmarks/pipeline_vs_scispacy.py --peer-ner training_runs/ner/model-best \\
        --corpus assets/corpora/ncbi-disease/NCBItestset_corpus.txt \\
        --corpus assets/corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt \\
        --output metrics/benchmarks/pipeline-vs-scispacy.json
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compute_share import efficiency, matmul_peak, matmul_peak_of_dtype  # noqa: E402
from fresh_process import fresh  # noqa: E402

logger = logging.getLogger("benchmark")
SYSTEMS = ("ours", "ours_int8", "ours_onnx", "peer")
INT8_NER = {"components": {"sapbert_ner": {"precision": "int8"}}}
"""``ours_int8``: the default with its NER's linear layers in int8 (:mod:`spacy_sapbert.encoding.int8`)."""
ONNX = {"components": {"sapbert_ner": {"backend": "onnx"}, "sapbert_linker": {"backend": "onnx"}}}
"""``ours_onnx``: both transformers on ONNX Runtime (:mod:`spacy_sapbert.encoding.onnx_bert`)."""
PEER_PIPE = "peer_scispacy_linker"
FIRST_SENTENCE = "Cisplatin nephrotoxicity in patients with familial adenomatous polyposis (FAP)."
"""Annotated right after the load and timed with it ("ready"): what loads on first use counts as loading."""


def default_kb_path() -> Path:
    import spacy_sapbert

    return Path(spacy_sapbert.DEFAULT_PIPELINE) / "sapbert_linker" / "kb.jsonl.gz"


def default_kb() -> Any:
    """The default's KB, under the name its pipe gives it."""
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase

    cfg = json.loads((default_kb_path().parent / "cfg.json").read_text(encoding="utf-8"))
    return KnowledgeBase.from_jsonl(default_kb_path(), name=cfg.get("kb_name"))


def load_system(system: str, peer_ner: Path, peer_index: Path) -> Any:
    """``spacy_sapbert.load()``, or the peer: the CNN NER pipeline with scispaCy's linker added."""
    import spacy
    import spacy_sapbert

    if system.startswith("ours"):
        return spacy_sapbert.load(config={"ours_int8": INT8_NER, "ours_onnx": ONNX}.get(system, {}))
    from spacy.language import Language

    @Language.factory(PEER_PIPE, default_config={"index": ""})
    def make_peer_linker(nlp: Language, name: str, index: str) -> Any:
        from scispacy.linking import EntityLinker

        from spacy_sapbert.training.evaluation.scispacy_peer import load_peer_generator

        dictionary = default_kb()
        linker = EntityLinker(candidate_generator=load_peer_generator(dictionary, index), resolve_abbreviations=True)
        linker.kb_for_scoring = dictionary
        return linker

    nlp = spacy.load(peer_ner)
    nlp.add_pipe(PEER_PIPE, config={"index": str(peer_index)})
    return nlp


def child(system: str, corpus: Path, mode: str, peer_ner: Path, peer_index: Path) -> Dict[str, Any]:
    """One measured process: load, then either a timed pass (``time``) or the e2e table (``score``)."""
    start = time.perf_counter()
    if system == "ours_onnx":  # as `sapbert annotate --onnx` does, before spaCy is imported
        from spacy_sapbert.util.torch_free import block_torch

        if not block_torch():
            raise SystemExit("ours_onnx: torch was imported already")
    import spacy  # noqa: F401
    import spacy_sapbert  # noqa: F401

    imported = time.perf_counter()
    nlp = load_system(system, peer_ner, peer_index)
    loaded = time.perf_counter()
    nlp(FIRST_SENTENCE)  # parts read on first use (our NER's model and gazetteer) are part of getting ready
    ready = time.perf_counter()
    from spacy_sapbert.training.corpora import read_pubtator

    documents = list(read_pubtator(corpus))
    out: Dict[str, Any] = {"system": system, "pipeline": nlp.pipe_names, "import_s": imported - start,
                           "load_s": loaded - imported, "ready_s": ready - imported, "docs": len(documents)}
    if mode == "efficiency":
        out.update(efficiency(nlp, documents))
    elif mode == "time":
        run_start = time.perf_counter()
        entities = sum(len(doc.ents) for doc in nlp.pipe(d.text for d in documents))
        seconds = time.perf_counter() - run_start
        out.update(entities=entities, pipe_s=seconds, docs_per_s=len(documents) / seconds,
                   mentions_per_s=entities / seconds)
    else:
        out["table"], out["threshold"] = score_system(nlp, system, documents, corpus)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def score_system(nlp: Any, system: str, documents: List[Any], corpus: Path) -> Any:
    """The ``sapbert ner-e2e`` table (per type: NER, mentions, documents P/R/F1) at the pipe's thresholds:
    each label's own where the pipe has ``label_thresholds`` (the default's CHEMICAL 0.9), as ``ner-e2e``."""
    from spacy_sapbert.training.ner.data import BC5CDR_LABELS, DISEASE, NCBI_LABELS
    from spacy_sapbert.training.ner.e2e_table import collect, gold_sets, own_thresholds, score

    ours = system.startswith("ours")
    linker = "sapbert_linker" if ours else PEER_PIPE
    pipe = nlp.get_pipe(linker)
    kb = pipe.kb if ours else pipe.kb_for_scoring
    bc5cdr = "CDR_" in corpus.name
    label_map, labels = (BC5CDR_LABELS, sorted(set(BC5CDR_LABELS.values()))) if bc5cdr else (NCBI_LABELS, [DISEASE])
    wanted = {k: v for k, v in label_map.items() if v in labels}
    thresholds = own_thresholds(pipe, labels)
    table = score(collect(nlp, documents, labels, kb, linker, at_zero=False), gold_sets(documents, wanted, kb), labels,
                  thresholds)
    return {label: {level: prf.to_dict() for level, prf in levels.items()} for label, levels in table.items()}, \
        thresholds if getattr(pipe, "label_thresholds", None) else pipe.threshold


def run_child(args: argparse.Namespace, system: str, corpus: Path, mode: str) -> Dict[str, Any]:
    command = [sys.executable, __file__, "--child", system, str(corpus), mode, "--peer-ner", str(args.peer_ner),
               "--peer-index", str(args.peer_index)]
    # under the launcher: this process holds the KB and torch, and a child spawned from it would report their
    # memory as the start of its own peak RSS (fresh_process)
    done = subprocess.run(fresh(command), capture_output=True, text=True)
    if done.returncode:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{system} on {corpus.name} ({mode}) failed with exit {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_corpus(args: argparse.Namespace, corpus: Path) -> Dict[str, Any]:
    """Scores, then ``--runs`` alternating timed processes per system: medians and ratios."""
    scored = {system: run_child(args, system, corpus, "score") for system in SYSTEMS}
    spent = run_child(args, "ours", corpus, "efficiency")
    runs: Dict[str, List[Dict[str, Any]]] = {system: [] for system in SYSTEMS}
    for _ in range(args.runs):
        for system in SYSTEMS:
            runs[system].append(run_child(args, system, corpus, "time"))
            logger.info("%s %s: %.2f docs/s", corpus.name, system, runs[system][-1]["docs_per_s"])
    row: Dict[str, Any] = {"corpus": corpus.name, "documents": runs["ours"][0]["docs"]}
    for system in SYSTEMS:
        done = runs[system]
        row[f"{system}_pipeline"] = done[0]["pipeline"]
        row[f"{system}_docs_per_s"] = round(statistics.median(r["docs_per_s"] for r in done), 2)
        row[f"{system}_mentions_per_s"] = round(statistics.median(r["mentions_per_s"] for r in done), 1)
        row[f"{system}_entities"] = done[0]["entities"]
        row[f"{system}_load_s"] = round(statistics.median(r["load_s"] for r in done), 2)
        row[f"{system}_ready_s"] = round(statistics.median(r["ready_s"] for r in done), 2)
        row[f"{system}_peak_rss_mb"] = round(max(r["peak_rss_mb"] for r in done), 1)
        row[f"{system}_threshold"] = scored[system]["threshold"]
        row[f"{system}_scores"] = scored[system]["table"]
        row[f"{system}_runs_docs_per_s"] = [round(r["docs_per_s"], 2) for r in done]
    row["ours_compute"] = {part: dict(spent[part], fraction_of_peak=round(
        spent[part]["gflops"] / matmul_peak_of_dtype(args.peak, spent[part]["dtype"]), 3)) for part in ("ner", "encoder")}
    row["docs_per_s_ratio"] = round(row["ours_docs_per_s"] / row["peer_docs_per_s"], 3)
    row["int8_docs_per_s_ratio"] = round(row["ours_int8_docs_per_s"] / row["peer_docs_per_s"], 3)
    row["onnx_docs_per_s_ratio"] = round(row["ours_onnx_docs_per_s"] / row["peer_docs_per_s"], 3)
    return row


def print_table(result: Dict[str, Any]) -> None:
    print(f"\n{result['machine']['cpu']}, {result['machine']['cpus']} CPUs; matmul peak {result['matmul_peak']}")
    print("| corpus | system | docs/s | mentions/s | load s | load + 1st sentence s | peak RSS MB | " + " | ".join(
        f"{label} NER / mentions / documents F1" for label in ("CHEMICAL", "DISEASE", "ALL")) + " |")
    for row in result["corpora"]:
        for system in SYSTEMS:
            scores = row[f"{system}_scores"]
            cells = [" / ".join(f"{scores[label][level]['f']:.2f}" for level in ("ner", "mentions", "documents"))
                     if label in scores else "–" for label in ("CHEMICAL", "DISEASE", "ALL")]
            print(f"| {row['corpus']} | {system} | {row[f'{system}_docs_per_s']:.2f} | "
                  f"{row[f'{system}_mentions_per_s']:.1f} | {row[f'{system}_load_s']:.2f} | "
                  f"{row[f'{system}_ready_s']:.2f} | "
                  f"{row[f'{system}_peak_rss_mb']:.0f} | " + " | ".join(cells) + " |")
        print(f"ours / peer docs/s on {row['corpus']}: {row['docs_per_s_ratio']:.2f}x (with an int8 NER: "
              f"{row['int8_docs_per_s_ratio']:.2f}x; without torch, on ONNX Runtime: "
              f"{row['onnx_docs_per_s_ratio']:.2f}x)")
        for part, spent in row["ours_compute"].items():
            print(f"  ours, {part}: {spent['gflop']:.1f} GFLOP in {spent['seconds']:.2f} s = {spent['gflops']:.1f} GFLOP/s "
                  f"({spent['fraction_of_peak']:.0%} of the {spent['dtype']} matmul peak)")


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer-ner", type=Path, default=Path("training_runs/ner/model-best"),
                        help="The spaCy CNN NER pipeline (spacy project run ner-train-tok2vec)")
    parser.add_argument("--peer-index", type=Path, default=Path("training_runs/scispacy-peer-index"),
                        help="scispaCy's index of the default's KB (built here when absent)")
    parser.add_argument("--corpus", action="append", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--child", nargs=3, metavar=("SYSTEM", "CORPUS", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.child and not args.corpus:
        parser.error("give at least one --corpus")
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if args.child:
        system, corpus, mode = args.child
        print(json.dumps(child(system, Path(corpus), mode, args.peer_ner, args.peer_index)))
        return
    from spacy_sapbert.training.evaluation.scispacy_peer import build_peer_index

    if not (args.peer_ner / "config.cfg").is_file():
        raise SystemExit(f"error: {args.peer_ner}: no trained peer NER; run `spacy project run ner-train-tok2vec`")
    started = time.perf_counter()
    build_peer_index(default_kb(), args.peer_index)
    result: Dict[str, Any] = {
        "machine": {"cpu": _cpu_name(), "cpus": len(os.sched_getaffinity(0)), "python": platform.python_version()},
        "peer_index_s": round(time.perf_counter() - started, 1), "matmul_peak": matmul_peak(),
        "runs": args.runs, "peer_ner": str(args.peer_ner),
    }
    args.peak = result["matmul_peak"]
    result["corpora"] = [measure_corpus(args, corpus) for corpus in args.corpus]
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print_table(result)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
