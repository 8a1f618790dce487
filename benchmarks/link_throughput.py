"""Linking throughput, ours against scispaCy's EntityLinker, same KB, same documents, same process.

Both linkers get the same documents with the corpus's gold mentions as ``doc.ents`` (so
NER time is left out) and link every span. Runs alternate (ours, scispaCy, ours, …), each
on fresh copies of the documents, our mention cache emptied before each run; the median
of ``--repeats`` runs is reported with the ratio. Index build time (names/s) is measured
for both. Prints a table and writes JSON.

    python benchmarks/link_throughput.py --kb kbs/medic.jsonl.gz --model models/sapbert-default \\
        --corpus assets/corpora/ncbi-disease/NCBItestset_corpus.txt \\
        --corpus assets/corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt --output metrics/benchmarks/throughput-medic.json
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import spacy
from spacy.tokens import Doc
from spacy.util import filter_spans

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_sapbert.encoder import Encoder  # noqa: E402
from spacy_sapbert.index import NameIndex  # noqa: E402
from spacy_sapbert.kb import KnowledgeBase  # noqa: E402
from training.baselines import ScispacyCandidates  # noqa: E402
from training.corpora import read_pubtator  # noqa: E402

logger = logging.getLogger("benchmark")


def gold_docs(nlp: spacy.Language, corpus: Path) -> List[Doc]:
    """One Doc per PubTator document, its gold mentions as ents (overlaps resolved by length)."""
    docs = []
    for document in read_pubtator(corpus):
        doc = nlp.make_doc(document.text)
        spans = [doc.char_span(m.start, m.end, label=m.type, alignment_mode="expand") for m in document.mentions]
        doc.ents = filter_spans([s for s in spans if s is not None])
        docs.append(doc)
    return docs


def copies(docs: List[Doc]) -> List[Doc]:
    return [doc.copy() for doc in docs]


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, type=Path)
    parser.add_argument("--model", default="sapbert-default")
    parser.add_argument("--index", type=Path, help="Prebuilt index of --model over --kb (else built here, timed).")
    parser.add_argument("--corpus", action="append", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from scispacy.linking import EntityLinker

    nlp = spacy.blank("en")
    kb = KnowledgeBase.from_jsonl(args.kb)
    result: Dict[str, Any] = {"kb": kb.name, "kb_names": kb.stats().names, "model": args.model,
                              "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                                          "torch_threads": torch.get_num_threads()}}

    encoder = Encoder(args.model, device="cpu")
    if args.index:
        index = NameIndex.load(args.index, encoder=encoder, kb=kb)
    else:
        index = NameIndex.build(kb, encoder)
    result["ours_index"] = {"kind": index.kind, **index.manifest.get("build", {})}
    ours = nlp.add_pipe("sapbert_linker", config={"model": args.model, "kb": str(args.kb), "device": "cpu"})
    ours.use(encoder, kb, index)

    theirs_system = ScispacyCandidates()
    start = time.perf_counter()
    theirs_system.prepare(kb)
    build = time.perf_counter() - start
    result["scispacy_index"] = {"seconds": round(build, 1), "names_per_second": round(kb.stats().names / build, 1)}
    theirs = EntityLinker(candidate_generator=theirs_system._generator, resolve_abbreviations=False,
                          filter_for_definitions=False)

    corpora = []
    for path in args.corpus:
        docs = gold_docs(nlp, path)
        mentions = sum(len(d.ents) for d in docs)
        runs: Dict[str, List[float]] = {"ours": [], "scispacy": []}
        for _ in range(args.repeats):
            batch = copies(docs)
            ours.linker.clear_cache()
            runs["ours"].append(timed(lambda: list(ours.pipe(iter(batch), batch_size=64))))
            batch = copies(docs)
            runs["scispacy"].append(timed(lambda: [theirs(d) for d in batch]))
        row = {"corpus": path.name, "documents": len(docs), "mentions": mentions}
        for system, seconds in runs.items():
            median = statistics.median(seconds)
            row[system] = {"seconds": [round(s, 3) for s in seconds], "median_s": round(median, 3),
                           "mentions_per_s": round(mentions / median, 1), "docs_per_s": round(len(docs) / median, 2)}
        row["ratio_ours_over_scispacy"] = round(row["ours"]["mentions_per_s"] / row["scispacy"]["mentions_per_s"], 2)
        corpora.append(row)
        logger.info("%s: %s", path.name, json.dumps(row))
    result["corpora"] = corpora
    result["peak_rss_mb_both"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    print(f"\nKB {kb.name}: {result['kb_names']:,} names; model {args.model}; "
          f"{result['machine']['cpus']} CPUs, torch threads {result['machine']['torch_threads']}")
    print(f"index build: ours {result['ours_index'].get('seconds', 0):.1f} s "
          f"({result['ours_index'].get('names_per_second', 0):.0f} names/s, {index.kind}); "
          f"scispaCy {build:.1f} s ({result['scispacy_index']['names_per_second']:.0f} names/s)")
    print(f"{'corpus':<34} {'docs':>5} {'mentions':>8} {'ours m/s':>9} {'scispaCy m/s':>12} {'ratio':>6}")
    for row in corpora:
        print(f"{row['corpus']:<34} {row['documents']:>5} {row['mentions']:>8} {row['ours']['mentions_per_s']:>9.1f} "
              f"{row['scispacy']['mentions_per_s']:>12.1f} {row['ratio_ours_over_scispacy']:>6.2f}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
