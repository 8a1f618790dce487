"""Encoder: a Hugging Face encoder turned into a function from names to unit vectors.

Everything that embeds text (training, indexing, queries) goes through this class so
that pooling, truncation and normalisation are the same everywhere; an index built with
one setting and queried with another would silently give worse links. The settings that
change the vectors (pooling, max length) travel with the model folder in
``sapbert.json`` and are part of :attr:`Encoder.fingerprint`.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from spacy_sapbert.encoding.backends import (BACKENDS, load_native, load_onnx, load_transformers, onnx_device,
                                             onnx_precision, pick_backend, read_transformers_config)
from spacy_sapbert.encoding.folder_check import check_model_folder
from spacy_sapbert.encoding.modelfiles import MINILM_ALIASES, SETTINGS_FILE, read_settings, resolve_model_path
from spacy_sapbert.encoding.pooling import POOLINGS, check_pooling
from spacy_sapbert.encoding.recorded import PendingDigests, recorded_fingerprint, worth_hashing
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.devices import DTYPE_CHOICES, check_dtype, cpu_has_native_bf16, cpu_prefers_bf16, resolve_device

logger = logging.getLogger(__name__)

# Re-exported: other modules import these from here.
__all__ = ["BACKENDS", "DEFAULT_BATCH_SIZE", "DEFAULT_MAX_LENGTH", "DTYPE_CHOICES", "Encoder", "MINILM_ALIASES",
           "POOLINGS", "SETTINGS_FILE", "check_dtype", "cpu_has_native_bf16", "cpu_prefers_bf16", "read_settings",
           "resolve_model_path"]

PathLike = Union[str, Path]
DEFAULT_MAX_LENGTH = 25
DEFAULT_BATCH_SIZE = 64
"""Texts per padded batch (the ``transformers`` backend) or per attention group of a packed pass (the
native one, :mod:`~spacy_sapbert.encoding.packed`, whose linear layers take every token of a pass at once:
1,024 tokens on a CPU, ``batch_size × max_length`` on a GPU when that is more).
Padded, on two CPU cores 32–64 short texts were fastest: mentions of BC5CDR dev linked against MEDIC
encoded in 4.3–4.8 s at 32–64 and 10.2 s at 256, KB names at 595 names/s at 64 and 525 at 256; packed,
groups of 32 to 256 of NCBI test's 404 mention texts were within the run-to-run noise. A GPU gains from
larger batches (``encode_batch_size``, ``--batch-size``)."""


class Encoder:
    """Texts → L2-normalised float32 vectors with a Hugging Face encoder.

    Texts are sorted by token length and, with the native backend, computed without padding
    (:mod:`~spacy_sapbert.encoding.packed`); on torch, inference runs under ``torch.inference_mode``.
    Precision (``dtype``): ``auto`` is float16 weights on a GPU,
    bf16 autocast on a CPU where bf16 beats float32 (AMX, or AVX512-BF16 on AMD; the weights stay
    float32; with ``half_linears``, for an encoder that only infers, the linear layers' are kept in
    bf16), float32 elsewhere. The weights, and so :attr:`fingerprint`, do not depend on it
    on CPU: an index built in float32 serves bf16 queries.
    """

    def __init__(
        self,
        model: PathLike,
        pooling: Optional[str] = None,
        max_length: Optional[int] = None,
        device: str = "auto",
        batch_size: int = DEFAULT_BATCH_SIZE,
        dtype: Optional[str] = None,
        backend: str = "auto",
        half_linears: bool = False,
    ) -> None:
        from spacy_sapbert.util.threads import protect_forks

        protect_forks()  # nlp.pipe(n_process=N) forks after torch has run: see threads.py
        check_dtype(dtype)  # now, not after a model was loaded for nothing
        self.source = str(model)
        location = resolve_model_path(model)
        self._location = location
        settings = read_settings(location)
        self._recorded_source = str(settings.get("source") or self.source)
        """What :meth:`save` records as the source: the one a saved folder already names, so that
        re-saving a loaded model (a pipeline's ``to_disk``) keeps it rather than a local path."""
        self.backend, native_config = pick_backend(backend, location)
        """``native`` (:mod:`spacy_sapbert.encoding.bert`, no ``transformers`` import), ``onnx`` (the same model on
        ONNX Runtime, no torch: :mod:`spacy_sapbert.encoding.onnx_bert`) or ``transformers``."""
        self.device = onnx_device(device) if self.backend == "onnx" else resolve_device(device)
        self.dtype = self._pick_dtype(dtype)
        self.autocast = self.dtype == "bfloat16" and self.device == "cpu"
        """CPU bf16: the weights stay float32 and the forward pass runs under bf16 autocast."""
        self._float_weights: Optional[Path] = None
        """The file whose float weights :meth:`save` and :attr:`fingerprint` read, when the linear layers are
        kept in bf16."""
        # the files' digests that may confirm the recorded fingerprint, hashed while the weights load
        asked = {"pooling": pooling, "max_length": max_length}
        pending = PendingDigests(location) if worth_hashing(location, settings, asked) else None
        try:
            self._read_model(location, settings, native_config, pooling, max_length, batch_size, half_linears)
        except BaseException:
            if pending is not None:
                pending.wait()
            raise
        recorded = recorded_fingerprint(location, settings, self.settings, pending)
        self._fingerprint_cache: Optional[tuple] = (self._versions(), recorded) if recorded else None
        self._load_fingerprint: Optional[str] = None
        if self._float_weights is not None:  # an inference model: its fingerprint, of the float weights, now
            self._load_fingerprint = self.fingerprint
        self._place()
        logger.info("encoder %s: pooling=%s max_length=%d device=%s dtype=%s", self.source, self.pooling,
                    self.max_length, self.device, self.dtype)

    def _read_model(self, location: Any, settings: Dict[str, Any], native_config: Any, pooling: Optional[str],
                    max_length: Optional[int], batch_size: int, half_linears: bool) -> None:
        """The model, tokenizer, pooling, length and batch size (``__init__``'s reading of the folder)."""
        config: Any = None
        if self.backend == "onnx":
            assert isinstance(location, Path)
            check_model_folder(location, native_config)
            self.model, self.tokenizer, limit = load_onnx(location, native_config)
        elif self.backend == "native":
            assert isinstance(location, Path)
            check_model_folder(location, native_config)  # a missing tokenizer or cut weights: one error, not [UNK] links
            # inference only: the word-piece table as the file stores it (23 MB less for the default) and, with
            # half_linears under CPU bf16 autocast, the linear layers in bf16 (21 MB less, no cast per batch);
            # the same vectors to the bit (half_weights says why)
            half = half_linears and self.autocast
            self.model, self.tokenizer, limit = load_native(location, native_config, "bfloat16" if half else None,
                                                            str(settings.get("weights_dtype", "float32")))
            if half:
                self._float_weights = location / "model.safetensors"
        else:  # the config only: settings and device are checked before the weights load
            config = read_transformers_config(location, self.source)  # "not an encoder" comes first
            if isinstance(location, Path):
                check_model_folder(location)
            limit = getattr(config, "max_position_embeddings", None)
        self.pooling = check_pooling(pooling or settings.get("pooling") or "cls")
        self.max_length = _check_max_length(int(max_length or settings.get("max_length") or DEFAULT_MAX_LENGTH), limit)
        if batch_size < 1:
            raise InputError(f"batch_size must be positive, got {batch_size}", field="batch_size")
        self.batch_size = int(batch_size)
        if config is not None:
            self.model, self.tokenizer = load_transformers(location, config)
        if self.tokenizer.pad_token_id is None:
            raise InputError("the tokenizer has no padding token", str(location))
        self.model.eval()
        self.weights_dtype = str(settings.get("weights_dtype", "float32"))
        """Precision of the weights as stored (float16 for the shipped default); ``save`` keeps it."""

    # -- precision ------------------------------------------------------------------
    def _place(self) -> None:
        """Move the model to its device in its precision (:attr:`dtype`; under autocast the weights stay)."""
        if self.backend == "onnx":
            return
        import torch

        if self.dtype != "float32" and not self.autocast:
            # Half-precision weights hash differently; the model is the one we loaded.
            self._load_fingerprint = self.fingerprint
            self.model.to(getattr(torch, self.dtype))
        self.model.to(self.device)

    def _float_state(self) -> Dict[str, Any]:
        """The weights in float32: in memory, or, for linear layers kept in bf16, from the file they were
        read from (checked to round to the weights in use: a file replaced since is an error)."""
        if self.backend == "onnx":
            from spacy_sapbert.encoding.onnx_bert import float_state

            return float_state(self._location)
        state = {k: v.detach().float().cpu() for k, v in self.model.state_dict().items()}
        if self._float_weights is None:
            return state
        import torch
        from safetensors.torch import load_file

        from spacy_sapbert.encoding.bert import state_name
        from spacy_sapbert.encoding.half_weights import half_linear_weights

        stored = load_file(str(self._float_weights)) if self._float_weights.is_file() else {}
        stored = {state_name(name): tensor for name, tensor in stored.items()}
        in_use = self.model.state_dict()
        for name in half_linear_weights(self.model, "bfloat16"):
            tensor, original = in_use[name], stored.get(name)
            if original is None or not torch.equal(original.to(torch.bfloat16), tensor):
                raise InputError("the encoder keeps its linear layers in bf16 and reads their float weights from "
                                 f"its file to save them, but the file no longer holds them ({name})",
                                 self._float_weights)
            state[name] = original.float()
        return state

    def _pick_dtype(self, dtype: Optional[str]) -> str:
        """``auto``: float16 on a GPU, bf16 autocast on a CPU where it beats float32, float32 elsewhere.
        (``cpu_prefers_bf16`` and ``cpu_has_native_bf16`` are looked up in this module, where tests
        replace them.)"""
        on_gpu = self.device.startswith("cuda")
        key = check_dtype(dtype)
        if self.backend == "onnx":
            return onnx_precision(key, f"encoder {self.source}")
        if key == "auto":
            if on_gpu:
                return "float16"
            return "bfloat16" if self.device == "cpu" and cpu_prefers_bf16() else "float32"
        if on_gpu or key == "float32":
            return key
        if key == "bfloat16" and self.device == "cpu":
            if not cpu_has_native_bf16():
                logger.warning("this CPU has no native bf16 (AMX / AVX512-BF16): bf16 autocast is emulated and "
                               "slower than float32")
            return key
        logger.warning("dtype %s is used on GPU only (bfloat16 also on CPU); encoding in float32 on %s", key,
                       self.device)
        return "float32"

    # -- settings -------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def settings(self) -> Dict[str, Any]:
        """What ``sapbert.json`` records: everything besides the weights that shapes a vector."""
        return {"pooling": self.pooling, "max_length": self.max_length}

    # -- identity -------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """A hash of the weights, the vocabulary, pooling and max length.

        An index stores it; loading the index with another encoder is then an error
        rather than wrong links. It follows in-place weight updates (training) through
        the tensors' version counters, so it is recomputed only when weights changed.
        """
        if self._load_fingerprint is not None:
            return self._load_fingerprint
        versions = self._versions()
        if self._fingerprint_cache is None or self._fingerprint_cache[0] != versions:
            self._fingerprint_cache = (versions, self._compute_fingerprint())
        return self._fingerprint_cache[1]

    def _versions(self) -> tuple:
        """What changes when the fingerprint may: in-place weight updates (version counters), pooling, length."""
        return sum(p._version for p in self.model.parameters()), self.pooling, self.max_length

    def _compute_fingerprint(self) -> str:
        digest = hashlib.sha256()
        digest.update(json.dumps(self.settings, sort_keys=True).encode())
        vocab = sorted(self.tokenizer.get_vocab().items())
        digest.update(json.dumps(vocab, ensure_ascii=False).encode("utf-8"))
        for name, tensor in sorted(self._float_state().items()):  # linear layers kept in bf16: from the file
            array = np.ascontiguousarray(tensor) if isinstance(tensor, np.ndarray) else tensor.contiguous().numpy()
            digest.update(f"{name}:{tuple(array.shape)}".encode())
            digest.update(array.tobytes())
        return digest.hexdigest()[:16]

    # -- encoding -------------------------------------------------------------------
    def encode(self, texts: Sequence[str], batch_size: Optional[int] = None, show_progress: bool = False,
               normalize: bool = True) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order (with ``normalize=False``
        the raw pooled vectors, which SapBERT's own evaluation ranks by inner product).

        Texts longer than ``max_length`` tokens are truncated (names rarely are; a long
        mention keeps its head words). An empty string encodes as ``[CLS] [SEP]``.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not all(isinstance(t, str) for t in texts):
            raise InputError("encode() takes strings only")
        batch_size = int(batch_size or self.batch_size)
        ids: List[List[int]] = self.tokenizer(texts, truncation=True, max_length=self.max_length,
                                              add_special_tokens=True)["input_ids"]
        if self.backend == "onnx":  # no torch: padded batches of texts of about one length
            from spacy_sapbert.encoding.onnx_bert import encode_ids

            return encode_ids(self.model, ids, int(self.tokenizer.pad_token_id), self.pooling, batch_size, normalize,
                              show_progress)
        from spacy_sapbert.encoding.torch_encoding import encode_ids as encode_on_torch

        return encode_on_torch(self, ids, batch_size, normalize, show_progress)

    # -- files ----------------------------------------------------------------------
    def round_weights(self, dtype: str = "float16") -> None:
        """Round the weights to ``dtype`` in place (they stay float32 tensors), so that saving them in
        ``dtype`` loses nothing: an index built after this matches the model loaded back from the compact
        file (:func:`~spacy_sapbert.encoding.saving.round_encoder_weights`)."""
        from spacy_sapbert.encoding.saving import round_encoder_weights

        if self.backend == "onnx":
            raise InputError("rounding the weights needs the native backend (torch); this encoder runs on onnx",
                             field="backend")
        round_encoder_weights(self, dtype)

    def save(self, folder: PathLike, weights_dtype: Optional[str] = None) -> Path:
        """Write an HF model folder (safetensors) with ``sapbert.json`` and sentence-transformers'
        module files beside it (:func:`~spacy_sapbert.encoding.saving.save_encoder`). Weights are
        stored in ``weights_dtype`` (default: as loaded or rounded, float32 otherwise); a
        half-precision file is written only from weights that it represents exactly."""
        from spacy_sapbert.encoding.saving import save_encoder

        return save_encoder(self, folder, weights_dtype)

    def __repr__(self) -> str:
        return (f"Encoder({self.source!r}, pooling={self.pooling!r}, max_length={self.max_length}, "
                f"device={self.device!r}, dtype={self.dtype!r}, backend={self.backend!r})")


def _check_max_length(max_length: int, limit: Optional[int]) -> int:
    """``max_length`` when the model's position embeddings reach that far (and it leaves room for a word)."""
    if max_length < 3 or (isinstance(limit, int) and max_length > limit):
        raise InputError(f"max_length {max_length} outside 3..{limit} (the model's position limit)",
                         field="max_length")
    return max_length
