"""``sapbert annotate --engine ray``: the sharded run (:mod:`.sharded`) on a Ray cluster.

Ray Data streams the shards (one block each) through ``map_batches`` with a pool of
actors; each actor loads the pipeline once (on a GPU when Ray gave it one), annotates
the shards it is handed into their parts and returns one row per shard, which the
driver sums, logs and shows as progress. Ray's own ``write_*`` is not used: it names
files after the run and cannot tell which were finished by an earlier, killed run,
whereas a part named after its shard and renamed into place whole (:mod:`.parts`) can
be rewritten by a retried task without ever holding a document twice.

Failures: Ray Data restarts a dead actor and retries its task (``max_restarts`` and
``max_task_retries`` are unlimited for actor pools); a dead driver takes its actors with
it, and running the same command again annotates the shards that have no marker. Ray
stays an optional extra: nothing here imports it until a run starts.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Union

from spacy_sapbert.annotate.parts import PartsFolder
from spacy_sapbert.annotate.sharded import ShardedSummary, annotate_shard, failed_row, run_sharded
from spacy_sapbert.annotate.shards import DEFAULT_SHARD_BYTES, Shard
from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
INSTALL_HINT = "the Ray engine needs Ray: pip install 'spacy-sapbert[ray]'"


class ShardAnnotator:
    """A Ray Data actor: the pipeline, loaded once, annotating one shard per call."""

    def __init__(self, pipeline: str, device: Optional[str], folder: str, reading: Dict[str, Any], batch_size: int,
                 strict: bool, num_cpus: float) -> None:
        import ray

        from spacy_sapbert.annotate.record import linkers_of
        from spacy_sapbert.pipes.loading import load_pipeline
        from spacy_sapbert.util.devices import torch_installed

        # ONNX Runtime's sessions (the base install's, or a pipe's backend: onnx) take their threads from this
        os.environ["OMP_NUM_THREADS"] = str(max(1, int(num_cpus)))
        if torch_installed():
            import torch

            torch.set_num_threads(max(1, int(num_cpus)))
        if not device:
            device = "cuda" if ray.get_gpu_ids() else None  # None: the pipeline's own settings (CPU)
        self.nlp = load_pipeline(pipeline, device)
        self.linkers = linkers_of(self.nlp)
        self.folder = PartsFolder(folder)
        self.reading, self.batch_size, self.strict = reading, batch_size, strict

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        rows = [self._one(Shard.from_dict(json.loads(text))) for text in batch["shard"]]
        return {key: [row[key] for row in rows] for key in rows[0]}

    def _one(self, shard: Shard) -> Dict[str, Any]:
        try:
            return annotate_shard(self.nlp, self.linkers, shard, self.folder, self.reading["text_field"],
                                  self.reading["id_field"], self.batch_size, self.strict)
        except InputError as err:  # --strict: back to the driver as a row, which stops the run
            return failed_row(shard, err)


def _require_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401 - the extra installs both; say so if only ray core is there
    except ImportError as err:
        raise InputError(INSTALL_HINT, field="--engine") from err
    return ray


def annotate_with_ray(pipeline: str, source: PathLike, output: PathLike, *, address: Optional[str] = None,
                      num_actors: int = 1, num_cpus_per_actor: float = 1.0, num_gpus_per_actor: float = 0.0,
                      device: Optional[str] = None, fmt: str = "auto", text_field: str = "text",
                      id_field: Optional[str] = "id", batch_size: int = 32, strict: bool = False,
                      overwrite: bool = False, shard_bytes: int = DEFAULT_SHARD_BYTES,
                      show_progress: bool = True) -> ShardedSummary:
    """Annotate ``source`` (a file, folder or glob) into the folder ``output`` on a Ray cluster.

    ``address``: None starts a Ray instance on this machine, ``auto`` joins the one running
    here (``ray start``), ``ray://host:10001`` a remote one. ``pipeline`` is loaded by each
    actor ('default', a folder every node can read, or a package installed on every node).
    """
    from spacy_sapbert.annotate.identity import saved_pipeline_identity
    from spacy_sapbert.pipes.loading import pipeline_location

    for name, value, least in (("--num-actors", num_actors, 1), ("--batch-size", batch_size, 1)):
        if not isinstance(value, int) or value < least:
            raise InputError(f"expected an integer ≥ {least}, got {value!r}", field=name)
    for name, value in (("--num-cpus-per-actor", num_cpus_per_actor), ("--num-gpus-per-actor", num_gpus_per_actor)):
        if value < 0:
            raise InputError(f"expected a number ≥ 0, got {value!r}", field=name)
    ray = _require_ray()
    location = pipeline_location(pipeline)
    if pipeline != "default" and Path(pipeline).is_dir():
        pipeline = str(Path(pipeline).resolve())  # actors may start in another working folder
    reading = {"text_field": text_field, "id_field": id_field}

    def execute(shards: List[Shard], folder: PartsFolder) -> Iterator[Dict[str, Any]]:
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # ours counts shards and documents (sharded.run_sharded)
        dataset = ray.data.from_items([{"shard": json.dumps(shard.as_dict())} for shard in shards],
                                      override_num_blocks=len(shards))
        annotated = dataset.map_batches(
            ShardAnnotator, batch_size=1, compute=ray.data.ActorPoolStrategy(size=num_actors),
            num_cpus=num_cpus_per_actor, num_gpus=num_gpus_per_actor or None,
            fn_constructor_kwargs={"pipeline": pipeline, "device": device, "folder": str(folder.folder.resolve()),
                                   "reading": reading, "batch_size": batch_size, "strict": strict,
                                   "num_cpus": num_cpus_per_actor})
        try:
            yield from annotated.iter_rows()
        finally:
            if started_here:
                ray.shutdown()  # the actors go with it; what they finished is on disk

    return run_sharded(execute, source, output, saved_pipeline_identity(location), fmt=fmt, text_field=text_field,
                       id_field=id_field, shard_bytes=shard_bytes, batch_size=batch_size, overwrite=overwrite,
                       show_progress=show_progress)


__all__ = ["INSTALL_HINT", "ShardAnnotator", "annotate_with_ray"]
