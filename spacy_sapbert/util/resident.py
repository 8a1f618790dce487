"""Drop from the resident set the library pages that importing torch and spaCy touched once.

Importing torch runs its operator registrations: about 45 MB of ``libtorch_cpu.so``'s code is read
into the process for that alone, and little of it runs again. Those pages count in the resident set
(and its peak) for as long as the process lives, although they are clean copies of a file that the
kernel's page cache holds anyway. :func:`drop_library_pages` unmaps them from the process
(``madvise(MADV_DONTNEED)``); a page the pipeline needs later is mapped again from the page cache on its
first use (a minor fault, no disk read). Over NCBI test's 100 abstracts (the embedded default on torch,
``nlp.pipe(batch_size=32)``, a Xeon with AMX, 2026-12-06, 3 fresh processes each, ``benchmarks/load_and_memory.py``)
the peak RSS went from 545-550 MB to 480-483, at 0.96× the documents/s, within the run-to-run spread; the call itself
took 12 ms.

It is safe only where the process holds no page of its own in the mapping: ``MADV_DONTNEED`` on a private
mapping throws away a page the process wrote (the file's content comes back instead). So only mappings of
shared-library files that are not writable and hold no such page, in memory or swapped out (``Anonymous: 0 kB``
and ``Swap: 0 kB`` in ``/proc/self/smaps``: the loader's relocated data is excluded by that), are asked about,
never a data file a program maps. The mappings are read first and dropped after, so no other thread may load or
unload a library meanwhile. It is a request about the whole process, so the library never makes it by itself:
``sapbert annotate`` (a process of its own, one thread at that point) calls it before it loads the pipeline, and
a program that embeds the pipeline may call it too, after its imports, where the same holds.
"""
from __future__ import annotations

import ctypes
import logging
import mmap
import re
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, NamedTuple, Optional

logger = logging.getLogger(__name__)

LIBRARY = re.compile(r"\.so(\.[0-9.]+)?$")
"""A shared library's file name: ``libtorch_cpu.so``, ``libc.so.6``, ``_C.cpython-311-x86_64-linux-gnu.so``."""


class Mapping(NamedTuple):
    """One mapping of a shared-library file, from ``/proc/self/smaps``."""
    start: int
    end: int
    permissions: str
    anonymous_kb: int
    swap_kb: int
    path: str

    @property
    def droppable(self) -> bool:
        """Not writable and no page of the process's own, resident or swapped: every page is the file's."""
        return "w" not in self.permissions and self.anonymous_kb == 0 and self.swap_kb == 0


def library_mappings(smaps: Path = Path("/proc/self/smaps")) -> Iterator[Mapping]:
    """Every mapping of a shared-library file in ``smaps`` (this process's) whose entry states both its
    ``Anonymous:`` and its ``Swap:`` size (an entry without them is left out: nothing says it is clean)."""
    entry: Optional[Dict[str, Any]] = None
    with open(smaps, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            head, _, rest = line.partition(" ")
            if "-" in head and not head.endswith(":"):  # a mapping's first line: range, permissions, ..., path
                if entry is not None and {"Anonymous:", "Swap:"} <= entry.keys():
                    yield _mapping(entry)
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else ""
                library = path.startswith("/") and LIBRARY.search(path.removesuffix(" (deleted)"))
                entry = {"range": head, "permissions": fields[1], "path": path} if library else None
            elif entry is not None and head in ("Anonymous:", "Swap:"):
                entry[head] = int(rest.split()[0])
    if entry is not None and {"Anonymous:", "Swap:"} <= entry.keys():
        yield _mapping(entry)


def _mapping(entry: Dict[str, Any]) -> Mapping:
    start, end = entry["range"].split("-")
    return Mapping(int(start, 16), int(end, 16), entry["permissions"], entry["Anonymous:"], entry["Swap:"],
                   entry["path"])


def drop_library_pages() -> int:
    """Unmap this process's clean shared-library pages (:class:`Mapping`'s ``droppable``); the bytes asked
    about (0 off Linux, where nothing is done)."""
    advice = getattr(mmap, "MADV_DONTNEED", None)  # Python defines it where the system has it
    if advice is None or not sys.platform.startswith("linux"):
        return 0
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    asked = 0
    for mapping in list(library_mappings()):  # read whole before the first call changes it
        if not mapping.droppable:
            continue
        if madvise(mapping.start, mapping.end - mapping.start, advice) != 0:
            logger.debug("madvise(MADV_DONTNEED) failed for %s (errno %d)", mapping.path, ctypes.get_errno())
            continue
        asked += mapping.end - mapping.start
    logger.debug("dropped %.1f MB of clean shared-library mappings from the resident set", asked / 2**20)
    return asked


__all__ = ["Mapping", "drop_library_pages", "library_mappings"]
