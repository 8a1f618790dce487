"""kill -9 at seeded random moments while a writer runs, for the crash-safety tests.

The child process does its imports and set-up, prints ``READY`` and waits for a line on
stdin; the parent then sends ``go``, sleeps a random delay drawn from a seeded generator
(so a failure can be replayed) and sends SIGKILL. What the test checks afterwards is the
promise every writer makes: the previous good file is intact, or the new one complete.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Dict, List, Optional

TESTS = Path(__file__).resolve().parent
PRELUDE = """
import sys
sys.stdout.write("READY\\n"); sys.stdout.flush()
sys.stdin.readline()
"""


def run_killed(setup: str, write: str, delay: float, cwd: Path, timeout: float = 120.0) -> Optional[int]:
    """Run ``setup``, then ``write`` in a child; SIGKILL it ``delay`` s after ``write`` starts.

    Returns the child's exit code if it finished before the kill, else None.
    """
    code = textwrap.dedent(setup) + PRELUDE + textwrap.dedent(write)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()  # type: ignore[union-attr]
        if line.strip() != "READY":
            child.kill()
            _, err = child.communicate(timeout=timeout)
            raise AssertionError(f"child failed before writing:\n{line}{err}")
        child.stdin.write("go\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        try:
            child.wait(timeout=delay)
            _, err = child.communicate(timeout=timeout)
            if child.returncode != 0:
                raise AssertionError(f"child failed (rc {child.returncode}):\n{err}")
            return child.returncode
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
            child.communicate(timeout=timeout)
            return None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def kill_many(setup: str, write: str, check: Callable[[int], None], cwd: Path, runs: int = 20, seed: int = 0,
              max_delay: float = 1.0) -> Dict[str, int]:
    """``runs`` kills at delays drawn uniformly from [0, max_delay) s; ``check(run)`` after each.

    Returns how many runs were killed and how many finished, so a test can insist that
    the kills really landed inside the write.
    """
    rng = random.Random(seed)
    outcome: Dict[str, int] = {"killed": 0, "finished": 0}
    delays: List[float] = [rng.uniform(0.0, max_delay) for _ in range(runs)]
    for run, delay in enumerate(delays):
        finished = run_killed(setup, write, delay, cwd)
        outcome["finished" if finished is not None else "killed"] += 1
        try:
            check(run)
        except AssertionError as err:
            raise AssertionError(f"run {run} (seed {seed}, kill after {delay:.3f} s): {err}") from err
    return outcome


__all__ = ["kill_many", "run_killed"]
