"""Where a model runs and in what precision: one rule for the linker and the trainer.

The spaCy component, the :class:`~spacy_sapbert.encoding.encoder.Encoder` and the trainer all take a
device string and a precision. Deciding here, once, which strings are valid means a setting
the pipeline accepts is accepted by training too (``mps`` included), and an unusable one is
the same clear error on both sides. torch is imported only when a function runs, so that
importing the package stays fast.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from spacy_sapbert.errors import InputError

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N, mps"
"""The device settings accepted everywhere (the component's settings check says the same)."""
_CUDA = re.compile(r"cuda(?::(\d+))?")

DTYPE_ALIASES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
                 "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16"}
"""Spellings of a precision → its canonical torch name."""
DTYPE_CHOICES = "auto, float32, float16, bfloat16 (aliases fp32, fp16, half, bf16)"
INT8_ALIASES = ("int8", "qint8")
"""Spellings of the NER's int8 precision (dynamic int8 linear layers on a CPU: :mod:`spacy_sapbert.encoding.int8`)."""


def torch_installed() -> bool:
    """Whether torch imports here. Where it does not (an install without it, or a process that blocked it:
    :func:`spacy_sapbert.util.torch_free.block_torch`), the native models run on ONNX Runtime instead."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_device(device: Optional[str] = "auto") -> str:
    """``auto`` → ``cuda`` when a GPU is visible, else ``cpu``; ``cpu``, ``cuda``, ``cuda:N`` and
    ``mps`` (case-insensitive) are checked against the hardware torch sees, so a device that
    is missing is an :class:`InputError` now rather than a torch error after a model loaded."""
    import torch

    device = (device or "auto").lower()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if device == "mps":
        if not torch.backends.mps.is_available():
            raise InputError(f"device 'mps' requested but torch {torch.__version__} has no usable MPS (Apple GPU) "
                             f"backend here; use cpu", field="device")
        return device
    cuda = _CUDA.fullmatch(device)
    if cuda is None:
        raise InputError(f"unknown device {device!r}: use one of {DEVICE_CHOICES}", field="device")
    if not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but no CUDA GPU is available to torch (torch "
                         f"{torch.__version__}, CUDA build: {torch.version.cuda}); use cpu", field="device")
    index = int(cuda.group(1) or 0)
    if index >= torch.cuda.device_count():
        raise InputError(f"device {device!r} requested but only {torch.cuda.device_count()} GPU(s) exist",
                         field="device")
    return device


def cpu_has_native_bf16() -> bool:
    """True on CPUs whose vector or matrix units compute bf16 (Intel AMX or AVX512-BF16): there an
    explicit bf16 precision runs as asked; elsewhere bf16 is emulated and slower than float32.
    Whether ``auto`` picks bf16 is :func:`cpu_prefers_bf16`."""
    import torch

    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def cpu_prefers_bf16() -> bool:
    """True where bf16 autocast is this CPU's fastest precision, so ``auto`` picks it: Intel AMX, or
    AVX512-BF16 on an AMD CPU. There bf16 autocast ran MiniLM 2.1-2.9× faster than float32 at
    inference and ≈2-3× in training (2 cores). An Intel CPU with AVX512-BF16 but no AMX multiplies
    bf16 slower than float32 (2 cores of such a Xeon: 117-145 against 147-256 GFLOP/s over the
    models' shapes, and the default pipeline 9.7-10.3 against 15.1-16.3 docs/s), so there float32
    wins and bf16 is only what a user asks for."""
    import torch

    if bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()):
        return True
    avx512_bf16 = bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())
    return avx512_bf16 and cpu_vendor() == "AuthenticAMD"


def cpu_vendor(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """The CPU's vendor string (``GenuineIntel``, ``AuthenticAMD``, …), or ``""`` where it cannot be
    read: the ``vendor_id`` line of Linux's ``/proc/cpuinfo``, else what :func:`platform.processor`
    names (Windows ends it with the vendor)."""
    import platform

    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        pass
    described = platform.processor()
    return next((v for v in ("GenuineIntel", "AuthenticAMD") if v in described), "")


def cpu_autocast_dtype() -> Any:
    """The torch dtype CPU autocast computes in when it is on here, else None. torch 2.4 and later name the
    device (``is_autocast_enabled("cpu")``); earlier versions, which ``setup.py`` allows, have CPU-only
    functions instead."""
    import torch

    try:
        enabled = torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return torch.get_autocast_dtype("cpu") if enabled else None


def auto_precision(device: str) -> str:
    """What a float precision of ``auto`` means on ``device`` (a resolved one): float16 on a GPU, bf16
    autocast on a CPU where it is the fastest (:func:`cpu_prefers_bf16`), float32 elsewhere."""
    if device.startswith("cuda"):
        return "float16"
    return "bfloat16" if device == "cpu" and cpu_prefers_bf16() else "float32"


def check_dtype(dtype: Optional[str], setting: str = "dtype", int8: bool = False) -> str:
    """``auto`` or the canonical name of ``dtype`` (``fp16`` → ``float16``; case and a
    ``torch.`` prefix are ignored). ``setting`` is the caller's name for the value
    (``precision`` in the spaCy pipe, ``--precision`` on the command line), so that the
    error names what the user actually typed. ``int8``: the caller (the NER) also takes ``int8``;
    the linker's encoder does not (its vectors moved to cosine 0.95-0.97 of float32's under it)."""
    text = str(dtype or "auto").lower().replace("torch.", "")
    if text == "auto":
        return text
    if text in INT8_ALIASES:
        if int8:
            return "int8"
        raise InputError(f"{setting} {dtype!r} is the NER's (sapbert_ner) alone: use {DTYPE_CHOICES}", field=setting)
    key = DTYPE_ALIASES.get(text)
    if key is None:
        choices = DTYPE_CHOICES.replace(" (", ", int8 (") if int8 else DTYPE_CHOICES
        raise InputError(f"unknown {setting} {dtype!r}: use {choices}", field=setting)
    return key
