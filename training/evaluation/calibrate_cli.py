"""``sapbert calibrate``: fit a pipeline's score calibration and abstention threshold on gold spans.

Registered on the ``sapbert`` app by :func:`spacy_sapbert.training.evaluation.cli.register`.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError, exit_on_input_error

logger = logging.getLogger(__name__)


def calibrate_command(
    corpus: Path = typer.Argument(..., help="PubTator file with gold spans (e.g. BC5CDR dev; tune on dev only)."),
    pipeline: str = typer.Option("default", "--pipeline", help="'default', a saved pipeline folder or a package."),
    min_precision: float = typer.Option(0.95, help="Precision of linked mentions the threshold must reach."),
    report: Path = typer.Option(..., "--report", help="JSON report to write (threshold, coverage, reliability curve)."),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the pipeline with the calibration and the "
                                                                 "threshold here (a new or empty folder)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --report when it exists (never a file read)."),
) -> None:
    """Fit P(right link) from (cosine, margin) on the corpus's gold spans, choose the lowest threshold whose
    links reach --min-precision, and report what it costs in coverage."""
    from spacy_sapbert.pipes.loading import load_pipeline
    from spacy_sapbert.util.atomic import atomic_write_text, check_new_file

    from .abstention import apply_calibration, fit_and_report, link_gold_spans

    with exit_on_input_error():
        if not 0 < min_precision < 1:
            raise InputError(f"must be between 0 and 1, got {min_precision}", field="--min-precision")
        if output is not None and output.exists() and any(output.iterdir()):
            raise InputError("exists and is not empty: choose a new folder (nothing is overwritten)", output,
                             field="--output")
        check_new_file(report, overwrite, [corpus, Path(pipeline)], option="--report")
        nlp = load_pipeline(pipeline, None)
        linker = nlp.get_pipe(LINKER_PIPE)
        # a calibrated pipeline's own threshold gets its row in the curve: what it keeps as it is
        # (and each label's own threshold, a row of that label's spans)
        calibrated = linker.calibration is not None
        configured = [linker.threshold] if linker.threshold is not None and calibrated else []
        own = {k: v for k, v in (linker.label_thresholds or {}).items() if v is not None} if calibrated else {}
        spans = link_gold_spans(nlp, corpus)
        calibration, result = fit_and_report(spans, min_precision, f"{corpus.name}: {len(spans)} gold spans",
                                             also_at=configured, label_thresholds=own)
        result["pipeline"] = pipeline
        atomic_write_text(report, json.dumps(result, indent=1) + "\n")
        logger.info("threshold %.4f: precision %.2f%%, coverage %.2f%% of %d spans (cross-validated: %.2f%% / "
                    "%.2f%%); report in %s", result["threshold"], 100 * result["precision"], 100 * result["coverage"],
                    result["spans"], 100 * result["cross_validated"]["precision"],
                    100 * result["cross_validated"]["coverage"], report)
        if output is not None:
            import spacy

            from spacy_sapbert.default import default_pipeline_path

            location = default_pipeline_path() if pipeline == "default" else pipeline
            calibrated = spacy.load(location)
            apply_calibration(calibrated, calibration, result["threshold"])
            calibrated.to_disk(output)
            logger.info("calibrated pipeline written to %s", output)
