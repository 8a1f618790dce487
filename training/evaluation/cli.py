"""``sapbert evaluate`` and ``sapbert evaluate-report``.

Registered on the ``sapbert`` app by :func:`spacy_sapbert.training.cli.register`.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from spacy_sapbert.errors import InputError, exit_on_input_error

logger = logging.getLogger(__name__)


def evaluate_command(
    dataset: List[str] = typer.Option(
        ..., "--dataset", "-d",
        help="ncbi-dev | ncbi-test | bc5cdr-disease-dev | bc5cdr-chemical-dev | bc5cdr-disease-test | "
             "bc5cdr-chemical-test, or a name for --corpus (repeatable)."),
    model: List[str] = typer.Option(
        ..., "--model", "-m",
        help="exact | tfidf | scispacy | a model folder or name (dense linker) | generative:MODEL | "
             "DENSE+generative:MODEL | DENSE+rerank:MODEL. Optional LABEL= prefix, @cls/@mean suffix, "
             "{dataset}/{family}/{corpus} placeholders (repeatable)."),
    kb_only: bool = typer.Option(False, "--kb-only", help="Dictionary = the KB alone (default: KB + training mentions)."),
    both: bool = typer.Option(False, "--both-dictionaries", help="Evaluate with both dictionaries."),
    as_json: bool = typer.Option(False, "--json", help="Print the full results as JSON."),
    assets: Path = typer.Option(Path("assets"), help="Folder holding corpora/ (the assets step's copy)."),
    kbs: Path = typer.Option(Path("kbs"), help="Folder holding <kb>.jsonl.gz (medic, mesh)."),
    corpus: Optional[Path] = typer.Option(None, help="Any PubTator file to evaluate (with --kb; --dataset names it)."),
    train: Optional[List[Path]] = typer.Option(None, help="PubTator file(s) whose mentions join the dictionary."),
    kb: Optional[Path] = typer.Option(None, "--kb", help="KB file for --corpus."),
    types: Optional[List[str]] = typer.Option(None, "--type", help="Only mentions of this type (with --corpus)."),
    output_dir: Optional[Path] = typer.Option(None, help="Write one JSON per result here (e.g. metrics/eval)."),
    predictions: Optional[Path] = typer.Option(None, help="Write per-query predictions (JSONL) into this folder."),
    pooling: Optional[str] = typer.Option(None, help="cls | mean for dense models (default: the model's setting)."),
    device: str = typer.Option("auto", help="Device of dense models: auto | cpu | cuda[:N]."),
    batch_size: int = typer.Option(256, help="Encoding batch size of dense models."),
    precision: str = typer.Option("float32", help="Compute precision of dense models: float32 | bfloat16 | float16 | "
                                                  "auto (the linker's default: bf16 autocast where it beats float32)."),
    skip_missing: bool = typer.Option(False, help="Leave out model folders that do not exist (yet), with a warning."),
    abbreviations: bool = typer.Option(True, help="Expand abbreviations from the abstract (the protocol)."),
    generative_weight: float = typer.Option(0.02, help="Weight of the generative score in DENSE+generative:MODEL "
                                            "(cosine + W x mean token log-probability; pick it on dev)."),
) -> None:
    """Acc@1/Acc@5 under the BioSyn/SapBERT protocol, with sub-populations, for each system and dataset."""
    from .suite import Suite

    modes = ["kb", "kb+train"] if both else (["kb"] if kb_only else ["kb+train"])
    with exit_on_input_error():
        custom = _custom_dataset(dataset, corpus, kb, train, types)
        suite = Suite(dataset, model, modes, assets_dir=assets, kbs_dir=kbs, output_dir=output_dir, pooling=pooling,
                      device=device, batch_size=batch_size, skip_missing=skip_missing,
                      expand_abbreviations=abbreviations, predictions_dir=predictions, custom=custom,
                      precision=precision, generative_weight=generative_weight)
        results = suite.run()
    if as_json:
        typer.echo(json.dumps(results, indent=1, ensure_ascii=False))
        return
    for r in results:
        typer.echo(f"{r['dataset']:<22} {r['dictionary']:<9} {r['system']:<45} Acc@1 {r['acc@1']:6.2f}  "
                   f"Acc@5 {r['acc@5']:6.2f}  (n={r['count']})")


def report_command(
    metrics_dir: Path = typer.Argument(Path("metrics/eval"), help="Folder of result JSONs (sapbert evaluate --output-dir)."),
    table: Path = typer.Option(Path("metrics/table.md"), help="Markdown table to write."),
    readme: Optional[Path] = typer.Option(None, help="Markdown page whose EVALUATION-TABLE markers get the table (docs/evaluation.md)."),
    subpopulations: Optional[Path] = typer.Option(Path("metrics/subpopulations.md"),
                                                  help="Markdown with every sub-population table."),
) -> None:
    """Render measured results (plus the quoted published figures, apart) as Markdown."""
    from .report import write_report

    with exit_on_input_error():
        write_report(metrics_dir, table, readme, subpopulations)


def _custom_dataset(dataset: List[str], corpus: Optional[Path], kb: Optional[Path], train: Optional[List[Path]],
                    types: Optional[List[str]]) -> Optional[Dict[str, Any]]:
    """The dataset ``--corpus`` describes, or None for named datasets (which bring their own files)."""
    if corpus is not None:
        if kb is None or len(dataset) != 1:
            raise InputError("--corpus needs --kb and exactly one --dataset NAME to call it", corpus)
        return {"name": dataset[0], "eval_file": corpus, "train_files": list(train or []), "kb_file": kb,
                "types": list(types) if types else None}
    if kb is not None or train or types:
        raise InputError("--kb, --train and --type go with --corpus; named datasets bring their own")
    return None


def biosyn_command(
    queries: Path = typer.Argument(..., help="A BioSyn processed_<split> folder of <PMID>.concept files."),
    dictionary: Path = typer.Option(..., "--dictionary", help="BioSyn dictionary file (CUI||name a line)."),
    model: str = typer.Option("sapbert-default", "--model", "-m", help="Model folder or name to evaluate."),
    scoring: List[str] = typer.Option(["cosine", "dot"], "--scoring", help="cosine (as the linker ranks) and/or dot "
                                      "(raw inner product of pooled vectors, as SapBERT's eval.py ranks); repeatable."),
    top: int = typer.Option(5, "--top", help="Report Acc@1..N."),
    precision: str = typer.Option("float32", help="Compute precision: float32 | bfloat16 | float16 | auto."),
    device: str = typer.Option("auto", help="auto | cpu | cuda[:N] | mps."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the result (JSON) here."),
    sparse_weight: Optional[List[str]] = typer.Option(
        None, "--sparse-weight", help="Hybrid first stage (BioSyn): rank the union of the dense and the character "
        "n-gram TF-IDF top candidates by cosine + W x sparse cosine; repeatable, or a comma-separated list."),
    sparse_scheme: Optional[List[str]] = typer.Option(
        None, "--sparse-scheme", help="Character n-grams of the sparse scores, ANALYZER:MIN-MAX (char:1-2, BioSyn's; "
        "char_wb:3-3 ...); repeatable."),
    candidates: int = typer.Option(20, "--candidates", help="Dense and sparse candidates each, for the hybrid."),
    tune_on: Optional[Path] = typer.Option(
        None, "--tune-on", help="A dev processed_<split> folder: choose the scheme and weight of best Acc@1 there "
        "(default weights 0..2) and report only that choice here."),
    tune_dictionary: Optional[Path] = typer.Option(None, "--tune-dictionary", help="The dictionary of --tune-on."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """Acc@k on BioSyn-format data, scored exactly as SapBERT's evaluation/utils.py scores it."""
    from spacy_sapbert.formats.biosyn import read_dictionary, read_queries
    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.util.atomic import atomic_write_text, check_new_file

    from .biosyn import best_hybrid, score

    with exit_on_input_error():
        if output is not None:
            check_new_file(output, overwrite, [p for p in (queries, dictionary, tune_on, tune_dictionary, Path(model))
                                               if p])
        weights, schemes = _hybrid_options(sparse_weight, sparse_scheme, tune_on, tune_dictionary)
        parsed = read_queries(queries)
        names, cuis = read_dictionary(dictionary)
        encoder = Encoder(model, device=device, dtype=precision)
        tuning: Dict[str, Any] = {}
        if tune_on is not None and tune_dictionary is not None:
            tune_queries = read_queries(tune_on)
            tuned = score(encoder, tune_queries, *read_dictionary(tune_dictionary), scorings=["cosine"], k=top,
                          sparse_weights=weights, sparse_schemes=schemes, candidates=candidates)
            chosen = best_hybrid(tuned["hybrid"])
            tuning = {"tuning": {"queries": str(tune_on), "n_queries": len(tune_queries),
                                 "dictionary": str(tune_dictionary), "sparse": chosen["sparse"],
                                 "sparse_weight": chosen["sparse_weight"], "cosine": tuned["cosine"],
                                 "hybrid": tuned["hybrid"]}}
            weights = [chosen["sparse_weight"]]
            schemes = [s for s in schemes if s.label() == chosen["sparse"]]
        results = score(encoder, parsed, names, cuis, scorings=scoring, k=top, sparse_weights=weights,
                        sparse_schemes=schemes, candidates=candidates)
    record = json.dumps({"queries": str(queries), "n_queries": len(parsed), "dictionary": str(dictionary),
                         "names": len(names), "model": model, "precision": precision, **results, **tuning})
    if output is not None:
        atomic_write_text(output, record + "\n")
    typer.echo(record)


def _hybrid_options(weights: Optional[List[str]], schemes: Optional[List[str]], tune_on: Optional[Path],
                    tune_dictionary: Optional[Path]) -> tuple[List[float], List[Any]]:
    """The sparse weights and n-gram schemes asked for (the default grid when tuning without weights)."""
    import math

    from spacy_sapbert.index.char_ngrams import CharNgramSettings

    from .biosyn import DEFAULT_WEIGHTS

    if (tune_on is None) != (tune_dictionary is None):
        raise InputError("--tune-on and --tune-dictionary go together", tune_on or tune_dictionary)
    try:
        values = [float(w) for spec in weights or [] for w in spec.split(",") if w.strip()]
    except ValueError as err:
        raise InputError(f"sparse weights are numbers ({err})", field="--sparse-weight") from err
    if not values and tune_on is not None:
        values = list(DEFAULT_WEIGHTS)
    if any(not math.isfinite(w) or w < 0 for w in values):
        raise InputError(f"sparse weights must be finite and >= 0, got {values}", field="--sparse-weight")
    if schemes and not values:
        raise InputError("--sparse-scheme needs --sparse-weight or --tune-on", field="--sparse-scheme")
    parsed = [CharNgramSettings.parse(part) for spec in schemes or ["char:1-2"] for part in spec.split(",") if part]
    return values, parsed


def register(app: typer.Typer) -> None:
    """Add ``evaluate``, ``evaluate-biosyn`` and ``evaluate-report`` to the ``sapbert`` app."""
    app.command("evaluate")(evaluate_command)
    app.command("evaluate-biosyn")(biosyn_command)
    app.command("evaluate-report")(report_command)
    from .calibrate_cli import calibrate_command

    app.command("calibrate")(calibrate_command)
