"""Write the model card's metrics section from the evaluation results (metrics/eval/*.json)
and the NER scores (metrics/ner.json): `python scripts/card_metrics.py -o metrics/default_card.md`."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

DATASETS = [("ncbi-dev", "NCBI dev"), ("ncbi-test", "NCBI test"), ("bc5cdr-disease-dev", "BC5CDR-D dev"),
            ("bc5cdr-chemical-dev", "BC5CDR-C dev")]
SYSTEMS = ["ours, fine-tuned (default)", "all-MiniLM-L6-v2 (mean pooling)", "scispaCy candidate generator"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=Path("metrics/eval"))
    parser.add_argument("--ner", type=Path, default=Path("metrics/ner.json"))
    parser.add_argument("--learnt-from", action="append", default=[], metavar="CORPUS",
                        help="A corpus of the NER report the NER learnt from (e.g. 'NCBI dev'): its rows are left out.")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    results = {}
    for path in args.eval_dir.glob("*.json"):
        r = json.loads(path.read_text(encoding="utf-8"))
        if "dataset" in r:
            results[(r["system"], r["dataset"], r["dictionary"])] = r
    lines = ["## Metrics", "",
             "Linking, Acc@1 / Acc@5 on gold mentions (BioSyn/SapBERT protocol; `spacy project run evaluate`; "
             "the linker there uses each dataset's KB, MEDIC or MeSH, with exact search):", ""]
    for mode, title in (("kb", "KB alone"), ("kb+train", "KB + training mentions")):
        lines += [f"**{title}**", "", "| system | " + " | ".join(n for _, n in DATASETS) + " |",
                  "|---|" + "---:|" * len(DATASETS)]
        for system in SYSTEMS:
            cells = []
            for key, _ in DATASETS:
                r = results.get((system, key, mode))
                cells.append(f"{r['acc@1']:.1f} / {r['acc@5']:.1f}" if r else "—")
            lines.append(f"| {system} | " + " | ".join(cells) + " |")
        lines.append("")
    if args.ner.is_file():
        ner = json.loads(args.ner.read_text(encoding="utf-8"))
        lines += ["NER (exact character spans, `spacy project run ner-evaluate`):", "",
                  "| corpus | label | P | R | F1 |", "|---|---|---:|---:|---:|"]
        for report in ner["reports"]:
            if report["corpus"] in args.learnt_from:
                continue
            for label, s in report["scores"].items():
                lines.append(f"| {report['corpus']} | {label} | {s['p']:.2f} | {s['r']:.2f} | {s['f']:.2f} |")
        lines.append("")
        if args.learnt_from:
            lines += [f"Not shown: {', '.join(args.learnt_from)}, whose gold the NER learnt from.", ""]
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
