"""What the embedded default's compressed index costs against exact search, with and without
exact re-scoring (``rescore_gap``), on gold spans linked through the whole pipeline.

Each gold span of each PubTator corpus goes through the pipeline's own abbreviation step and
``sapbert_linker`` with its gold label (:func:`training.evaluation.abstention.link_gold_spans`,
threshold and calibration off), once per configuration, in one run on one machine:

- ``exact``: a flat index of the same encoder and KB (``sapbert index build --kind flat``);
- ``pq``: the shipped PQ index, scores as its codes give them;
- ``pq+rescore@G``: the shipped index with ``rescore_gap = G``;
- when the shipped index has refinement codes (``refine_m``, :mod:`spacy_sapbert.index.refine`), the same
  two again without them (``pq-codes-only``, ``pq-codes-only+rescore@G``): what the codes add.

It prints Acc@1 per corpus, the cost against ``exact``, the names encoded per distinct mention,
and the wall time of each configuration as a ratio to ``exact``'s.

    python benchmarks/index_rescore.py --exact-index models/index-mesh-medic-flat \\
        --corpus assets/corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt \\
        --corpus assets/corpora/ncbi-disease/NCBIdevelopset_corpus.txt --gap 0.05 --gap 0.1 \\
        --output metrics/benchmarks/index-rescore-dev.json
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spacy_sapbert.index.name_index import NameIndex  # noqa: E402
from training.evaluation.abstention import link_gold_spans  # noqa: E402


def measure(nlp: Any, corpora: List[Path], index: NameIndex, gap: Optional[float]) -> Dict[str, Any]:
    pipe = nlp.get_pipe("sapbert_linker")
    pipe.use(pipe.linker.encoder, pipe.kb, index)
    pipe.configure(rescore_gap=gap)
    row: Dict[str, Any] = {}
    started = time.perf_counter()
    for corpus in corpora:
        before = pipe.linker.cache_info()
        spans = link_gold_spans(nlp, corpus)
        after = pipe.linker.cache_info()
        names, mentions = after["names_encoded"] - before["names_encoded"], after["misses"] - before["misses"]
        row[corpus.name] = {"spans": len(spans), "acc1": 100 * sum(s.correct for s in spans) / max(len(spans), 1),
                            "names_per_mention": names / max(mentions, 1)}
    row["seconds"] = time.perf_counter() - started
    return row


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exact-index", type=Path, required=True, help="Flat index of the default's encoder and KB.")
    parser.add_argument("--corpus", type=Path, action="append", required=True, help="PubTator file (repeatable).")
    parser.add_argument("--gap", type=float, action="append", default=[], help="rescore_gap to measure (repeatable).")
    parser.add_argument("--pipeline", default="default", help="'default' or a saved pipeline folder.")
    parser.add_argument("--output", type=Path, help="JSON report to write.")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    import spacy

    import spacy_sapbert

    nlp = spacy_sapbert.load() if args.pipeline == "default" else spacy.load(args.pipeline)
    pipe = nlp.get_pipe("sapbert_linker")
    shipped = pipe.linker.index
    exact = NameIndex.load(args.exact_index, encoder=pipe.linker.encoder, kb=pipe.kb)
    variants = [(shipped.kind, shipped)]
    if shipped.refine_codes is not None:
        variants.append((f"{shipped.kind}-codes-only", shipped.with_refine_codes(None, 0)))
    configs = [("exact", exact, None)]
    for label, index in variants:
        configs += [(label, index, None)] + [(f"{label}+rescore@{gap:g}", index, gap) for gap in args.gap]
    results = {name: measure(nlp, args.corpus, index, gap) for name, index, gap in configs}
    base = results["exact"]
    print(f"{'configuration':<28}" + "".join(f"{c.name[:24]:>28}" for c in args.corpus) + f"{'time':>10}")
    for name, row in results.items():
        cells = "".join(f"{row[c.name]['acc1']:>9.2f} ({row[c.name]['acc1'] - base[c.name]['acc1']:+.2f}) "
                        f"{row[c.name]['names_per_mention']:>5.1f} n/m    " for c in args.corpus)
        print(f"{name:<28}{cells}{row['seconds'] / base['seconds']:>8.2f}x")
    report = {"pipeline": args.pipeline, "exact_index": str(args.exact_index), "results": results}
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
