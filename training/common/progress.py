"""What a run reports while it trains: a progress bar, and every ``log_every`` steps a record.

A record (mean loss and mined fraction since the last one, pairs/s, learning rate, elapsed
time) goes to the run's history on every process, which checkpoints keep so that a resumed
run reports its whole curve; the main process also logs it and appends it to ``log.jsonl``.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Dict, List, Tuple

logger = logging.getLogger(__name__)


class ProgressLog:
    """Per-step loss → the bar, and the windowed records of :attr:`history`."""

    def __init__(self, log_path: Path, log_every: int, total_steps: int, start_step: int, pairs_per_step: int,
                 history: List[Dict[str, float]], is_main: bool, show_bar: bool, started: float) -> None:
        from tqdm.auto import tqdm

        self.log_path = log_path
        self.log_every = log_every
        self.total_steps = total_steps
        self.start_step = start_step
        self.pairs_per_step = pairs_per_step
        self.history = history
        self.is_main = is_main
        self.started = started
        """``time.perf_counter()`` at the start of this session: pairs/s and elapsed time count from it."""
        self._window: List[Tuple[float, float]] = []
        self._bar = tqdm(total=total_steps, initial=start_step, desc="sapbert", unit="step", disable=not show_bar)

    def step_done(self, step: int, loss: float, mined: float, lr: float) -> None:
        """Report optimiser step ``step`` (counted from 1) with its loss, mined fraction and learning rate."""
        self._window.append((loss, mined))
        elapsed = time.perf_counter() - self.started
        pairs_per_s = (step - self.start_step) * self.pairs_per_step / max(elapsed, 1e-9)
        self._bar.update(1)
        self._bar.set_postfix(loss=f"{loss:.4f}", mined=f"{mined:.3f}", pairs_s=f"{pairs_per_s:.1f}")
        if step % self.log_every == 0 or step == self.total_steps:
            self._record(step, pairs_per_s, lr, elapsed)

    def _record(self, step: int, pairs_per_s: float, lr: float, elapsed: float) -> None:
        window, self._window = self._window, []
        record = {"step": step, "loss": sum(w[0] for w in window) / len(window),
                  "mined_fraction": sum(w[1] for w in window) / len(window),
                  "pairs_per_s": pairs_per_s, "lr": lr, "elapsed_s": elapsed}
        self.history.append(record)
        if self.is_main:
            logger.info("step %d/%d loss %.4f mined %.3f %.1f pairs/s lr %.2e", step, self.total_steps,
                        record["loss"], record["mined_fraction"], pairs_per_s, lr)
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self._bar.close()
