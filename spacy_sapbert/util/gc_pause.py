"""Reading many small records without the cyclic garbage collector running in between."""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a reader builds many small containers that
    form no cycles (a KB's 23k records: a dict and lists each). Every few hundred new containers
    the collector runs, and once a pipeline is loaded its full passes walk torch's and spaCy's
    objects too: reading the embedded default's KB took 0.80 s with it and 0.19 s without. The
    collector's earlier state comes back afterwards, also when the reader raises."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
