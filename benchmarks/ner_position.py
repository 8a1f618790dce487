"""Does the NER tag a text the same wherever it sits in a longer document? (issue 32, item 6)

Builds the issue's document: the 8 example abstracts joined by blank lines, that block repeated
``--copies`` times (135: about 200k characters), runs the pipeline on it once and on the block
alone, and counts the copies whose entities (offsets relative to the copy, label, and with the
linker, concept) differ from the block's. Prints one JSON line; exit status 1 if any copy differs.

    python benchmarks/ner_position.py --copies 135 [--with-linker]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def entities(doc, start: int, end: int, linked: bool) -> list:
    return [(e.start_char - start, e.end_char - start, e.label_) + ((e.kb_id_,) if linked else ())
            for e in doc.ents if start <= e.start_char and e.end_char <= end]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=135)
    parser.add_argument("--separator", default="\n\n", help="between copies (default: a blank line)")
    parser.add_argument("--with-linker", action="store_true", help="compare concepts too (slower)")
    args = parser.parse_args()
    import spacy

    from spacy_sapbert.default import DEFAULT_PIPELINE

    exclude = [] if args.with_linker else ["sapbert_linker"]
    nlp = spacy.load(DEFAULT_PIPELINE, exclude=exclude)
    texts = [json.loads(line)["text"] for line in (REPO / "examples" / "abstracts.jsonl").read_text().splitlines()]
    block = "\n\n".join(texts)
    alone = entities(nlp(block), 0, len(block), args.with_linker)
    document = args.separator.join([block] * args.copies)
    started = time.perf_counter()
    doc = nlp(document)
    seconds = time.perf_counter() - started
    differing, changes = 0, Counter()
    step = len(block) + len(args.separator)
    for copy in range(args.copies):
        got = entities(doc, copy * step, copy * step + len(block), args.with_linker)
        if got != alone:
            differing += 1
            for ent in set(got) ^ set(alone):
                changes[("extra " if ent in got else "missing ") + repr(block[ent[0]:ent[1]])] += 1
    print(json.dumps({"characters": len(document), "copies": args.copies, "entities_per_copy": len(alone),
                      "copies_differing": differing, "seconds": round(seconds, 1),
                      "most_common_changes": changes.most_common(8)}))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
