"""Measured results (``metrics/eval/*.json``) → the Markdown table docs/evaluation.md includes.

Measured numbers come only from result files; published numbers live in
:data:`PUBLISHED`, each with where it was read, and are printed in a separate, labelled
table — never in a cell of the measured one, because they were measured on other
dictionaries (UMLS, BioSyn's processed files), other splits (BC5CDR test) or both.
"""
from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError

from .datasets import DEFAULT_DATASETS

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
START = "<!-- EVALUATION-TABLE:START -->"
END = "<!-- EVALUATION-TABLE:END -->"
MODE_TITLES = OrderedDict([
    ("kb+train", "Dictionary = KB + training mentions (BioSyn's test dictionary, the papers' protocol)"),
    ("kb", "Dictionary = KB alone (what a user without annotated data has)"),
])
DATASET_TITLES = {
    "ncbi-dev": "NCBI dev", "ncbi-test": "NCBI test", "bc5cdr-disease-dev": "BC5CDR-D dev",
    "bc5cdr-chemical-dev": "BC5CDR-C dev", "bc5cdr-disease-test": "BC5CDR-D test",
    "bc5cdr-chemical-test": "BC5CDR-C test",
}
SUBPOPULATION_DATASET = "ncbi-test"

# Quoted, not measured here. (system, dataset as the source names it, Acc@1, Acc@5 or None, source)
PUBLISHED: List[Tuple[str, str, float, Optional[float], str]] = [
    ("SapBERT (PubMedBERT + UMLS 2020AA, no fine-tuning)", "NCBI test", 92.3, None,
     "Liu et al., NAACL 2021, as listed at wizwand.com/paper/68fa69ae1e209131cea23553 (Papers-with-Code data)"),
    ("BioSyn (BioBERT v1.1, released model)", "NCBI test", 91.1, 93.9, "github.com/dmis-lab/BioSyn README"),
    ("BioSyn (BioBERT v1.1, released model)", "BC5CDR-D test", 93.2, 96.0, "github.com/dmis-lab/BioSyn README"),
    ("BioSyn (BioBERT v1.1, released model)", "BC5CDR-C test", 96.6, 97.2, "github.com/dmis-lab/BioSyn README"),
    ("BioSyn (SapBERT init, released model)", "NCBI test", 92.4, 95.8, "github.com/dmis-lab/BioSyn README"),
    ("BioSyn (SapBERT init, released model)", "BC5CDR-D test", 93.5, 96.4, "github.com/dmis-lab/BioSyn README"),
    ("BioSyn (SapBERT init, released model)", "BC5CDR-C test", 96.6, 98.3, "github.com/dmis-lab/BioSyn README"),
    ("GenBioEL (pre-trained + fine-tuned)", "NCBI test", 91.0, None,
     "as re-reported in the dmis-lab/ANGEL_pretrained model card (Kim et al. 2024)"),
    ("GenBioEL (pre-trained + fine-tuned)", "BC5CDR test (their setting)", 93.1, None,
     "as re-reported in the dmis-lab/ANGEL_pretrained model card (Kim et al. 2024)"),
]


def load_results(folder: PathLike) -> List[Dict[str, Any]]:
    """Every result JSON of ``folder`` (not the run summaries), oldest run first."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("metrics folder not found (run `sapbert evaluate ... --output-dir` first)", folder)
    results = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise InputError(f"invalid JSON: {err.msg}", path, err.lineno) from err
        if not isinstance(data, dict) or not {"dataset", "dictionary", "system", "acc@1"} <= set(data):
            raise InputError("not an evaluation result (needs dataset, dictionary, system, acc@1)", path)
        results.append(data)
    results.sort(key=lambda r: (r.get("run_started", ""), r.get("system_spec", {}).get("order", 0)))
    return results


def load_runs(folder: PathLike) -> List[Dict[str, Any]]:
    runs_dir = Path(folder) / "runs"
    if not runs_dir.is_dir():
        return []
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(runs_dir.glob("*.json"))]


def _fmt(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.1f}"


def _systems(results: Sequence[Dict[str, Any]]) -> List[str]:
    return list(dict.fromkeys(r["system"] for r in results))


def _datasets(results: Sequence[Dict[str, Any]]) -> List[str]:
    present = {r["dataset"] for r in results}
    ordered = [d for d in DEFAULT_DATASETS if d in present]
    return ordered + sorted(present - set(ordered))


def main_table(results: Sequence[Dict[str, Any]], mode: str) -> str:
    """Systems × datasets, Acc@1 / Acc@5, for one dictionary mode."""
    rows = [r for r in results if r["dictionary"] == mode]
    if not rows:
        return ""
    datasets = _datasets(rows)
    cell = {(r["system"], r["dataset"]): r for r in rows}
    head = "| System | " + " | ".join(f"{DATASET_TITLES.get(d, d)} Acc@1 / @5" for d in datasets) + " |"
    lines = [head, "|---|" + "---:|" * len(datasets)]
    for system in _systems(rows):
        cells = []
        for d in datasets:
            r = cell.get((system, d))
            cells.append("not run" if r is None else f"{_fmt(r['acc@1'])} / {_fmt(r['acc@5'])}")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    counts = []
    for d in datasets:
        r = next(x for x in rows if x["dataset"] == d)
        cov = r["coverage"]
        counts.append(f"{DATASET_TITLES.get(d, d)}: {r['count']} queries "
                      f"({r['queries']['composite']} composite, {r['queries']['abbreviation_expanded']} with an "
                      f"abbreviation expanded), gold IDs in the KB {cov['gold_ids_in_kb']}/{cov['gold_ids']} "
                      f"({_fmt(cov['gold_ids_in_kb_pct'])}%), queries whose gold the KB has "
                      f"{_fmt(cov['queries_with_gold_in_kb_pct'])}%, dictionary {r['dictionary_info']['concepts']} "
                      f"concepts / {r['dictionary_info']['names']} names")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {c}" for c in counts) + "\n"


def subpopulation_table(results: Sequence[Dict[str, Any]], dataset: str, mode: str) -> str:
    """Acc@1 per sub-population (its size in the header) for one dataset and mode."""
    rows = [r for r in results if r["dataset"] == dataset and r["dictionary"] == mode]
    if not rows:
        return ""
    groups = list(rows[0]["subpopulations"])
    head = "| System | " + " | ".join(f"{g} (n={rows[0]['subpopulations'][g]['count']})" for g in groups) + " |"
    lines = [head, "|---|" + "---:|" * len(groups)]
    for r in rows:
        lines.append(f"| {r['system']} | " + " | ".join(_fmt(r["subpopulations"][g]["acc@1"]) for g in groups) + " |")
    return "\n".join(lines) + "\n"


def published_table() -> str:
    lines = ["| System (quoted, not measured here) | Dataset as published | Acc@1 | Acc@5 | Source |",
             "|---|---|---:|---:|---|"]
    for system, dataset, acc1, acc5, source in PUBLISHED:
        lines.append(f"| {system} | {dataset} | {_fmt(acc1)} | {_fmt(acc5)} | {source} |")
    return "\n".join(lines) + "\n"


def render(results: Sequence[Dict[str, Any]], runs: Sequence[Dict[str, Any]] = ()) -> str:
    """The whole Markdown block: measured tables, sub-populations, runs, then quoted figures."""
    if not results:
        raise InputError("no evaluation results to render")
    parts = ["### Measured here (Acc@1 / Acc@5, %, over concepts)\n"]
    for mode, title in MODE_TITLES.items():
        table = main_table(results, mode)
        if table:
            parts.append(f"**{title}**\n\n{table}")
    for mode, title in MODE_TITLES.items():
        table = subpopulation_table(results, SUBPOPULATION_DATASET, mode)
        if table:
            parts.append(f"**Sub-populations, {DATASET_TITLES[SUBPOPULATION_DATASET]}, Acc@1 — {title}**\n\n{table}")
    if runs:
        lines = ["**Runs that produced these numbers**\n"]
        for run in runs:
            machine = run.get("machine", {})
            lines.append(f"- `{run['command']}` — started {run['started']}, {run['results']} results, wall time "
                         f"{run['wall_seconds'] / 60:.1f} min on {machine.get('cpus_available')} CPU core(s)"
                         + (f" (nice {machine['nice']})" if machine.get("nice") else "")
                         + (f"; skipped (not present): {', '.join(s['model'] for s in run['skipped'])}"
                            if run.get("skipped") else ""))
        parts.append("\n".join(lines) + "\n")
    parts.append("### Published figures (quoted, not measured here; other dictionaries and splits)\n\n"
                 + published_table())
    return "\n".join(parts)


def all_subpopulations(results: Sequence[Dict[str, Any]]) -> str:
    """Every dataset × mode sub-population table (for metrics/subpopulations.md)."""
    parts = ["# Sub-populations (Acc@1, %; n = queries in the group)\n"]
    for dataset in _datasets(results):
        for mode, title in MODE_TITLES.items():
            table = subpopulation_table(results, dataset, mode)
            if table:
                parts.append(f"## {DATASET_TITLES.get(dataset, dataset)} — {title}\n\n{table}")
    return "\n".join(parts)


def splice(readme: PathLike, block: str) -> Path:
    """Replace what lies between the START/END markers of ``readme`` with ``block``."""
    readme = Path(readme)
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise InputError(f"markers {START} / {END} not found", readme)
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    readme.write_text(pattern.sub(lambda _: f"{START}\n{block.rstrip()}\n{END}", text, count=1), encoding="utf-8")
    return readme


def write_report(metrics_dir: PathLike, table: PathLike, readme: Optional[PathLike] = None,
                 subpopulations: Optional[PathLike] = None) -> str:
    """Render the results of ``metrics_dir`` into ``table`` (and the page with the markers, and the sub-population file)."""
    results = load_results(metrics_dir)
    block = render(results, load_runs(metrics_dir))
    Path(table).parent.mkdir(parents=True, exist_ok=True)
    Path(table).write_text(block, encoding="utf-8")
    if subpopulations:
        Path(subpopulations).write_text(all_subpopulations(results), encoding="utf-8")
    if readme:
        splice(readme, block)
    logger.info("wrote %s from %d results%s", table, len(results), f" and updated {readme}" if readme else "")
    return block


__all__ = ["PUBLISHED", "load_results", "render", "splice", "write_report"]
