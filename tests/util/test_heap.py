"""spacy_sapbert.util.heap: holding glibc's mmap threshold makes a freed large block's successor a mapping of its
own again (glibc's own rule would have raised the threshold past it), and a threshold set in the environment is
left alone. Each case runs in a fresh interpreter: the setting is the whole process's."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spacy_sapbert.util.heap import ENVIRONMENT, hold_mmap_threshold

# glibc's count of mmapped blocks (mallinfo2's hblks) after: a 4 MiB block freed (glibc then raises its threshold
# to 4 MiB unless it is held), and a 1 MiB block allocated
PROBE = r"""
import ctypes, sys
from spacy_sapbert.util.heap import hold_mmap_threshold
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
held = hold_mmap_threshold() if sys.argv[1] == "held" else None
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(1 << 20)
print(held, libc.mallinfo2().hblks - before)
libc.free(block)
"""


def run_probe(mode: str, **environment: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != ENVIRONMENT}
    env.update(environment)
    return subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")
def test_a_held_threshold_maps_the_next_large_block():
    assert run_probe("glibc") == "None 0"  # glibc's rule: the threshold grew to 4 MiB, 1 MiB comes from the heap
    assert run_probe("held") == "True 1"   # held at 128 KiB: the 1 MiB block is a mapping, given back when freed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")
def test_a_threshold_from_the_environment_is_left_alone():
    # the environment's 8 MiB wins: not held, and the 1 MiB block comes from the heap
    assert run_probe("held", **{ENVIRONMENT: str(8 << 20)}) == "False 0"


def test_a_threshold_must_be_positive():
    with pytest.raises(ValueError, match="positive number of bytes, got 0"):
        hold_mmap_threshold(0)
