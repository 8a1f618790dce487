"""Documents per second of the default pipeline with each NER, side by side in one process.

Each variant is the embedded default pipeline (tokenizer → NER → abbreviations → linker) with
its NER components replaced by those of a trained NER pipeline (``--variant LABEL=FOLDER``;
``LABEL=default`` keeps the shipped NER), or a whole saved pipeline as it is
(``--variant LABEL=pipeline:FOLDER``: the default before and after a change, say), or the default with
its NER in another precision (``--variant LABEL=precision:int8``). Every round runs each variant over the same raw
documents, in turn, with and without the linker; the median of the rounds is reported, with the
ratio against the first variant (the baseline). The machine is the same for all variants, so
the ratios hold even when other work slows every round. The linker's candidate cache is cleared
before each run, so no run profits from mentions an earlier one linked.

    python benchmarks/ner_speed.py --corpus assets/corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt \\
        --docs 200 --variant tok2vec=default --variant transformer=training_runs/ner-tagger/model-best \\
        --output metrics/benchmarks/ner-speed.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List

NER_COMPONENTS = ("tok2vec", "ner", "sapbert_ner")


def with_ner(ner_folder: str) -> Any:
    """The default pipeline, its NER swapped for the one in ``ner_folder`` ("default": unchanged), the
    pipeline saved in FOLDER for ``pipeline:FOLDER``, or the default's NER in ``PRECISION`` for
    ``precision:PRECISION``."""
    import spacy
    import spacy_sapbert

    if ner_folder.startswith("pipeline:"):
        return spacy.load(ner_folder[len("pipeline:"):])
    if ner_folder.startswith("precision:"):
        return spacy_sapbert.load(config={"components": {"sapbert_ner": {"precision": ner_folder[len("precision:"):]}}})
    nlp = spacy_sapbert.load()
    if ner_folder == "default":
        return nlp
    source = spacy.load(ner_folder)
    for name in [n for n in nlp.pipe_names if n in NER_COMPONENTS]:
        nlp.remove_pipe(name)
    previous = None
    for name in [n for n in source.pipe_names if n in NER_COMPONENTS]:
        if previous is None:
            nlp.add_pipe(name, source=source, first=True)
        else:
            nlp.add_pipe(name, source=source, after=previous)
        previous = name
    return nlp


def timed(nlp: Any, texts: List[str], linker: bool) -> Dict[str, float]:
    disabled = [] if linker else ["sapbert_linker"]
    if linker:  # every run links every mention from scratch, as a first pass over new text would
        nlp.get_pipe("sapbert_linker").linker.clear_cache()
    with nlp.select_pipes(disable=disabled):
        start = time.perf_counter()
        docs = list(nlp.pipe(texts, batch_size=32))
        seconds = time.perf_counter() - start
    return {"docs_per_s": len(texts) / seconds, "entities": sum(len(d.ents) for d in docs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, type=Path, help="PubTator file whose texts are annotated")
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variant", action="append", required=True, help="LABEL=NER_PIPELINE_FOLDER, LABEL=default, LABEL=pipeline:FOLDER or LABEL=precision:PRECISION")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    import torch

    from spacy_sapbert.training.corpora import read_pubtator

    texts = [d.text for d in read_pubtator(args.corpus)][:args.docs]
    variants = dict(item.partition("=")[::2] for item in args.variant)
    pipelines = {label: with_ner(folder) for label, folder in variants.items()}
    for nlp in pipelines.values():  # warm-up: first calls build caches and pick kernels
        list(nlp.pipe(texts[:8]))
    rounds: Dict[str, Dict[str, List[Dict[str, float]]]] = {
        label: {"pipeline": [], "ner_only": []} for label in variants}
    for _ in range(args.rounds):
        for label, nlp in pipelines.items():
            rounds[label]["pipeline"].append(timed(nlp, texts, linker=True))
            rounds[label]["ner_only"].append(timed(nlp, texts, linker=False))
    baseline = next(iter(variants))
    result: Dict[str, Any] = {"corpus": str(args.corpus), "docs": len(texts), "rounds": args.rounds,
                              "torch_threads": torch.get_num_threads(), "variants": {}}
    print(f"{len(texts)} documents of {args.corpus.name}, median of {args.rounds} rounds, "
          f"{torch.get_num_threads()} torch threads")
    print(f"{'variant':<14} {'pipeline docs/s':>16} {'ratio':>6} {'NER only docs/s':>16} {'ratio':>6} {'entities':>9}")
    medians = {label: {kind: statistics.median(r["docs_per_s"] for r in runs)
                       for kind, runs in rounds[label].items()} for label in variants}
    for label in variants:
        m, b = medians[label], medians[baseline]
        entities = rounds[label]["pipeline"][0]["entities"]
        result["variants"][label] = {"ner": variants[label], "pipeline": pipelines[label].pipe_names,
                                     "pipeline_docs_per_s": round(m["pipeline"], 2),
                                     "ner_only_docs_per_s": round(m["ner_only"], 2), "entities": entities,
                                     "pipeline_ratio": round(m["pipeline"] / b["pipeline"], 3),
                                     "ner_only_ratio": round(m["ner_only"] / b["ner_only"], 3)}
        print(f"{label:<14} {m['pipeline']:>16.1f} {m['pipeline'] / b['pipeline']:>6.2f} {m['ner_only']:>16.1f} "
              f"{m['ner_only'] / b['ner_only']:>6.2f} {entities:>9}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
