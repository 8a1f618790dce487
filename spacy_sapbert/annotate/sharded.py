"""Annotation by shards into a folder of parts: what the distributed engine runs, engine aside.

The driver (:func:`run_sharded`) plans the shards (:mod:`.shards`), opens the output
folder (:mod:`.parts`: resumed, or written afresh), hands the unfinished shards to an
``execute`` function (Ray's actor pool in :mod:`.ray_engine`; anything that calls
:func:`annotate_shard` on a loaded pipeline for each shard and yields its result row) and
sums the rows into a :class:`ShardedSummary`. Skipped records come back in the rows with
their file:line and are logged by the driver, so they are seen where the command runs.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

from spacy.language import Language

from spacy_sapbert.annotate import process
from spacy_sapbert.annotate.identity import files_identity, input_identity
from spacy_sapbert.annotate.parts import PartsFolder, open_parts
from spacy_sapbert.annotate.readers import Malformed, Record, read_records
from spacy_sapbert.annotate.runner import Summary, progress_bar, reading_options
from spacy_sapbert.annotate.shards import DEFAULT_SHARD_BYTES, Shard, input_files, plan
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.atomic import atomic_open
from spacy_sapbert.util.output_lock import output_lock

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
MAX_PROBLEMS = 100
"""Skipped records of one shard reported by file:line (the rest are counted)."""
COUNTS = ("read", "written", "skipped", "entities", "linked")
Execute = Callable[[List[Shard], PartsFolder], Iterable[Dict[str, Any]]]


@dataclass
class ShardedSummary(Summary):
    """:class:`~.runner.Summary` plus the shards and the throughput of this run."""

    shards: int = 0
    shards_before: int = 0
    seconds: float = 0.0

    @property
    def docs_per_second(self) -> float:
        return (self.written + self.skipped) / self.seconds if self.seconds > 0 else 0.0

    def lines(self) -> List[str]:
        return super().lines() + [
            f"shards              {self.shards:>9,}  ({self.shards_before:,} finished before this run)",
            f"time                {self.seconds:>9,.1f} s  ({self.docs_per_second:,.1f} documents/s)",
        ]


def annotate_shard(nlp: Language, linkers: List[Any], shard: Shard, folder: PartsFolder, text_field: str = "text",
                   id_field: Optional[str] = "id", batch_size: int = 32, strict: bool = False) -> Dict[str, Any]:
    """Annotate ``shard`` into its part, then mark it finished; its counts and problems as a row.

    With ``strict`` the first malformed record raises :class:`InputError` and the part is not written.
    """
    counts = dict.fromkeys(COUNTS, 0)
    problems: List[str] = []
    started = time.perf_counter()

    def skip(where: str, reason: str) -> None:
        if strict:
            raise InputError(reason, where)
        counts["skipped"] += 1
        if len(problems) < MAX_PROBLEMS:
            problems.append(f"{where}: skipped ({reason})")

    def todo() -> Iterator[Record]:
        for item in read_records(shard.path, shard.fmt, text_field, id_field, span=shard.span):
            counts["read"] += 1
            if isinstance(item, Malformed):
                skip(item.where, f"malformed record: {item.reason}")
            else:
                yield item

    with atomic_open(folder.part_path(shard), "wb") as out:
        for outcome in process.run(nlp, todo(), batch_size, 1):
            if isinstance(outcome, process.Failed):
                skip(outcome.where, outcome.reason)
                continue
            out.write(outcome.line)
            counts["written"] += 1
            counts["entities"] += outcome.entities
            counts["linked"] += outcome.linked
    counts["seconds"] = round(time.perf_counter() - started, 3)
    folder.mark_done(shard, counts)
    return {"part": shard.part, **counts, "problems": json.dumps(problems), "error": "", "error_where": ""}


def failed_row(shard: Shard, err: InputError) -> Dict[str, Any]:
    """The row of a shard that stopped at a malformed record (``strict``): the driver raises it."""
    return {"part": shard.part, **dict.fromkeys(COUNTS, 0), "seconds": 0.0, "problems": "[]", "error": err.problem,
            "error_where": err.path or ""}


def run_sharded(execute: Execute, source: PathLike, output: PathLike, pipeline: Dict[str, Any], *, fmt: str = "auto",
                text_field: str = "text", id_field: Optional[str] = "id", shard_bytes: int = DEFAULT_SHARD_BYTES,
                batch_size: int = 32, overwrite: bool = False, show_progress: bool = True) -> ShardedSummary:
    """Annotate ``source`` into the folder ``output`` by shards (see the module's docstring).

    ``pipeline`` is the pipeline's identity (:func:`~.identity.saved_pipeline_identity`): a
    folder is only continued by the same pipeline reading the same input the same way, in
    batches of the same ``batch_size`` (the size ``execute`` annotates with: shards start at
    batch boundaries). One driver at a time writes a folder: while another holds its lock
    (:mod:`spacy_sapbert.util.output_lock`), :class:`InputError` names it.
    """
    files, documents = input_files(source)
    single = documents or (len(files) == 1 and Path(source).is_file())
    identity = {"input": input_identity(files[0]) if single else {"pattern": str(source), **files_identity(files)},
                "reading": reading_options(fmt, text_field, id_field), "pipeline": pipeline,
                "shard_bytes": shard_bytes, "batch_size": batch_size}
    summary = ShardedSummary(output=str(output))
    started = time.perf_counter()

    def cut() -> List[Shard]:
        return plan(source, fmt, shard_bytes, batch_size, text_field, id_field, show_progress)

    with output_lock(output), open_parts(output, identity, cut, overwrite) as run:
        done = run.finished()
        summary.shards, summary.shards_before = len(run.shards), len(done)
        for counts in done.values():
            summary.read += counts["read"]
            summary.already_done += counts["read"]
        todo = [shard for shard in run.shards if shard.part not in done]
        if done:
            logger.info("%s: resuming; %d of %d shards are finished", output, len(done), len(run.shards))
        rows = execute(todo, run.folder) if todo else iter(())
        try:
            with progress_bar(show_progress and bool(todo), desc="annotate", unit="shard", total=len(todo)) as progress:
                for row in rows:
                    _add_row(summary, row)
                    progress.update(1)
                    progress.set_postfix(docs=summary.written, refresh=False)
        finally:
            getattr(rows, "close", lambda: None)()  # a generator over a cluster: stop it now, not when collected
        summary.seconds = time.perf_counter() - started
        run.complete({**summary.as_dict(), "seconds": round(summary.seconds, 3)})
    summary.output = str(output)
    return summary


def _add_row(summary: ShardedSummary, row: Dict[str, Any]) -> None:
    if row["error"]:
        raise InputError(row["error"], row["error_where"] or None)
    for problem in json.loads(row["problems"]):
        logger.warning("%s", problem)
    for key in COUNTS:
        setattr(summary, key, getattr(summary, key) + int(row[key]))


__all__ = ["ShardedSummary", "annotate_shard", "failed_row", "run_sharded"]
