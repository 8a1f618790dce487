"""Writing an :class:`~spacy_sapbert.encoding.encoder.Encoder` to a model folder.

Apart from the encoder because writing is a job of its own: rounding the weights to the precision they
will be stored in, writing them in it (only when they represent it exactly), the settings file with the
fingerprint and file digests that loading checks, sentence-transformers' module files, and for the
native backend the files ``save_pretrained`` would write.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from spacy_sapbert.encoding.modelfiles import SETTINGS_FILE, TOKENIZER_FILES
from spacy_sapbert.encoding.recorded import DIGESTS_KEY, file_digests
from spacy_sapbert.encoding.st_files import write_sentence_transformers_files
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.devices import DTYPE_ALIASES

if TYPE_CHECKING:
    from spacy_sapbert.encoding.encoder import Encoder


def save_encoder(encoder: "Encoder", folder: Union[str, Path], weights_dtype: Optional[str] = None) -> Path:
    """What :meth:`Encoder.save <spacy_sapbert.encoding.encoder.Encoder.save>` does (its docstring)."""
    folder = Path(folder)
    stored = DTYPE_ALIASES.get(str(weights_dtype or encoder.weights_dtype).lower())
    if stored is None:
        raise InputError(f"unknown weights_dtype {weights_dtype!r}", field="weights_dtype")
    if encoder.backend == "onnx":
        _copy_onnx_weights(encoder, folder, stored)
    else:
        _write_weights(encoder, folder, stored)
    settings = dict(encoder.settings, fingerprint=encoder.fingerprint, source=encoder._recorded_source,
                    dim=encoder.dim, weights_dtype=stored)
    if encoder._load_fingerprint is None or encoder._float_weights is not None or encoder.backend == "onnx":
        settings[DIGESTS_KEY] = file_digests(folder)  # the weights just written (or copied as read): trusted
    (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    # so that SentenceTransformer(folder) encodes as we do; outside the fingerprint (see the encoder's module)
    write_sentence_transformers_files(folder, encoder.pooling, encoder.max_length, encoder.dim)
    return folder


def _write_weights(encoder: "Encoder", folder: Path, stored: str) -> None:
    """The model's weights in ``stored`` precision, and its tokenizer, written into ``folder``."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    state = encoder._float_state()
    if stored != "float32":
        target = getattr(torch, stored)
        for name, tensor in state.items():
            if tensor.is_floating_point() and not torch.equal(tensor.to(target).float(), tensor):
                raise InputError(f"weight {name} is not exactly representable in {stored}; call "
                                 f"round_weights({stored!r}) first (and rebuild any index)", field="weights_dtype")
        state = {k: v.to(target) if v.is_floating_point() else v for k, v in state.items()}
    if encoder.backend == "native":
        _save_native(encoder, folder, state)
    else:
        encoder.model.save_pretrained(folder, state_dict=state)
        encoder.tokenizer.save_pretrained(folder)


def _copy_onnx_weights(encoder: "Encoder", folder: Path, stored: str) -> None:
    """An encoder on ONNX Runtime never changes its weights, so saving it copies the model files of the folder it
    was read from (the settings are written after); another precision needs the torch backend."""
    import shutil

    if stored != encoder.weights_dtype:
        raise InputError(f"the onnx backend saves the weights as read ({encoder.weights_dtype}); writing them in "
                         f"{stored} needs the native backend (torch)", field="weights_dtype")
    source = Path(encoder._location)
    folder.mkdir(parents=True, exist_ok=True)
    if source.resolve() == folder.resolve():
        return
    for name in ("model.safetensors", "config.json") + tuple(TOKENIZER_FILES):
        if (source / name).is_file():
            shutil.copyfile(source / name, folder / name)


def round_encoder_weights(encoder: "Encoder", dtype: str = "float16") -> None:
    """What :meth:`Encoder.round_weights <spacy_sapbert.encoding.encoder.Encoder.round_weights>` does."""
    import torch

    if encoder.dtype != "float32" and not encoder.autocast:
        raise InputError("round_weights needs a float32 encoder (it runs on CPU before saving)", field="dtype")
    if encoder._float_weights is not None:
        raise InputError("round_weights needs float weights: this encoder keeps its linear layers in bf16 "
                         "(half_linears); load it without", field="half_linears")
    target = getattr(torch, DTYPE_ALIASES[dtype])
    with torch.no_grad():
        for tensor in encoder.model.state_dict().values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.to(target).float())
    encoder.weights_dtype = DTYPE_ALIASES[dtype]


def _save_native(encoder: "Encoder", folder: Path, state: Dict[str, Any]) -> None:
    """The files ``save_pretrained`` would write: safetensors weights, config.json and the
    tokenizer files of the folder the model came from. config.json says ``dtype: float32``
    whatever the file stores, as ``save_pretrained`` of our float32 model does: it is the
    precision to compute in, and code that loads with dtype "auto" (``SentenceTransformer``,
    ``AutoModel`` in transformers 5) would otherwise run half-precision weights in half
    precision, on a CPU too, and give other vectors than the encoder."""
    import shutil

    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    config = encoder.model.config.to_dict()
    config["dtype"] = "float32"
    config.pop("torch_dtype", None)
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    source = encoder.tokenizer.folder
    for name in TOKENIZER_FILES:
        if (source / name).is_file() and (source / name).resolve() != (folder / name).resolve():
            shutil.copyfile(source / name, folder / name)


__all__ = ["round_encoder_weights", "save_encoder"]
