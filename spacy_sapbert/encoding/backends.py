"""Loading an encoder's weights and tokenizer with one of three backends.

``native`` (:mod:`spacy_sapbert.encoding.bert`) computes a plain BERT with torch alone and never
imports ``transformers``, which saves seconds when the default pipeline loads; ``onnx``
(:mod:`spacy_sapbert.encoding.onnx_bert`) computes the same model on ONNX Runtime without torch, which
saves its ~220 MB where torch is not installed or not wanted; ``transformers`` runs anything else. The
:class:`~spacy_sapbert.encoding.encoder.Encoder` picks one per model folder and loads through the functions here.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

from spacy_sapbert.encoding.modelfiles import check_is_encoder
from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)
BACKENDS = ("auto", "native", "onnx", "transformers")


def pick_backend(backend: Optional[str], location: Union[Path, str]) -> Tuple[str, Optional[Dict[str, Any]]]:
    """``auto``: ``native`` for a local plain-BERT folder with safetensors weights and a
    ``tokenizer.json`` (the default pipeline, MiniLM), or ``onnx`` for such a folder where torch does not
    import; ``transformers`` for anything else; with the config.json it read for ``native``/``onnx`` (so it
    is read once)."""
    backend = (backend or "auto").lower()
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}: use one of {BACKENDS}", field="backend")
    if backend == "transformers":
        return backend, None
    reason = "not a local folder"
    if isinstance(location, Path):
        from spacy_sapbert.encoding import bert_settings

        try:
            config = json.loads((location / "config.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
            config, reason = None, f"config.json unreadable ({err})"
        if isinstance(config, dict):
            ok, reason = bert_settings.supports(location, config)
            if ok:
                return _native_or_onnx(backend, location), config
    if backend in ("native", "onnx"):
        raise InputError(f"the {backend} backend cannot run this model: {reason}", str(location), field="backend")
    return "transformers", None


def _native_or_onnx(backend: str, location: Path) -> str:
    """``backend`` for a folder both can run: ``auto`` is ``native`` where torch imports, else ``onnx``."""
    return "onnx" if wants_onnx(backend, str(location)) else "native"


def wants_onnx(backend: str, where: Optional[str] = None) -> bool:
    """Whether a torch-or-onnx ``backend`` setting (``auto``, ``onnx``, or the torch one: the encoder's ``native``,
    the NER's ``torch``) runs on ONNX Runtime: ``auto`` does where torch does not import. An onnx choice without
    onnxruntime installed is an :class:`InputError` (``where``: the model it is for)."""
    from spacy_sapbert.encoding import onnx_bert
    from spacy_sapbert.util.devices import torch_installed

    onnx = backend == "onnx" or backend == "auto" and not torch_installed()
    if onnx and not onnx_bert.available():
        raise InputError("the onnx backend needs onnxruntime and onnx (pip install 'spacy-sapbert[onnx]')" +
                         ("" if torch_installed() else ", and torch, which runs the native one, is not installed"),
                         where, field="backend")
    return onnx


def onnx_device(device: Optional[str]) -> str:
    """The onnx backend's device: the CPU (``auto`` included); any other is an error, not a silent fallback."""
    if (device or "auto").lower() not in ("auto", "cpu"):
        from spacy_sapbert.util.devices import torch_installed

        why = "" if torch_installed() else " (torch, which runs the models on a GPU, is not installed here: pip " \
            "install 'spacy-sapbert[torch]')"
        raise InputError(f"the onnx backend runs on the CPU only, not on {device!r}{why}", field="device")
    return "cpu"


def onnx_precision(requested: str, who: str) -> str:
    """The onnx backend's precision, float32: a request for another (``auto`` aside) is logged as not used."""
    if str(requested).lower() not in ("auto", "float32", "fp32"):
        logger.warning("%s: the onnx backend computes in float32; precision %r is not used", who, requested)
    return "float32"


def load_onnx(location: Path, config: Dict[str, Any]) -> Tuple[Any, Any, Optional[int]]:
    """(model, tokenizer, position limit) of a folder :func:`pick_backend` chose ``onnx`` for."""
    from spacy_sapbert.encoding import onnx_bert
    from spacy_sapbert.encoding.fast_tokenizer import FastTokenizer

    try:
        model = onnx_bert.load(location, config)
    except Exception as err:  # onnxruntime's own errors (Fail, InvalidGraph) derive from Exception alone
        raise InputError(f"cannot load the model ({err})", str(location)) from err
    return model, FastTokenizer(location, config.get("pad_token_id")), config.get("max_position_embeddings")


def load_native(location: Path, config: Optional[Dict[str, Any]], linear_dtype: Optional[str] = None,
                table_dtype: Optional[str] = None) -> Tuple[Any, Any, Optional[int]]:
    """(model, tokenizer, position limit) of a folder :func:`pick_backend` chose ``native`` for; the two
    precisions of an inference model as :meth:`~spacy_sapbert.encoding.bert.BertEncoder.from_folder` takes them."""
    from spacy_sapbert.encoding import bert

    try:
        model, tokenizer, config_dict = bert.load(location, config, linear_dtype, table_dtype)
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        raise InputError(f"cannot load the model ({err})", str(location)) from err
    return model, tokenizer, config_dict.get("max_position_embeddings")


def read_transformers_config(location: Union[Path, str], source: str) -> Any:
    """The ``transformers`` config of a folder or hub name, checked to be a BERT-like encoder.

    Read before the weights, so a wrong model (or setting) is refused before it is loaded."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(location)
    except (OSError, ValueError, KeyError) as err:
        if isinstance(location, Path):
            raise InputError(f"cannot read the model config ({err})", location) from err
        raise InputError(f"model {source!r} is neither a local folder (no such path) nor a Hugging "
                         f"Face hub model available offline ({err.__class__.__name__}: {err})") from err
    check_is_encoder(config, str(location))
    return config


def load_transformers(location: Union[Path, str], config: Any) -> Tuple[Any, Any]:
    """(model, tokenizer) with ``transformers``; the weights in float32, whatever the file stores."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
        model = AutoModel.from_pretrained(location, config=config, dtype=torch.float32)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load the tokenizer/model ({err})", str(location)) from err
    return model, tokenizer
