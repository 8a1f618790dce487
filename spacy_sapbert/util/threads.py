"""Thread pools and ``fork``: what keeps ``nlp.pipe(n_process=N)`` from hanging.

spaCy's multi-process ``nlp.pipe`` forks the parent. If the parent had already run torch
(loading the pipeline runs the encoder once), the child inherits torch's OpenMP
intra-op pool in a state it cannot use, and its first LayerNorm waits forever for
threads that were not copied. Setting torch (and FAISS) to one thread in the child
makes their kernels run inline, which is also right when N workers share the cores.
"""
from __future__ import annotations

import os
import sys

_REGISTERED = False


def single_thread_in_child() -> None:
    """Run in a freshly forked child: one torch and one FAISS thread, no inherited pool."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    faiss = sys.modules.get("faiss")
    if faiss is not None and hasattr(faiss, "omp_set_num_threads"):
        faiss.omp_set_num_threads(1)


def protect_forks() -> None:
    """Register :func:`single_thread_in_child` to run after every ``fork`` (once per process)."""
    global _REGISTERED
    if not _REGISTERED and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=single_thread_in_child)
        _REGISTERED = True


__all__ = ["protect_forks", "single_thread_in_child"]
