"""Give freed tensor memory back to the system at once: glibc's mmap threshold held fixed.

glibc serves an allocation above its mmap threshold (128 KiB at start) with a mapping of its own,
returned to the system when freed. Each time such a block is freed the threshold rises to its size
(up to 32 MiB), so after the first large tensors every activation of the NER and the encoder comes
from the heap instead, where freed blocks stay part of the process between batches and fragment it.
Holding the threshold at its starting value turns that growth off. Over NCBI test's 100 abstracts
(the embedded default, ``nlp.pipe(batch_size=32)``, a Xeon with AMX, 2026-12-03) the peak RSS went from
546-552 MB to 517-518 with 128 KiB (512 KiB gave 520, 1 MiB 527, 4 MiB 536), but every large tensor then
costs a mapping and fresh pages: the benchmark run of that day read 15.25 against 26.05 documents/s.
So it is a choice for a machine short of memory, not a default.

It is also a setting of the whole process, so the library never makes it by itself: ``sapbert annotate
--low-memory`` (a process of its own) calls :func:`hold_mmap_threshold`, and a program that embeds the
pipeline can call it too, or start Python with ``MALLOC_MMAP_THRESHOLD_=131072`` in its environment, which
glibc reads at start. A threshold set that way is left as it is.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from typing import Any

logger = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (glibc's ``malloc.h``)."""
DEFAULT_THRESHOLD = 128 * 1024
"""glibc's starting threshold, in bytes."""
ENVIRONMENT = "MALLOC_MMAP_THRESHOLD_"
"""The variable glibc reads the threshold from when the process starts."""


def _glibc() -> Any:
    """The C library when it is glibc on Linux, else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # only glibc has it; musl's mallopt accepts and ignores the call
    except (OSError, AttributeError):
        return None
    return libc


def release_freed_memory() -> bool:
    """Give the heap's free pages back to the system now (glibc's ``malloc_trim(0)``); True when it ran.

    For a moment after which a model keeps far less than it read: the ONNX Runtime models
    (:mod:`spacy_sapbert.encoding.onnx_bert`) drop the weight arrays the session copied, and without this the
    freed pages stay part of the process (about 50 MB for the default's encoder). A no-op off glibc."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def hold_mmap_threshold(threshold: int = DEFAULT_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes (which also stops it growing); True when set.

    False, and nothing changed, off Linux, with a C library that is not glibc (musl has no such
    threshold), or when :data:`ENVIRONMENT` already set it at the process's start."""
    if threshold <= 0:
        raise ValueError(f"threshold: expected a positive number of bytes, got {threshold}")
    libc = _glibc()
    if libc is None or os.environ.get(ENVIRONMENT):
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, int(threshold)))
    logger.debug("glibc mmap threshold held at %d bytes: %s", threshold, done)
    return done


__all__ = ["DEFAULT_THRESHOLD", "ENVIRONMENT", "M_MMAP_THRESHOLD", "hold_mmap_threshold", "release_freed_memory"]
