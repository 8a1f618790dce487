"""What an annotation output was made from, so that a resume never mixes two inputs.

The output is resumed by record ordinal, which is only meaningful for the same input
read the same way by the same pipeline. Beside ``OUT`` a small sidecar
(``OUT.sapbert.json``) records the input's identity (resolved path, size, modification
time, SHA-256 of its first MiB; for a folder, the same over its ``.txt`` files), the
reading options and the pipeline's identity. A resume whose input or pipeline differs
is refused with a message that says what differs.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from spacy_sapbert.annotate.readers import folder_documents
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.atomic import atomic_write_text
from spacy_sapbert.util.jsonfile import read_json_object

PathLike = Union[str, Path]
SIDECAR_SUFFIX = ".sapbert.json"
HEAD_BYTES = 1 << 20


def sidecar_path(output: PathLike) -> Path:
    output = Path(output)
    return output.with_name(output.name + SIDECAR_SUFFIX)


def _file_identity(path: Path) -> Dict[str, Any]:
    stat = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        digest.update(handle.read(HEAD_BYTES))
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head_sha256": digest.hexdigest()}


def input_identity(source: PathLike) -> Dict[str, Any]:
    """Path, size, modification time and a hash of the head of ``source`` (or of a folder's files)."""
    source = Path(source)
    identity: Dict[str, Any] = {"path": str(source.resolve())}
    if source.is_dir():
        digest = hashlib.sha256()
        for file in folder_documents(source):
            stat = file.stat()
            digest.update(f"{file.relative_to(source).as_posix()}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
        identity["files_sha256"] = digest.hexdigest()
    else:
        identity.update(_file_identity(source))
    return identity


def files_identity(files: List[Path]) -> Dict[str, Any]:
    """Several input files (a glob, a folder of files): each one's path, size and modification time."""
    digest = hashlib.sha256()
    for file in files:
        stat = file.stat()
        digest.update(f"{file.resolve()}\t{stat.st_size}\t{stat.st_mtime_ns}\n".encode())
    return {"files": len(files), "files_sha256": digest.hexdigest()}


def pipeline_identity(nlp: Any) -> Dict[str, Any]:
    """Name, version, components and a hash of the config (device settings left out: moving a
    run to a GPU does not change its output)."""
    return _config_identity(nlp.config.copy(), nlp.meta, list(nlp.pipe_names))


def saved_pipeline_identity(location: PathLike) -> Dict[str, Any]:
    """:func:`pipeline_identity` of a saved pipeline, read from its config and meta without loading it
    (the distributed engine's driver, whose workers do the loading)."""
    from spacy.util import load_config, load_meta

    location = Path(location)
    config = load_config(location / "config.cfg")
    meta = load_meta(location / "meta.json") if (location / "meta.json").is_file() else {}
    return _config_identity(config, meta, list(config.get("nlp", {}).get("pipeline", [])))


def _config_identity(config: Any, meta: Dict[str, Any], pipe_names: List[str]) -> Dict[str, Any]:
    """The identity; a linker's default candidate-stage blocks count as absent, as in a config saved
    before they existed (a loaded pipeline's config has them, its ``config.cfg`` may not)."""
    from spacy_sapbert.linking.stages import STAGE_CONFIG

    for component in config.get("components", {}).values():
        component.pop("device", None)
        for key, default in STAGE_CONFIG.items():
            if component.get(key) == default:
                component.pop(key)
    digest = hashlib.sha256(config.to_str().encode("utf-8")).hexdigest()[:16]
    return {"name": meta.get("name", ""), "version": meta.get("version", ""), "components": pipe_names,
            "config_sha256": digest}


def differences(recorded: Dict[str, Any], current: Dict[str, Any], prefix: str = "") -> List[str]:
    out = []
    for key in list(current) + [k for k in recorded if k not in current]:
        old, new = recorded.get(key), current.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            out.extend(differences(old, new, f"{prefix}{key}."))
        elif old != new:
            out.append(f"{prefix}{key}: {old!r} then, {new!r} now")
    return out


class RunRecord:
    """The sidecar: read it, compare it with the current run, write it."""

    def __init__(self, output: PathLike, current: Dict[str, Any]) -> None:
        self.output = Path(output)
        self.path = sidecar_path(output)
        self.current = current

    def recorded(self) -> Optional[Dict[str, Any]]:
        if not self.path.is_file():
            return None
        try:
            return read_json_object(self.path)
        except InputError as err:
            raise InputError(f"cannot read the record of what {self.output.name} was made from ({err.problem}); "
                             f"use --overwrite to start the output again", self.path) from err

    def check_resume(self, *parts: str) -> None:
        """Refuse to resume when any of ``parts`` ('input', 'pipeline') differs from the recorded run."""
        recorded = self.recorded()
        if recorded is None:
            raise InputError(f"cannot resume: there is no record ({self.path.name}) of the input and pipeline this "
                             f"output was written from (an older version, or not written by sapbert annotate); use "
                             f"another --output, or --overwrite to start it again", self.output)
        for part in parts:
            found = differences(recorded.get(part, {}), self.current.get(part, {}))
            if found:
                raise InputError(f"cannot resume: this output was written from another {part} "
                                 f"({'; '.join(found)}); use another --output, or --overwrite to start it "
                                 f"again", self.output)

    def write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.current, indent=2, ensure_ascii=False) + "\n")

    def remove(self) -> None:
        if self.path.exists():
            self.path.unlink()


__all__ = ["RunRecord", "SIDECAR_SUFFIX", "differences", "files_identity", "input_identity", "pipeline_identity",
           "saved_pipeline_identity", "sidecar_path"]
