"""The generative linker's training loop, on the self-alignment trainer's parts.

A micro-batch is ``batch_size`` samples, one teacher-forced pass of the encoder-decoder,
the mean negative log-likelihood of the target names' tokens
(:meth:`~spacy_sapbert.generative.seq2seq.GenerativeModel.loss`). From ``selfalign``: the
accelerate set-up (bf16 autocast on CPUs with native bf16), the seeded data order
(``BatchPlan``: a resumed run sees the batches an uninterrupted one would), the warm-up
schedule, the accumulated optimiser step, pickle-free atomic checkpoints with their
save/restore/resume protocol (``CheckpointedRun``) and Ctrl-C handling. The model folder is
written at the end (safetensors).
"""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.generative.seq2seq import SETTINGS_FILE, GenerativeModel, Mention

from ..common.hardware import make_accelerator
from ..common.plan import BatchPlan
from ..common.runstate import CheckpointedRun, RunResult
from ..common.schedule import make_optimizer, make_scheduler
from ..common.signals import StopOnSignal
from ..common.step import accumulated_step
from .config import GenerativeConfig, resume_identity
from .samples import Sample, read_samples

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


def start_model(config: GenerativeConfig) -> GenerativeModel:
    """The model a run starts from: a saved generative model, or the base BERT on both sides."""
    from spacy_sapbert.encoding.modelfiles import resolve_model_path

    if config.init_from:
        return GenerativeModel.load(config.init_from)
    return GenerativeModel.from_bert(resolve_model_path(config.base_model), max_context=config.max_context,
                                     max_name=config.max_name)


class GenerativeTrainer(CheckpointedRun):
    """One run: sample files + a start model → a generative model folder, checkpoints in ``run_dir``."""

    def __init__(self, config: GenerativeConfig, samples: Sequence[PathLike], output: Optional[PathLike] = None,
                 run_dir: PathLike = "training_runs/generative", accelerator: Any = None) -> None:
        self.config = config.validate()
        self.output = Path(output) if output is not None else None
        if self.output is not None:  # refused now, not after the training
            from spacy_sapbert.encoding.modelfiles import resolve_model_path
            from spacy_sapbert.util.atomic import check_replaceable

            start = config.init_from or str(resolve_model_path(config.base_model))
            check_replaceable(self.output, lambda p: (p / SETTINGS_FILE).is_file(),
                              f"a generative model (no {SETTINGS_FILE})", "Choose a new or empty --output.",
                              reads={"the model this run starts from": start})
        self.run_dir = Path(run_dir)
        self.device, self.accelerator = make_accelerator(config.device, config.amp, config.num_threads, accelerator)
        self.rank, self.world = self.accelerator.process_index, self.accelerator.num_processes
        self.samples: List[Sample] = []
        fingerprints = []
        for path in samples:
            more, fingerprint = read_samples(path)
            self.samples.extend(more)
            fingerprints.append(fingerprint)
        self.plan = BatchPlan(len(self.samples), config.batch_size, config.grad_accum, self.world, config.seed)
        if self.plan.steps_per_epoch == 0:
            raise InputError(f"{len(self.samples)} samples are fewer than one step needs ({self.plan.pairs_per_step});"
                             f" lower --batch-size", field="batch_size")
        self.total_steps = config.max_steps or config.epochs * self.plan.steps_per_epoch
        random.seed(config.seed + self.rank)
        torch.manual_seed(config.seed + self.rank)
        self.generative = start_model(config)
        optimizer = make_optimizer(self.generative.model, config, fused=True)  # type: ignore[arg-type]
        self.scheduler = make_scheduler(optimizer, config, self.total_steps)  # type: ignore[arg-type]
        self.model, self.optimizer = self.accelerator.prepare(self.generative.model, optimizer)
        self.generative.model = self.model
        self.identity = resume_identity(config, fingerprints, self.world, self.total_steps)
        self.step = 0
        self.history: List[Dict[str, float]] = []
        self.elapsed_before = 0.0
        self.stop_requested = False

    def batch_loss(self, indices: Sequence[int]) -> Tuple[torch.Tensor, float]:
        batch = [self.samples[i] for i in indices]
        loss = self.generative.loss([Mention(s.left, s.mention, s.right) for s in batch], [s.target for s in batch])
        return loss, float(loss.detach())

    def train(self, resume: bool = False, on_step: Optional[Callable[["GenerativeTrainer"], None]] = None
              ) -> RunResult:
        """Run to ``total_steps`` (or until Ctrl-C / :attr:`stop_requested`), then write the model folder."""
        from tqdm.auto import tqdm

        self._session_start = time.perf_counter()
        self.resume_or_refuse(resume)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        logger.info("generative: %d samples, %d steps of %d (%d per epoch), device=%s, precision=%s",
                    len(self.samples), self.total_steps, self.plan.pairs_per_step, self.plan.steps_per_epoch,
                    self.accelerator.device, self.accelerator.mixed_precision)
        bar = tqdm(total=self.total_steps, initial=self.step, desc="generative", unit="step",
                   disable=not self.accelerator.is_local_main_process)
        losses: List[float] = []
        last_ckpt: Optional[Path] = None
        first_step = self.step
        with StopOnSignal(self.accelerator) as stop:
            while self.step < self.total_steps:
                micro = [self.plan.indices(self.step, m, self.rank) for m in range(self.config.grad_accum)]
                loss, _ = accumulated_step(self.accelerator, self.model, self.optimizer, self.scheduler, micro,
                                           self.batch_loss, self.config.max_grad_norm)
                self.step += 1
                losses.append(loss)
                elapsed = time.perf_counter() - self._session_start
                rate = (self.step - first_step) * self.plan.pairs_per_step / max(elapsed, 1e-9)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", samples_s=f"{rate:.1f}")
                if self.step % self.config.log_every == 0 or self.step == self.total_steps:
                    self._record(losses, rate, elapsed)
                    losses = []
                if on_step is not None:
                    on_step(self)
                interrupted, written = self.checkpoint_if_due(stop)
                last_ckpt = written or last_ckpt
                if interrupted:
                    break
        bar.close()
        result = self.run_result(RunResult, last_ckpt)
        if not result.interrupted and self.output is not None and self.accelerator.is_main_process:
            result.output = self.save(self.output, result)
        return result

    def _record(self, losses: List[float], rate: float, elapsed: float) -> None:
        record = {"step": self.step, "loss": sum(losses) / max(len(losses), 1), "samples_per_s": rate,
                  "lr": self.scheduler.get_last_lr()[0], "elapsed_s": elapsed}
        self.history.append(record)
        if self.accelerator.is_main_process:
            logger.info("step %d/%d loss %.4f %.1f samples/s", self.step, self.total_steps, record["loss"], rate)
            with (self.run_dir / "log.jsonl").open("a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")

    def save(self, output: Path, result: RunResult) -> Path:
        """The model folder (float32 safetensors: a start for further training), with ``training.json``."""
        from spacy_sapbert.util.atomic import atomic_dir

        model = self.accelerator.unwrap_model(self.model, keep_fp32_wrapper=False)
        saved = GenerativeModel(model, self.generative.tokenizer, self.generative.markers,
                                self.generative.max_context, self.generative.max_name)
        record = {**asdict(self.config), "steps": result.steps, "wall_time_s": round(result.wall_time_s, 1),
                  "final_loss": self.history[-1]["loss"] if self.history else None, "samples": len(self.samples),
                  "mixed_precision": str(self.accelerator.mixed_precision), "torch": torch.__version__}
        with atomic_dir(output) as tmp:
            saved.save(tmp)
            (tmp / "training.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        return output


def train(config: GenerativeConfig, samples: Sequence[PathLike], output: Optional[PathLike] = None,
          run_dir: PathLike = "training_runs/generative", resume: bool = False,
          on_step: Optional[Callable[[GenerativeTrainer], None]] = None) -> RunResult:
    """Train (and write the model folder): the one-call entry of the CLI and the tests."""
    return GenerativeTrainer(config, samples, output, run_dir).train(resume=resume, on_step=on_step)
