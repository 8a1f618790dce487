"""Run a command as a process whose peak RSS is its own.

Linux carries a process's peak RSS over ``exec`` from the process that spawned it: a benchmark child
started by a parent that has loaded a KB and torch (620 MB) reports at least 620 MB from
``getrusage(RUSAGE_SELF)`` however little it uses itself. :data:`LAUNCHER` is a small Python
process that forks the command, so the command's peak starts from the launcher's ~10 MB; it
passes the command's stdout through, exits with its exit code, and writes the command's own
usage from ``wait4`` as the last line of stderr (:func:`usage_of`).

The command runs with Python's compiled-bytecode cache on, as a user's Python does: a sandbox or CI that
sets ``PYTHONDONTWRITEBYTECODE`` makes every fresh process compile the package's modules from source again
(an editable install has no compiled files), 0.1-0.15 s of each load of the default that an installed
package (compiled by pip) or a second start of a checkout does not spend. The first, cold, run writes the
cache; the warm runs read it.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Sequence

LAUNCHER = r"""
import json, os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the bytecode cache on, as a user's Python has it
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
code = os.waitstatus_to_exitcode(status)
sys.stderr.write("\n" + json.dumps({"code": code, "seconds": time.perf_counter() - start,
                                    "peak_rss_mb": usage.ru_maxrss / 1024}) + "\n")
sys.exit(code if 0 <= code < 256 else 1)
"""


def fresh(command: Sequence[str]) -> List[str]:
    """``command`` under :data:`LAUNCHER`: run this instead of ``command``."""
    return [sys.executable, "-c", LAUNCHER, *command]


def usage_of(stderr: str) -> Dict[str, Any]:
    """The command's exit code, wall time and peak RSS that :data:`LAUNCHER` wrote last on ``stderr``
    (empty when the launcher itself did not get that far)."""
    lines = stderr.strip().splitlines()
    try:
        return json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
