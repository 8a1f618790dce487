"""The re-ranker's training loop, built from the self-alignment trainer's parts.

A micro-batch is ``batch_size`` mentions × their k candidates, one forward pass over all the
pairs, :func:`~.loss.listwise_loss` per mention. From ``selfalign``: the accelerate set-up
(``hardware.make_accelerator``: bf16 autocast on CPUs with native bf16), the seeded data order
(``plan.BatchPlan``: a resumed run sees the batches an uninterrupted one would), the warm-up
schedule (``schedule``), the accumulated optimiser step (``step``), pickle-free atomic
checkpoints with their save/restore/resume protocol (``runstate.CheckpointedRun``) and Ctrl-C
handling (``signals.StopOnSignal``). AdamW is built here
(fused; no decay on biases and norms). At the end, with dev data, the temperature and margin are
fitted (:mod:`.evaluate`) and the re-ranker folder is written whole
(:meth:`spacy_sapbert.linking.rerank.model.Reranker.save`, float16 weights).
"""
from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.rerank.model import Reranker
from spacy_sapbert.linking.rerank.settings import SETTINGS_FILE, RerankerSettings
from spacy_sapbert.linking.rerank.inputs import PairEncoder

from ..common.hardware import make_accelerator
from ..common.plan import BatchPlan
from ..common.schedule import make_optimizer, make_scheduler
from ..common.signals import StopOnSignal
from ..common.runstate import CheckpointedRun, RunResult
from ..common.step import accumulated_step
from .config import RerankConfig, resume_identity
from .data import RerankData, training_examples
from .evaluate import evaluate
from .loss import batch_accuracy, listwise_loss, to_grid
from .model import load_cross_encoder

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


@dataclass
class RerankResult(RunResult):
    dev: Optional[Dict[str, Any]] = None
    """The dev evaluation (and calibration) of the finished run."""


class RerankTrainer(CheckpointedRun):
    """One run: data files with candidates + base model → re-ranker folder, checkpoints in ``run_dir``."""

    def __init__(self, config: RerankConfig, train_data: Sequence[PathLike], dev_data: Sequence[PathLike] = (),
                 output: Optional[PathLike] = None, run_dir: PathLike = "training_runs/reranker",
                 accelerator: Any = None) -> None:
        self.config = config.validate()
        self.output = Path(output) if output is not None else None
        self.run_dir = Path(run_dir)
        self.device, self.accelerator = make_accelerator(config.device, config.amp, config.num_threads, accelerator)
        self.rank, self.world = self.accelerator.process_index, self.accelerator.num_processes
        self.train_sets = [RerankData.read(p) for p in train_data]
        self.dev_sets = [RerankData.read(p) for p in dev_data]
        self.settings = RerankerSettings(max_length=config.max_length, max_candidate_length=config.max_candidate_length,
                                         marker_start=config.marker_start, marker_end=config.marker_end, k=config.k,
                                         first_stage_weight=config.first_stage_weight)
        self.examples, self.data_stats = training_examples(self.train_sets, config.k, self.settings.separator,
                                                           config.max_items)
        logger.info("training examples: %s", json.dumps(self.data_stats))
        self.plan = BatchPlan(len(self.examples), config.batch_size, config.grad_accum, self.world, config.seed)
        if self.plan.steps_per_epoch == 0:
            raise InputError(f"{len(self.examples)} training mentions are fewer than one step needs "
                             f"({self.plan.pairs_per_step}); lower --batch-size", field="batch_size")
        self.total_steps = config.max_steps or config.epochs * self.plan.steps_per_epoch
        random.seed(config.seed + self.rank)
        torch.manual_seed(config.seed + self.rank)
        model, self.base_config, self.tokenizer_folder = load_cross_encoder(config.base_model, config.dropout,
                                                                              config.freeze_embeddings)
        self.inputs = PairEncoder(self.tokenizer_folder / "tokenizer.json", config.max_length,
                                  config.max_candidate_length, config.marker_start, config.marker_end)
        self.pairs = self.inputs.pairs([e.context for e in self.examples], [e.candidates for e in self.examples])
        optimizer = make_optimizer(model, config, fused=True)  # type: ignore[arg-type]
        self.scheduler = make_scheduler(optimizer, config, self.total_steps)  # type: ignore[arg-type]
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.identity = resume_identity(config, [d.fingerprint for d in self.train_sets], self.world,
                                        self.total_steps)
        self.step = 0
        self.history: List[Dict[str, float]] = []
        self.elapsed_before = 0.0
        self.stop_requested = False
        """Set (by an ``on_step`` hook, say) to stop after this step with a checkpoint, as Ctrl-C does."""

    # -- one step ---------------------------------------------------------------------------
    def batch_loss(self, indices: Sequence[int]) -> Tuple[torch.Tensor, float]:
        """(listwise loss, in-batch accuracy) of the mentions ``indices``."""
        pairs = [pair for i in indices for pair in self.pairs[i]]
        tensors = [t.to(self.accelerator.device) for t in self.inputs.collate(pairs)]
        grid = to_grid(self.model(*tensors), [len(self.pairs[i]) for i in indices])
        width = grid.shape[1]
        if self.config.first_stage_weight:
            cosines = [self.examples[i].first_stage + [0.0] * (width - len(self.examples[i].first_stage))
                       for i in indices]
            grid = grid + self.config.first_stage_weight * torch.tensor(cosines, device=grid.device)
        positive = torch.tensor([self.examples[i].positive + [False] * (width - len(self.examples[i].positive))
                                 for i in indices], device=grid.device)
        return listwise_loss(grid, positive), batch_accuracy(grid, positive)[0]

    def _train_step(self) -> Tuple[float, float]:
        cfg = self.config
        micro_batches = [self.plan.indices(self.step, micro, self.rank) for micro in range(cfg.grad_accum)]
        result = accumulated_step(self.accelerator, self.model, self.optimizer, self.scheduler, micro_batches,
                                  self.batch_loss, cfg.max_grad_norm)
        self.step += 1
        return result

    def _start(self, resume: bool) -> None:
        self.resume_or_refuse(resume)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        logger.info("re-ranker: %d mentions × k=%d, %d steps of %d mentions (%d per epoch), device=%s, precision=%s",
                    len(self.examples), self.config.k, self.total_steps, self.plan.pairs_per_step,
                    self.plan.steps_per_epoch, self.accelerator.device, self.accelerator.mixed_precision)

    # -- the loop -------------------------------------------------------------------------------
    def train(self, resume: bool = False, on_step: Optional[Callable[["RerankTrainer"], None]] = None) -> RerankResult:
        """Run to ``total_steps`` (or until Ctrl-C / :attr:`stop_requested`), then calibrate on dev and export."""
        from tqdm.auto import tqdm

        if self.output is not None:
            self._check_output()
        self._session_start = time.perf_counter()
        self._start(resume)
        bar = tqdm(total=self.total_steps, initial=self.step, desc="reranker", unit="step",
                   disable=not self.accelerator.is_local_main_process)
        window: List[Tuple[float, float]] = []
        last_ckpt: Optional[Path] = None
        first_step = self.step
        with StopOnSignal(self.accelerator) as stop:
            while self.step < self.total_steps:
                loss, acc = self._train_step()
                window.append((loss, acc))
                elapsed = time.perf_counter() - self._session_start
                rate = (self.step - first_step) * self.plan.pairs_per_step / max(elapsed, 1e-9)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", acc=f"{acc:.3f}", mentions_s=f"{rate:.1f}")
                if self.step % self.config.log_every == 0 or self.step == self.total_steps:
                    self._record(window, rate, elapsed)
                    window = []
                if on_step is not None:
                    on_step(self)
                interrupted, written = self.checkpoint_if_due(stop)
                last_ckpt = written or last_ckpt
                if interrupted:
                    break
        bar.close()
        result = self.run_result(RerankResult, last_ckpt)
        if result.interrupted:
            return result
        reranker = self.reranker()
        if self.dev_sets:
            result.dev = evaluate(reranker, self.dev_sets, calibrate=True, batch_size=self.config.eval_batch_size)
            logger.info("dev: %s", json.dumps(result.dev))
        if self.output is not None and self.accelerator.is_main_process:
            reranker.settings.training = self._record_of(result)
            result.output = reranker.save(self.output, weights_dtype="float16")
        return result

    def _record(self, window: List[Tuple[float, float]], rate: float, elapsed: float) -> None:
        record = {"step": self.step, "loss": sum(w[0] for w in window) / len(window),
                  "batch_acc": sum(w[1] for w in window) / len(window), "mentions_per_s": rate,
                  "lr": self.scheduler.get_last_lr()[0], "elapsed_s": elapsed}
        self.history.append(record)
        if self.accelerator.is_main_process:
            logger.info("step %d/%d loss %.4f acc %.3f %.2f mentions/s", self.step, self.total_steps, record["loss"],
                        record["batch_acc"], rate)
            with (self.run_dir / "log.jsonl").open("a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")

    # -- output ---------------------------------------------------------------------------------
    def reranker(self) -> Reranker:
        """A :class:`Reranker` around the model as it is now (same inputs and precision as training)."""
        autocast = self.device == "cpu" and str(self.accelerator.mixed_precision) == "bf16"
        # without accelerate's autocast wrapper around forward, so that ``autocast`` decides (training
        # steps run under accelerator.autocast() anyway)
        model = self.accelerator.unwrap_model(self.model, keep_fp32_wrapper=False)
        return Reranker(model, RerankerSettings(**asdict(self.settings)),
                        self.base_config, self.tokenizer_folder, device=str(self.accelerator.device),
                        autocast=autocast, batch_size=self.config.eval_batch_size)

    def _check_output(self) -> None:
        from spacy_sapbert.util.atomic import check_replaceable

        assert self.output is not None
        check_replaceable(self.output, lambda p: (p / SETTINGS_FILE).is_file(), f"a re-ranker (no {SETTINGS_FILE})",
                          "Choose a new or empty --output.")

    def _record_of(self, result: RerankResult) -> Dict[str, Any]:
        return {**asdict(self.config), "train_data": [str(d.path) for d in self.train_sets],
                "train_fingerprints": [d.fingerprint for d in self.train_sets],
                "first_stage": self.train_sets[0].header.get("first_stage"), "data_stats": self.data_stats,
                "dev": result.dev, "steps": result.steps, "wall_time_s": round(result.wall_time_s, 1),
                "final_loss": self.history[-1]["loss"] if self.history else math.nan,
                "mixed_precision": str(self.accelerator.mixed_precision), "torch": torch.__version__}


def train(config: RerankConfig, train_data: Sequence[PathLike], dev_data: Sequence[PathLike] = (),
          output: Optional[PathLike] = None, run_dir: PathLike = "training_runs/reranker", resume: bool = False,
          on_step: Optional[Callable[[RerankTrainer], None]] = None) -> RerankResult:
    """Train (and write the re-ranker folder): the one-call entry of the CLI and the tests."""
    return RerankTrainer(config, train_data, dev_data, output, run_dir).train(resume=resume, on_step=on_step)
