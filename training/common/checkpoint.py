"""Training checkpoints without pickle.

A checkpoint is a folder ``step-000100/`` holding

- ``model.safetensors``: the encoder's weights;
- ``optimizer.safetensors`` + the ``optimizer`` entry of ``trainer_state.json``: the
  optimiser's tensors (Adam moments, step counters) and its plain-data remainder;
- ``rng-rank{r}.safetensors``: each process's torch (CPU and CUDA) RNG state, so dropout
  continues exactly where it stopped;
- ``trainer_state.json``: step, settings, scheduler/scaler state, Python RNG state, metrics.

Nothing is ever unpickled, so loading a checkpoint from elsewhere cannot run code.

A kill -9 (or a power cut) at any moment must leave a checkpoint that ``--resume`` can
use, so a checkpoint folder only ever appears whole: every process writes its RNG file into
a staging folder ``step-0000100.tmp/``, then the main process builds the checkpoint in a
temporary sibling (:func:`spacy_sapbert.util.atomic.atomic_dir`), fsyncs it and swaps it in.
``trainer_state.json`` records the size of every file beside it, so a folder damaged later
(a failed copy, a disk error) is not taken for complete either. There is no "latest"
pointer to keep in step: the latest checkpoint is the complete folder with the highest
step. Old checkpoints are renamed to a hidden name before they are deleted, so a kill
during the deletion never leaves a half-deleted folder that looks like a checkpoint.
"""
from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save, save_file, save_model

from spacy_sapbert.util.atomic import atomic_dir, atomic_write_bytes, remove_stale_temps, temp_sibling
from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
STATE_FILE = "trainer_state.json"
PREFIX = "step-"
TMP_SUFFIX = ".tmp"
FILES_KEY = "files"
"""``trainer_state.json`` entry: {file name: size in bytes} of the checkpoint's other files."""
REQUIRED_FILES = ("model.safetensors", "optimizer.safetensors", "rng-rank0.safetensors")


def checkpoint_name(step: int) -> str:
    return f"{PREFIX}{step:07d}"


def rng_file_name(rank: int) -> str:
    return f"rng-rank{rank}.safetensors"


def _step_of(path: Path) -> Optional[int]:
    number = path.name[len(PREFIX):]
    return int(number) if path.name.startswith(PREFIX) and number.isdigit() else None


def _step_folders(folder: Path) -> List[Path]:
    """``step-NNNNNNN`` folders, complete or not (not staging or hidden ones), oldest first."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir() and _step_of(p) is not None), key=_step_of)


def is_complete(checkpoint: PathLike) -> bool:
    """Every file the state records is there with its recorded size (checkpoints written before
    sizes were recorded: the required files exist)."""
    checkpoint = Path(checkpoint)
    try:
        state = json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    files = state.get(FILES_KEY) if isinstance(state, dict) else None
    if not isinstance(files, dict):
        return isinstance(state, dict) and all((checkpoint / name).is_file() for name in REQUIRED_FILES)
    try:
        return all((checkpoint / name).stat().st_size == size for name, size in files.items())
    except OSError:
        return False


def list_checkpoints(folder: PathLike) -> List[Path]:
    """Complete checkpoints in ``folder``, oldest first; incomplete ones are logged and skipped."""
    found = []
    for path in _step_folders(Path(folder)):
        if is_complete(path):
            found.append(path)
        else:
            logger.warning("ignoring incomplete checkpoint %s (files missing or of the wrong size)", path)
    return found


def latest_checkpoint(folder: PathLike) -> Optional[Path]:
    """The complete checkpoint with the highest step: what ``--resume`` continues from."""
    found = list_checkpoints(folder)
    return found[-1] if found else None


# -- optimiser state as tensors + JSON ----------------------------------------------------

def _split_optimizer_state(state_dict: Dict[str, Any]) -> Tuple[Dict[str, torch.Tensor], Dict[str, Any]]:
    tensors: Dict[str, torch.Tensor] = {}
    plain: Dict[str, Dict[str, Any]] = {}
    for param_id, values in state_dict["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{param_id}/{key}"] = value.detach().cpu().contiguous()
            else:
                plain.setdefault(str(param_id), {})[key] = value
    return tensors, {"param_groups": state_dict["param_groups"], "plain_state": plain}


def _join_optimizer_state(tensors: Dict[str, torch.Tensor], meta: Dict[str, Any]) -> Dict[str, Any]:
    state: Dict[int, Dict[str, Any]] = {}
    for name, value in tensors.items():
        param_id, key = name.split("/", 1)
        state.setdefault(int(param_id), {})[key] = value
    for param_id, values in meta["plain_state"].items():
        state.setdefault(int(param_id), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


# -- RNG --------------------------------------------------------------------------------

def rng_tensors() -> Dict[str, torch.Tensor]:
    tensors = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"torch_cuda_{i}"] = state
    return tensors


def restore_rng(tensors: Dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(tensors["torch_cpu"])
    cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("torch_cuda_"))]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)


def python_rng_state() -> List[Any]:
    version, internal, gauss = random.getstate()
    return [version, list(internal), gauss]


def restore_python_rng(state: List[Any]) -> None:
    version, internal, gauss = state
    random.setstate((version, tuple(internal), gauss))


# -- save / load ------------------------------------------------------------------------

def tmp_folder(folder: PathLike, step: int) -> Path:
    """The staging folder where every process leaves its RNG file for the checkpoint of ``step``."""
    return Path(folder) / (checkpoint_name(step) + TMP_SUFFIX)


def clean_leftovers(folder: PathLike) -> None:
    """Remove what killed saves left: hidden temporary folders and staging folders."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    removed = remove_stale_temps(folder, f"{PREFIX}*")
    for staging in folder.glob(f"{PREFIX}*{TMP_SUFFIX}"):
        if staging.is_dir():
            shutil.rmtree(staging, ignore_errors=True)
            removed += 1
    if removed:
        logger.info("removed %d temporary folder(s) left in %s by an interrupted save", removed, folder)


def save_rank_rng(folder: PathLike, step: int, rank: int) -> None:
    """Every process writes its own RNG state into the staging folder of ``step``."""
    tmp = tmp_folder(folder, step)
    tmp.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(tmp / rng_file_name(rank), save(rng_tensors()))


def prepare_folder(folder: PathLike, step: int) -> Path:
    """Main process, before the others write their RNG files: a fresh staging folder, leftovers removed."""
    clean_leftovers(folder)
    tmp = tmp_folder(folder, step)
    tmp.mkdir(parents=True)
    return tmp


def _remove(path: Path) -> None:
    """Delete a checkpoint so that a kill half-way leaves no folder that looks like one."""
    aside = temp_sibling(path)
    os.replace(path, aside)
    shutil.rmtree(aside, ignore_errors=True)


def prune(folder: PathLike, keep: int) -> None:
    """Keep the newest ``keep`` complete checkpoints; remove every older (or incomplete older) folder."""
    if keep <= 0:
        return
    kept = list_checkpoints(folder)[-keep:]
    if not kept:
        return
    oldest_kept = _step_of(kept[0])
    for path in _step_folders(Path(folder)):
        if _step_of(path) < oldest_kept:  # type: ignore[operator]
            _remove(path)


def save_main(folder: PathLike, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
              state: Dict[str, Any], keep: int = 2, world: int = 1) -> Path:
    """Write the model, optimiser and trainer state (main process), then publish the folder whole.

    Call after every one of the ``world`` processes has written its RNG file (:func:`save_rank_rng`)."""
    folder = Path(folder)
    staging = tmp_folder(folder, step)
    rng_files = [staging / rng_file_name(rank) for rank in range(world)]
    missing = [path.name for path in rng_files if not path.is_file()]
    if missing:
        raise RuntimeError(f"checkpoint of step {step} not saved: {', '.join(missing)} missing from {staging} "
                           f"(every process writes its RNG file before the main process publishes the folder)")
    final = folder / checkpoint_name(step)
    with atomic_dir(final) as tmp:
        for path in rng_files:
            os.replace(path, tmp / path.name)
        save_model(model, str(tmp / "model.safetensors"))
        tensors, meta = _split_optimizer_state(optimizer.state_dict())
        save_file(tensors, str(tmp / "optimizer.safetensors"))
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}
        state = {**state, "optimizer": meta, "python_rng": python_rng_state(), FILES_KEY: files}
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")
    shutil.rmtree(staging, ignore_errors=True)
    prune(folder, keep)
    logger.info("checkpoint saved: %s", final)
    return final


def read_state(checkpoint: PathLike) -> Dict[str, Any]:
    path = Path(checkpoint) / STATE_FILE
    return json.loads(path.read_text(encoding="utf-8"))


def load(checkpoint: PathLike, model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank: int,
         device: Union[str, torch.device] = "cpu") -> Dict[str, Any]:
    """Restore model, optimiser and this process's RNG; return the trainer state."""
    checkpoint = Path(checkpoint)
    state = read_state(checkpoint)
    rng_file = checkpoint / rng_file_name(rank)
    if not rng_file.is_file():
        raise FileNotFoundError(f"{rng_file} missing: was the run saved with fewer processes?")
    try:
        load_model(model, str(checkpoint / "model.safetensors"), strict=True, device=str(device))
        tensors = load_file(str(checkpoint / "optimizer.safetensors"), device=str(device))
        optimizer.load_state_dict(_join_optimizer_state(tensors, state["optimizer"]))
        restore_rng(load_file(str(rng_file)))
    except (OSError, SafetensorError) as err:
        raise InputError(f"cannot restore this checkpoint ({err}); move it away to resume from the one "
                         f"before it", checkpoint) from err
    restore_python_rng(state["python_rng"])
    return state
