"""Training checkpoints without pickle.

A checkpoint is a folder ``step-000100/`` holding

- ``model.safetensors``: the encoder's weights;
- ``optimizer.safetensors`` + the ``optimizer`` entry of ``trainer_state.json``: the
  optimiser's tensors (Adam moments, step counters) and its plain-data remainder;
- ``rng-rank{r}.safetensors``: each process's torch (CPU and CUDA) RNG state, so dropout
  continues exactly where it stopped;
- ``trainer_state.json``: step, settings, scheduler/scaler state, Python RNG state, metrics.

Nothing is ever unpickled, so loading a checkpoint from elsewhere cannot run code. A
folder is written under a temporary name and renamed when complete, so a run killed
while saving leaves the previous checkpoint intact.
"""
from __future__ import annotations

import json
import logging
import random
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
STATE_FILE = "trainer_state.json"
PREFIX = "step-"
TMP_SUFFIX = ".tmp"


def checkpoint_name(step: int) -> str:
    return f"{PREFIX}{step:07d}"


def list_checkpoints(folder: PathLike) -> List[Path]:
    """Complete checkpoints in ``folder``, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir()
             if p.is_dir() and p.name.startswith(PREFIX) and not p.name.endswith(TMP_SUFFIX)
             and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX):]))


def latest_checkpoint(folder: PathLike) -> Optional[Path]:
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
    return Path(folder) / (checkpoint_name(step) + TMP_SUFFIX)


def save_rank_rng(folder: PathLike, step: int, rank: int) -> None:
    """Every process writes its own RNG state into the (not yet renamed) checkpoint folder."""
    tmp = tmp_folder(folder, step)
    tmp.mkdir(parents=True, exist_ok=True)
    save_file(rng_tensors(), str(tmp / f"rng-rank{rank}.safetensors"))


def prepare_folder(folder: PathLike, step: int) -> Path:
    tmp = tmp_folder(folder, step)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def save_main(folder: PathLike, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
              state: Dict[str, Any], keep: int = 2) -> Path:
    """Write the model, optimiser and trainer state (main process), then publish the folder.

    Call after every process has written its RNG file (:func:`save_rank_rng`)."""
    tmp = tmp_folder(folder, step)
    save_model(model, str(tmp / "model.safetensors"))
    tensors, meta = _split_optimizer_state(optimizer.state_dict())
    save_file(tensors, str(tmp / "optimizer.safetensors"))
    state = dict(state, optimizer=meta, python_rng=python_rng_state())
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")
    final = Path(folder) / checkpoint_name(step)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    for old in list_checkpoints(folder)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
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
    missing, unexpected = load_model(model, str(checkpoint / "model.safetensors"), strict=True, device=str(device))
    tensors = load_file(str(checkpoint / "optimizer.safetensors"), device=str(device))
    optimizer.load_state_dict(_join_optimizer_state(tensors, state["optimizer"]))
    rng_file = checkpoint / f"rng-rank{rank}.safetensors"
    if not rng_file.is_file():
        raise FileNotFoundError(f"{rng_file} missing: was the run saved with fewer processes?")
    restore_rng(load_file(str(rng_file)))
    restore_python_rng(state["python_rng"])
    return state
