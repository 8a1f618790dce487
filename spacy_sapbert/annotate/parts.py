"""The distributed engine's output folder: a JSONL part per shard, a marker per finished part,
and a manifest of what the folder was made from.

::

    OUT/manifest.json          input and pipeline identity, reading options, shard size, the
                               shards (part, input file, byte range, first line and ordinal),
                               and once complete the run's summary
    OUT/part-00000.jsonl       shard 0's output lines, exactly as the local engine writes them
    OUT/_done/part-00000.json  written after its part: the shard's key and counts

Exactly once: a part is written to a temporary file and renamed into place whole, then
its marker is written; a part counts as finished only when its marker names the same
shard key. A killed worker leaves a temporary file (removed by the next run) or a part
without a marker (annotated again and replaced whole), never half a part; a task that
Ray retries after its first attempt did finish rewrites the same part under the same
name, so no document is ever written twice. A re-run of the same command reads the plan
from the manifest and annotates only the shards without a marker.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Union

from spacy_sapbert.annotate.identity import differences
from spacy_sapbert.annotate.shards import Shard
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.atomic import atomic_dir, atomic_write_text, check_replaceable, remove_stale_temps
from spacy_sapbert.util.jsonfile import read_json_object

PathLike = Union[str, Path]
MANIFEST = "manifest.json"
DONE = "_done"
FORMAT_VERSION = 1
IDENTITY_KEYS = ("input", "reading", "pipeline", "shard_bytes", "batch_size")
"""What must be the same for a re-run to continue a folder."""


class PartsFolder:
    """An output folder of parts (see the module's docstring)."""

    def __init__(self, folder: PathLike) -> None:
        self.folder = Path(folder)

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST

    def read_manifest(self) -> Optional[Dict[str, Any]]:
        if not self.manifest_path.is_file():
            return None
        return read_json_object(self.manifest_path, FORMAT_VERSION, "annotation manifest")

    def write_manifest(self, manifest: Dict[str, Any]) -> None:
        atomic_write_text(self.manifest_path, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")

    def part_path(self, shard: Shard) -> Path:
        return self.folder / shard.part

    def marker_path(self, shard: Shard) -> Path:
        return self.folder / DONE / (Path(shard.part).stem + ".json")

    def mark_done(self, shard: Shard, counts: Dict[str, Any]) -> None:
        """Record that ``shard``'s part is complete (call after the part is in place)."""
        self.marker_path(shard).parent.mkdir(exist_ok=True)
        atomic_write_text(self.marker_path(shard), json.dumps({"key": shard.key, **counts}) + "\n")

    def finished(self, shard: Shard) -> Optional[Dict[str, Any]]:
        """The counts of ``shard`` if its part is complete, else None."""
        marker = self.marker_path(shard)
        if not marker.is_file() or not self.part_path(shard).is_file():
            return None
        try:
            counts = read_json_object(marker)
        except InputError:
            return None  # a marker that cannot be read is no marker: the shard is done again
        return counts if counts.get("key") == shard.key else None

    def remove_temporaries(self) -> int:
        """Temporary parts and markers left by killed workers (names start with '.')."""
        removed = 0
        for leftover in [*self.folder.glob(".part-*"), *self.folder.glob(f"{DONE}/.part-*")]:
            with contextlib.suppress(OSError):
                leftover.unlink()
                removed += 1
        return removed


def _is_parts_folder(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


@contextlib.contextmanager
def open_parts(output: PathLike, identity: Dict[str, Any], plan: Any, overwrite: bool) -> Iterator[
        "PartsRun"]:
    """The folder to write, with the shards of this run; ``plan()`` cuts the input when needed.

    A folder with a manifest is continued when its identity (:data:`IDENTITY_KEYS`) is this
    run's, and refused with what differs otherwise; with ``overwrite`` it is replaced, but
    only once the new folder is complete. A non-empty folder that is not an annotation
    output is refused either way.
    """
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise InputError("exists and is a file; the distributed engine writes a folder of parts (choose another "
                         "--output)", output)
    check_replaceable(output, _is_parts_folder, "an annotation output (no manifest.json)",
                      "Choose another --output.")
    existing = PartsFolder(output).read_manifest() if output.is_dir() else None
    if existing is not None and not overwrite:
        found = [line for key in IDENTITY_KEYS
                 for line in differences({key: existing.get(key)}, {key: identity.get(key)})]
        if found:
            raise InputError(f"cannot resume: this output was written from another run ({'; '.join(found)}); use "
                             f"another --output, or --overwrite to start it again", output)
        folder = PartsFolder(output)
        folder.remove_temporaries()
        yield PartsRun(folder, [Shard.from_dict(s) for s in existing["shards"]], existing)
        return
    if existing is not None:  # --overwrite: build beside it, swap in when complete
        remove_stale_temps(output.parent, output.name)  # an earlier overwrite that was killed
        with atomic_dir(output) as tmp:
            yield _fresh(tmp, identity, plan)
        return
    output.mkdir(parents=True, exist_ok=True)
    yield _fresh(output, identity, plan)


def _fresh(folder: Path, identity: Dict[str, Any], plan: Any) -> "PartsRun":
    shards: List[Shard] = plan()
    manifest = {"format_version": FORMAT_VERSION, **identity, "status": "running",
                "shards": [shard.as_dict() for shard in shards]}
    parts = PartsFolder(folder)
    parts.write_manifest(manifest)
    return PartsRun(parts, shards, manifest)


class PartsRun:
    """A folder being written: its shards, which are finished, and the manifest to complete."""

    def __init__(self, folder: PartsFolder, shards: List[Shard], manifest: Dict[str, Any]) -> None:
        self.folder = folder
        self.shards = shards
        self.manifest = manifest

    def finished(self) -> Dict[str, Dict[str, Any]]:
        """Counts of the shards already done, by part name."""
        done = {}
        for shard in self.shards:
            counts = self.folder.finished(shard)
            if counts is not None:
                done[shard.part] = counts
        return done

    def complete(self, summary: Dict[str, Any]) -> None:
        """Mark the manifest complete, with the run's summary."""
        self.manifest.update(status="complete", summary=summary)
        self.folder.write_manifest(self.manifest)


__all__ = ["DONE", "MANIFEST", "PartsFolder", "PartsRun", "open_parts"]
