"""The machine a run trains on: its device, CPU threads and mixed precision, as an accelerate ``Accelerator``.

The device string follows the linker's rule (:func:`spacy_sapbert.util.devices.resolve_device`),
so a device the spaCy component accepts is one training accepts. Mixed precision is chosen
per device: what speeds training up on one (bf16 on a GPU, on a CPU with AMX) is emulated
and slower, or unsupported, on another, or native but slower than float32 (AVX512-BF16 on an Intel
CPU without AMX).
"""
from __future__ import annotations

import logging
from typing import Any, Tuple

import torch

from spacy_sapbert.util.devices import cpu_has_native_bf16, cpu_prefers_bf16, resolve_device

logger = logging.getLogger(__name__)


def resolve_amp(amp: str, device: str) -> str:
    """The accelerate ``mixed_precision`` for a device.

    GPU: ``auto`` is bf16 where the GPU has it, fp16 with a gradient scaler otherwise. CPU: ``bf16``
    is bf16 autocast where the CPU computes bf16 natively, ``auto`` only where bf16 is also faster
    than float32 there (:func:`~spacy_sapbert.util.devices.cpu_prefers_bf16`: not on an Intel CPU
    without AMX), otherwise none; fp16 autocast is never used on CPU. MPS: ``auto`` is full
    precision (autocast support there depends on the torch version); an explicit bf16/fp16 is
    passed on to accelerate."""
    if device == "cpu":
        native = cpu_has_native_bf16()
        if amp == "fp16" or (amp == "bf16" and not native):
            logger.warning("mixed precision %s ignored on this CPU (bf16 needs AMX or AVX512-BF16)", amp)
            return "no"
        if amp == "bf16":
            return "bf16"
        return "bf16" if amp == "auto" and cpu_prefers_bf16() else "no"
    if amp == "auto":
        if device == "mps":
            return "no"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return amp


def make_accelerator(device: str, amp: str, num_threads: int = 0, accelerator: Any = None) -> Tuple[str, Any]:
    """(resolved device, ``Accelerator``) for a run's ``device``/``amp`` settings; ``num_threads``
    > 0 sets torch's CPU threads first. Under ``accelerate launch`` the Accelerator joins the
    other processes; an ``accelerator`` given is used as it is."""
    device = resolve_device(device)
    if num_threads > 0:
        torch.set_num_threads(num_threads)
    if accelerator is None:
        from accelerate import Accelerator

        accelerator = Accelerator(cpu=device == "cpu", mixed_precision=resolve_amp(amp, device))
    return device, accelerator
