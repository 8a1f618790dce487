"""Stopping a run cleanly: Ctrl-C or ``kill`` → finish the step, checkpoint, stop, on every process together.

A signal reaches one process (or reaches them at different steps); if that process stopped
alone, the others would hang in their next collective call. accelerate's trigger
(``set_trigger`` / ``check_trigger``) makes the decision collective: every process stops
after the step in which any process was asked to.
"""
from __future__ import annotations

import logging
import signal
from typing import Any, Dict

logger = logging.getLogger(__name__)


class StopOnSignal:
    """Within ``with``: SIGINT (Ctrl-C) or SIGTERM (``kill``, a scheduler's pre-emption) asks the
    run to stop after the current step; a second Ctrl-C aborts at once. Outside the main thread,
    where Python cannot install handlers, signals keep their default effect."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, accelerator: Any) -> None:
        self.accelerator = accelerator
        self.raised = False
        self._previous: Dict[int, Any] = {}

    def __enter__(self) -> "StopOnSignal":
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: no signal handling
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        logger.warning("%s received: saving a checkpoint after this step (Ctrl-C again to abort)",
                       signal.Signals(signum).name)
        self.raised = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def agreed(self) -> bool:
        """True on every process once any process has received a signal. Every process must call
        this at the same point of each step: it is a collective operation."""
        if self.raised:
            self.accelerator.set_trigger()
        return bool(self.accelerator.check_trigger())
