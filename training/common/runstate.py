"""Checkpoint, restore and resume of a training run: the protocol the trainers (self-alignment,
re-ranker, generative) follow, on top of :mod:`.checkpoint`, and the :class:`RunResult` they return.

A trainer that mixes in :class:`CheckpointedRun` has ``accelerator``, ``model``, ``optimizer``,
``scheduler``, ``config`` (with ``keep_checkpoints``), ``identity`` (what a resumption must
match), ``step``, ``total_steps``, ``history``, ``elapsed_before``, ``rank``, ``world``,
``run_dir`` and ``_session_start``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from spacy_sapbert.errors import InputError

from . import checkpoint as ckpt
from .config import check_resumable

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What a checkpointed run returns: how far it got, in how long (all sessions), its last checkpoint;
    ``output`` is the model folder once the run is complete and saved."""

    output: Optional[Path]
    steps: int
    total_steps: int
    interrupted: bool
    wall_time_s: float
    history: List[Dict[str, float]] = field(default_factory=list)
    checkpoint: Optional[Path] = None


class CheckpointedRun:
    """``save_checkpoint``, ``restore`` and ``resume_or_refuse`` for a trainer (see the module)."""

    accelerator: Any
    run_dir: Path

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    def save_checkpoint(self) -> Path:
        """Every process stages its RNG state; the main process then publishes the checkpoint folder
        whole (see :mod:`.checkpoint`), so a kill at any moment leaves the previous checkpoint for --resume."""
        acc = self.accelerator
        if acc.is_main_process:
            ckpt.prepare_folder(self.checkpoint_dir, self.step)
        acc.wait_for_everyone()
        ckpt.save_rank_rng(self.checkpoint_dir, self.step, self.rank)
        acc.wait_for_everyone()
        path = self.checkpoint_dir / ckpt.checkpoint_name(self.step)
        if acc.is_main_process:
            state = {
                "step": self.step,
                "total_steps": self.total_steps,
                "identity": self.identity,
                "config": asdict(self.config),
                "scheduler": self.scheduler.state_dict(),
                "scaler": acc.scaler.state_dict() if getattr(acc, "scaler", None) is not None else None,
                "history": self.history,
                "elapsed_s": self.elapsed_before + time.perf_counter() - self._session_start,
            }
            path = ckpt.save_main(self.checkpoint_dir, self.step, acc.unwrap_model(self.model),
                                  self.optimizer, state, keep=self.config.keep_checkpoints, world=self.world)
        acc.wait_for_everyone()
        return path

    def checkpoint_if_due(self, stop: Any) -> Tuple[bool, Optional[Path]]:
        """After a step: (interrupted?, the checkpoint written or None). A checkpoint is written when
        Ctrl-C (``stop``) or ``stop_requested`` asks to stop, every ``checkpoint_every`` steps, and
        at the last step."""
        interrupted = bool(stop.agreed() or getattr(self, "stop_requested", False))
        every = self.config.checkpoint_every
        due = bool(every) and self.step % every == 0
        if interrupted or due or self.step == self.total_steps:
            return interrupted, self.save_checkpoint()
        return interrupted, None

    def run_result(self, result_type: type, checkpoint: Optional[Path]) -> Any:
        """The run's :class:`RunResult` (or subclass ``result_type``) as the loop ends, its wall time over all
        sessions; an interrupted run says how to continue."""
        wall = self.elapsed_before + time.perf_counter() - self._session_start
        result = result_type(None, self.step, self.total_steps, self.step < self.total_steps, wall,
                             list(self.history), checkpoint)
        if result.interrupted:
            logger.warning("stopped at step %d/%d; continue with --resume (checkpoint %s)", self.step,
                           self.total_steps, checkpoint)
        return result

    def restore(self, checkpoint: Union[str, Path]) -> None:
        """Continue from a checkpoint written by a run with the same settings."""
        checkpoint = Path(checkpoint)
        check_resumable(ckpt.read_state(checkpoint)["identity"], self.identity, checkpoint)
        state = ckpt.load(checkpoint, self.accelerator.unwrap_model(self.model), self.optimizer, self.rank,
                          device=self.accelerator.device)
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler") and getattr(self.accelerator, "scaler", None) is not None:
            self.accelerator.scaler.load_state_dict(state["scaler"])
        self.step = int(state["step"])
        self.history = list(state.get("history", []))
        self.elapsed_before = float(state.get("elapsed_s", 0.0))
        logger.info("resumed from %s at step %d/%d", checkpoint, self.step, self.total_steps)

    def resume_or_refuse(self, resume: bool) -> None:
        """Restore the newest checkpoint (``resume``), or refuse to mix a new run with old checkpoints."""
        existing = ckpt.latest_checkpoint(self.checkpoint_dir)
        if resume and existing is not None:
            self.restore(existing)
        elif resume:
            logger.warning("--resume: no checkpoint in %s, starting from step 0", self.checkpoint_dir)
        elif existing is not None:
            raise InputError("run folder already holds checkpoints: pass --resume to continue, or choose another "
                             "run folder", self.checkpoint_dir)
