"""The self-alignment loop (SapBERT, Liu et al. 2021) on top of Hugging Face accelerate.

A batch is ``batch_size`` positive pairs; both names of every pair go through the same
encoder, pooled as the linker pools (:func:`spacy_sapbert.encoding.pooling.pool`), and the loss is
:class:`~.loss.SelfAlignmentLoss` over the batch.

Several processes (GPUs or CPU workers) run through ``accelerate launch``; ``batch_size``
is per process and each process mines within its own batch, as DDP training of metric
losses usually does. The data order is a pure function of (seed, epoch, step)
(:class:`~.plan.BatchPlan`), which is what makes ``resume`` exact: a resumed run computes
bit-for-bit the steps an uninterrupted run would have (same batches, optimiser and
scheduler state, dropout RNG).

The pieces live beside this module: settings (``config``), device and precision
(``hardware``), the base model (``basemodel``), pairs (``data``), the data order (``plan``),
the objective (``loss``), optimiser and schedule (``schedule``), stopping (``signals``),
reporting (``progress``), checkpoints (``checkpoint``) and the model folder (``export``).
"""
from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.encoding.pooling import check_pooling, pool

from . import export
from ..common.basemodel import base_model_settings, fix_output_norm, freeze_word_embeddings, load_base_model
from .config import TrainConfig, resume_identity
from .data import TrainingPairs
from ..common.hardware import make_accelerator
from .loss import SelfAlignmentLoss
from ..common.plan import BatchPlan
from ..common.progress import ProgressLog
from ..common.schedule import make_optimizer, make_scheduler
from ..common.signals import StopOnSignal
from ..common.runstate import CheckpointedRun, RunResult
from ..common.step import accumulated_step

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]


@dataclass
class TrainResult(RunResult):
    pairs_per_s: float = 0.0
    last_loss: float = float("nan")


class Trainer(CheckpointedRun):
    """One training run: pairs file + base model → HF model folder, with checkpoints in ``run_dir``."""

    def __init__(self, config: TrainConfig, pairs_path: PathLike, output: Optional[PathLike], run_dir: PathLike,
                 accelerator: Any = None) -> None:
        config.validate()
        self.config = config
        self.output = Path(output) if output is not None else None
        self.run_dir = Path(run_dir)
        self.device, self.accelerator = make_accelerator(config.device, config.amp, config.num_threads, accelerator)
        self.rank = self.accelerator.process_index
        self.world = self.accelerator.num_processes
        self.data = TrainingPairs.load(pairs_path)
        self.plan = BatchPlan(len(self.data), config.batch_size, config.grad_accum, self.world, config.seed)
        if self.plan.steps_per_epoch == 0:
            raise InputError(f"{len(self.data)} pairs are fewer than one optimiser step needs "
                             f"({self.plan.pairs_per_step} = batch_size × grad_accum × processes); "
                             f"lower --batch-size", self.data.path)
        self.total_steps = config.max_steps or config.epochs * self.plan.steps_per_epoch

        random.seed(config.seed + self.rank)
        torch.manual_seed(config.seed + self.rank)
        model, self.tokenizer, self.base_path = load_base_model(config.base_model)
        self.base_settings = base_model_settings(self.base_path)
        if config.fixed_output_norm:
            logger.info("output norm fixed: %s pinned to the identity", fix_output_norm(model))
        if config.freeze_embeddings:
            logger.info("word-piece table frozen (%d entries)", freeze_word_embeddings(model))
        self.pooling = check_pooling(config.pooling or self.base_settings.get("pooling") or "cls")
        config.pooling = self.pooling
        optimizer = make_optimizer(model, config, exempt_norms=False)  # SapBERT's recipe decays every weight
        self.scheduler = make_scheduler(optimizer, config, self.total_steps)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.loss_fn = SelfAlignmentLoss(config)
        self.identity = resume_identity(config, self.data.fingerprint, self.world, self.total_steps)
        self.step = 0
        self.history: List[Dict[str, float]] = []
        self.elapsed_before = 0.0  # wall time of earlier sessions of a resumed run
        self._session_start = time.perf_counter()

    # -- one step ---------------------------------------------------------------------------
    def embed(self, names: Sequence[str]) -> torch.Tensor:
        """Pooled embeddings of ``names`` from the model in its current mode."""
        if not names:
            raise ValueError("empty batch: no names to encode")
        batch = self.tokenizer(list(names), padding=True, truncation=True, max_length=self.config.max_length,
                               return_tensors="pt").to(self.accelerator.device)
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch.get("token_type_ids"))
        return pool(out.last_hidden_state, batch["attention_mask"], self.pooling)

    def batch_loss(self, indices: Sequence[int]) -> Tuple[torch.Tensor, float]:
        """Loss of one micro-batch of pairs: both sides in one forward pass, labels twice."""
        names, labels = self.data.batch(indices)
        embeddings = self.embed(names)
        return self.loss_fn(embeddings, labels.to(embeddings.device))

    def _train_step(self) -> Tuple[float, float]:
        cfg = self.config
        micro_batches = [self.plan.indices(self.step, micro, self.rank) for micro in range(cfg.grad_accum)]
        result = accumulated_step(self.accelerator, self.model, self.optimizer, self.scheduler, micro_batches,
                                  self.batch_loss, cfg.max_grad_norm)
        self.step += 1
        return result

    # -- checkpoints ---------------------------------------------------------------------------
    # -- the loop -------------------------------------------------------------------------------
    def train(self, resume: bool = False, on_step: Optional[Callable[["Trainer"], None]] = None) -> TrainResult:
        """Run to ``total_steps`` (or until Ctrl-C), checkpointing every ``checkpoint_every`` steps.

        ``resume``: continue from the newest checkpoint in ``run_dir`` (a fresh start when
        there is none). Without it, existing checkpoints are an error rather than being
        silently mixed with a new run.
        """
        cfg, acc = self.config, self.accelerator
        if self.output is not None:
            export.check_output(self.output, starts_from=str(self.base_path))  # before hours of training, not after
        self._start(resume)
        started = self._session_start = time.perf_counter()
        progress = ProgressLog(self.run_dir / "log.jsonl", cfg.log_every, self.total_steps, self.step,
                               self.plan.pairs_per_step, self.history, is_main=acc.is_main_process,
                               show_bar=acc.is_local_main_process, started=started)
        last_loss, last_ckpt = math.nan, None
        with StopOnSignal(acc) as stop:
            while self.step < self.total_steps:
                last_loss, mined = self._train_step()
                progress.step_done(self.step, last_loss, mined, self.scheduler.get_last_lr()[0])
                if on_step is not None:
                    on_step(self)
                interrupted = stop.agreed()  # on every process, every step: a collective call
                due = cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0
                if interrupted or due or self.step == self.total_steps:
                    last_ckpt = self.save_checkpoint()
                if interrupted:
                    break
        progress.close()
        return self._finish(started, last_loss, last_ckpt)

    def _start(self, resume: bool) -> None:
        """Restore the newest checkpoint (``resume``) or make sure there is none; announce the run."""
        self.resume_or_refuse(resume)
        if self.accelerator.is_main_process:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            logger.info("training %s (pooling=%s) on %d pairs of %d concepts: %d steps of %d pairs "
                        "(%d per epoch), %d process(es), device=%s, precision=%s", self.base_path, self.pooling,
                        len(self.data), self.data.n_concepts, self.total_steps, self.plan.pairs_per_step,
                        self.plan.steps_per_epoch, self.world, self.accelerator.device,
                        self.accelerator.mixed_precision)

    def _finish(self, started: float, last_loss: float, last_ckpt: Optional[Path]) -> TrainResult:
        """The run's result; the model folder written when the run is complete and has an output."""
        # over all sessions of the run, so a resumed (or merely exported) run reports its real cost
        wall = self.elapsed_before + time.perf_counter() - started
        if math.isnan(last_loss) and self.history:
            last_loss = self.history[-1]["loss"]
        result = TrainResult(output=None, steps=self.step, total_steps=self.total_steps,
                             interrupted=self.step < self.total_steps, wall_time_s=wall,
                             pairs_per_s=self.step * self.plan.pairs_per_step / wall if wall > 0 else 0.0,
                             last_loss=last_loss, history=list(self.history), checkpoint=last_ckpt)
        if result.interrupted:
            logger.warning("stopped at step %d/%d; continue with --resume (checkpoint %s)", self.step,
                           self.total_steps, last_ckpt)
        elif self.output is not None:
            result.output = self.save_model(self.output, result)
        return result

    # -- output ---------------------------------------------------------------------------------
    def settings(self, result: TrainResult) -> Dict[str, Any]:
        """What ``sapbert.json`` records: how to encode with the model, and how it was made."""
        return {
            "pooling": self.pooling,
            "max_length": self.config.max_length,
            "normalize": True,
            "base_model": self.config.base_model,
            "base_model_settings": self.base_settings or None,
            "training": {
                **asdict(self.config),
                "pairs_file": str(self.data.path),
                "pairs_fingerprint": self.data.fingerprint,
                "pairs_header": self.data.header,
                "kb": self.data.header.get("kb"),
                "kb_fingerprint": self.data.header.get("kb_fingerprint"),
                "pairs": len(self.data),
                "concepts": self.data.n_concepts,
                "steps": result.steps,
                "pairs_per_step": self.plan.pairs_per_step,
                "steps_per_epoch": self.plan.steps_per_epoch,
                "processes": self.world,
                "device": str(self.accelerator.device),
                "mixed_precision": str(self.accelerator.mixed_precision),
                "wall_time_s": round(result.wall_time_s, 1),
                "pairs_per_s": round(result.pairs_per_s, 2),
                "final_loss": result.last_loss,
                "torch": torch.__version__,
            },
        }

    def save_model(self, folder: PathLike, result: TrainResult) -> Path:
        """The trained model as an HF folder + sapbert.json (see :mod:`.export`), replacing only an earlier model."""
        folder = Path(folder)
        # on every process, so none waits for a main process that gave up
        export.check_output(folder, trained_checkpoint=result.checkpoint or self.checkpoint_dir)
        export.save_model(folder, self.accelerator, self.model, self.tokenizer, lambda: self.settings(result))
        return folder


def train(config: TrainConfig, pairs_path: PathLike, output: Optional[PathLike], run_dir: PathLike,
          resume: bool = False, on_step: Optional[Callable[[Trainer], None]] = None) -> TrainResult:
    """Train and write the model folder: the one-call entry the CLI and the tests use."""
    trainer = Trainer(config, pairs_path, output, run_dir)
    return trainer.train(resume=resume, on_step=on_step)
