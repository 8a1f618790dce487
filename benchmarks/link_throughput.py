"""Linking throughput, ours against scispaCy's EntityLinker, same KB, same documents, same process.

Both linkers get the same documents with the corpus's gold mentions as ``doc.ents`` (so
NER time is left out) and link every span. Ours runs in several variants, each compute
precision (``--precision``: auto = bf16 autocast where it beats float32, and float32) with each
index kind (``--index-kind``: flat = exact, hnsw; a flat index is searched by a torch matrix multiply,
:mod:`spacy_sapbert.index.matmul_flat`, in bf16 with float32 re-scoring where the encoder computes in
bf16 and in float32 otherwise), and the share of mentions whose top concept
agrees with the first variant's is reported beside the speed. Runs alternate (every variant of
ours, then scispaCy, again …), each on fresh copies of the documents, our mention cache emptied
before each run; the median of ``--repeats`` runs is reported with the ratio. Index build time
(names/s) is measured for both (scispaCy's, with ``--scispacy-index``, when that folder is first
filled: later runs reopen the index, as scispaCy's own linkers do, and report the time recorded then). Prints a table and writes JSON.

    python benchmarks/link_throughput.py --kb kbs/medic.jsonl.gz --model sapbert-default \\
        --corpus assets/corpora/ncbi-disease/NCBItestset_corpus.txt \\
        --corpus assets/corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt --output metrics/benchmarks/throughput-medic.json

Precisions that come to the same compute precision on this machine (``auto`` is float32 on a CPU
where bf16 is not faster, so ``--precision auto --precision float32`` is one precision there) are
measured once. A smoke run: ``--limit-docs 5 --repeats 1`` and a small KB (scispaCy's index build
over MEDIC alone takes minutes).
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import spacy
from spacy.tokens import Doc
from spacy.util import filter_spans

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_sapbert.encoding.encoder import Encoder, cpu_has_native_bf16  # noqa: E402
from spacy_sapbert.index.name_index import NameIndex  # noqa: E402
from spacy_sapbert.kb.knowledge_base import KnowledgeBase  # noqa: E402
from spacy_sapbert.training.evaluation.baselines import ScispacyCandidates  # noqa: E402
from spacy_sapbert.training.corpora import read_pubtator  # noqa: E402

logger = logging.getLogger("benchmark")


def gold_docs(nlp: spacy.Language, corpus: Path, limit: int = 0) -> List[Doc]:
    """One Doc per PubTator document (the first ``limit`` when > 0), its gold mentions as ents
    (overlaps resolved by length)."""
    docs: List[Doc] = []
    for document in read_pubtator(corpus):
        if limit and len(docs) >= limit:
            break
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


def our_variants(encoders: Dict[str, Encoder], kinds: List[str]) -> List[Tuple[str, str, Encoder, str]]:
    """``(label, pipe name, encoder, index kind)`` of each variant of ours: every distinct compute
    precision (the encoders' resolved dtypes: ``auto`` may be float32) with every distinct index
    kind. Pipe names are numbered in order, so they never repeat (spaCy's E007)."""
    by_dtype: Dict[str, Encoder] = {}
    for requested, encoder in encoders.items():
        if encoder.dtype in by_dtype:
            logger.info("precision %r is %s on this machine, measured once", requested, encoder.dtype)
            continue
        by_dtype[encoder.dtype] = encoder
    variants = []
    for dtype, encoder in by_dtype.items():
        for kind in dict.fromkeys(kinds):
            variants.append((f"ours ({dtype}, {kind})", f"ours_{len(variants)}", encoder, kind))
    return variants


def top1_agreement(pipes: Dict[str, Any], docs: List[Doc]) -> Dict[str, float]:
    """Share of mentions whose top concept matches the first variant's (precision and index kind
    change speed; this says what they cost in answers)."""
    tops: Dict[str, List[str]] = {}
    for label, pipe in pipes.items():
        pipe.linker.clear_cache()
        tops[label] = [ent.kb_id_ for doc in pipe.pipe(iter(copies(docs)), batch_size=64) for ent in doc.ents]
        pipe.linker.clear_cache()
    reference = next(iter(tops.values()))
    return {label: round(sum(a == b for a, b in zip(reference, top)) / max(1, len(reference)), 4)
            for label, top in tops.items()}


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, type=Path)
    parser.add_argument("--model", default="sapbert-default")
    parser.add_argument("--index", type=Path, help="Prebuilt index of --model over --kb (else built here, timed).")
    parser.add_argument("--corpus", action="append", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit-docs", type=int, default=0,
                        help="Only the first N documents of each corpus (0: all; for a smoke run)")
    parser.add_argument("--precision", action="append",
                        help="Our encoder's compute precision, repeatable (default: auto = bf16 autocast on CPUs "
                             "with AMX/AVX512-BF16, else float32; and float32)")
    parser.add_argument("--index-kind", action="append",
                        help="Our index kinds, repeatable (default: flat and hnsw); the first is built from the KB, "
                             "the others converted from its vectors")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--scispacy-index", type=Path,
                        help="Keep scispaCy's index of --kb in this folder and reopen it on later runs (its build "
                             "time is then the one recorded when it was built)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    args.precision = list(dict.fromkeys(args.precision or ["auto", "float32"]))
    args.index_kind = list(dict.fromkeys(args.index_kind or ["flat", "hnsw"]))
    if args.limit_docs < 0 or args.repeats < 1:
        parser.error("--limit-docs must be >= 0 and --repeats >= 1")
    return args


def our_pipes(nlp: spacy.Language, kb: KnowledgeBase, args: argparse.Namespace, result: Dict[str, Any]
              ) -> Tuple[Dict[str, Any], NameIndex, Encoder]:
    """One ``sapbert_linker`` pipe per variant of ours, sharing one index per kind (builds recorded in
    ``result``); also the first index and encoder, for the report."""
    # as a pipe loads its encoder (pipes/linker_parts.saved_encoder): under bf16 autocast the linear layers'
    # weights are kept in bf16, not cast from float32 at every batch (the same vectors, half_weights.half_linear_weights)
    encoders = {p: Encoder(args.model, device="cpu", dtype=p, half_linears=True) for p in args.precision}
    first = encoders[args.precision[0]]
    index = NameIndex.load(args.index, encoder=first, kb=kb) if args.index else NameIndex.build(kb, first)
    result["ours_index"] = {"kind": index.kind, "precision": first.dtype, **index.manifest.get("build", {})}
    indexes = {index.kind: index}
    for kind in args.index_kind:
        if kind not in indexes:
            indexes[kind] = index.convert(kind)
            result[f"ours_index_{kind}"] = indexes[kind].manifest["build"]
    pipes = {}
    for label, name, encoder, kind in our_variants(encoders, args.index_kind):
        pipe = nlp.add_pipe("sapbert_linker", name=name,
                            config={"model": args.model, "kb": str(args.kb), "device": "cpu"})
        searched = indexes[kind]
        if kind == "flat" and encoder.dtype == "float32":  # float32 throughout: the float32 matrix multiply
            searched = copy.copy(searched)
            searched.flat_search = "float32"
        pipe.use(encoder, kb, searched)
        pipes[label] = pipe
    return pipes, index, first


def their_linker(kb: KnowledgeBase, result: Dict[str, Any], folder: Optional[Path] = None) -> Tuple[Any, float]:
    """scispaCy's EntityLinker over its own candidate generator built from ``kb`` (build timed), or,
    with ``folder``, over the index saved there (built there first when it is not: its build time is
    the one recorded then, as scispaCy's own linkers open a prebuilt index)."""
    from scispacy.linking import EntityLinker

    if folder is not None:
        from spacy_sapbert.training.evaluation.scispacy_peer import build_peer_index, load_peer_generator, peer_manifest

        reused = peer_manifest(folder).get("kb_fingerprint") == kb.fingerprint()
        build_peer_index(kb, folder)
        start = time.perf_counter()
        generator = load_peer_generator(kb, folder)
        build = float(peer_manifest(folder).get("build_seconds") or 0.0)  # 0: an index saved without the record
        result["scispacy_index"] = {"seconds": round(build, 1),
                                    "names_per_second": round(kb.stats().names / build, 1) if build else None,
                                    "reused": reused, "open_seconds": round(time.perf_counter() - start, 1)}
    else:
        system = ScispacyCandidates()
        start = time.perf_counter()
        system.prepare(kb)
        build = time.perf_counter() - start
        generator = system._generator
        result["scispacy_index"] = {"seconds": round(build, 1), "names_per_second": round(kb.stats().names / build, 1)}
    linker = EntityLinker(candidate_generator=generator, resolve_abbreviations=False, filter_for_definitions=False)
    return linker, build


def measure_corpus(nlp: spacy.Language, path: Path, pipes: Dict[str, Any], theirs: Any,
                   args: argparse.Namespace) -> Dict[str, Any]:
    """Alternating timed runs of every variant and of scispaCy on one corpus: medians, rates and ratios."""
    docs = gold_docs(nlp, path, limit=args.limit_docs)
    mentions = sum(len(d.ents) for d in docs)
    runs: Dict[str, List[float]] = {label: [] for label in pipes}
    runs["scispacy"] = []
    agreement = top1_agreement(pipes, docs)
    for _ in range(args.repeats):
        for label, pipe in pipes.items():
            batch = copies(docs)
            pipe.linker.clear_cache()
            runs[label].append(timed(lambda: list(pipe.pipe(iter(batch), batch_size=64))))
        batch = copies(docs)
        runs["scispacy"].append(timed(lambda: [theirs(d) for d in batch]))
    row: Dict[str, Any] = {"corpus": path.name, "documents": len(docs), "mentions": mentions,
                           "top1_agreement_with_first": agreement}
    for system, seconds in runs.items():
        median = statistics.median(seconds)
        row[system] = {"seconds": [round(s, 3) for s in seconds], "median_s": round(median, 3),
                       "mentions_per_s": round(mentions / median, 1), "docs_per_s": round(len(docs) / median, 2)}
    row["ratio_over_scispacy"] = {label: round(row[label]["mentions_per_s"] / row["scispacy"]["mentions_per_s"], 2)
                                  for label in pipes}
    logger.info("%s: %s", path.name, json.dumps(row))
    return row


def print_table(result: Dict[str, Any], index: NameIndex, first: Encoder, build: float, pipes: Dict[str, Any]) -> None:
    """Mentions per second of each system per corpus, with ratios and top-1 agreement."""
    print(f"\nKB {result['kb']}: {result['kb_names']:,} names; model {result['model']}; "
          f"{result['machine']['cpus']} CPUs, torch threads {result['machine']['torch_threads']}")
    print(f"index build: ours {result['ours_index'].get('seconds', 0):.1f} s "
          f"({result['ours_index'].get('names_per_second', 0):.0f} names/s, {index.kind}, {first.dtype}); "
          f"scispaCy {build:.1f} s ({result['scispacy_index']['names_per_second'] or 0:.0f} names/s"
          f"{', built by an earlier run' if result['scispacy_index'].get('reused') else ''})")
    systems = list(pipes) + ["scispacy"]
    print(f"{'corpus':<34} {'docs':>5} {'mentions':>8}  " + "  ".join(f"{s:>26}" for s in systems) + "   (mentions/s; ratio)")
    for row in result["corpora"]:
        cells = [f"{row[s]['mentions_per_s']:>9.1f}" + (f" ({row['ratio_over_scispacy'][s]:.2f}x)" if s in pipes else "")
                 for s in systems]
        print(f"{row['corpus']:<34} {row['documents']:>5} {row['mentions']:>8}  " + "  ".join(f"{c:>26}" for c in cells))
        print(f"{'':<50}top-1 agreement with {systems[0]}: {row['top1_agreement_with_first']}")


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    nlp = spacy.blank("en")
    kb = KnowledgeBase.from_jsonl(args.kb)
    result: Dict[str, Any] = {"kb": kb.name, "kb_names": kb.stats().names, "model": args.model,
                              "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                                          "torch_threads": torch.get_num_threads(),
                                          "cpu_native_bf16": cpu_has_native_bf16()}}
    pipes, index, first = our_pipes(nlp, kb, args, result)
    theirs, build = their_linker(kb, result, args.scispacy_index)
    result["corpora"] = [measure_corpus(nlp, path, pipes, theirs, args) for path in args.corpus]
    result["peak_rss_mb_both"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print_table(result, index, first, build, pipes)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
