"""Is a model folder whole? Checked before any weights load, so a broken folder is one clear error.

Two failures look like success otherwise. A folder whose tokenizer files are missing still
loads: ``transformers`` builds a tokenizer from ``tokenizer_config.json`` alone that knows five
tokens, every word becomes ``[UNK]``, every mention gets the same vector and every link the same
concept at score 1.0. And a truncated ``model.safetensors`` (a copy cut short, a full disk) or
one whose header is garbage fails deep inside ``safetensors`` with its own traceback. These
checks read only the header of each weights file and the tokenizer's vocabulary, in
milliseconds, and name the file and what is wrong with it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional, Set

from spacy_sapbert.errors import InputError

MAX_HEADER_BYTES = 100 * 1024 * 1024
"""safetensors' own limit on the JSON header: a larger length is a damaged or foreign file."""
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
               "BOOL": 1, "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1}
SPECIAL_TOKEN_KEYS = ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token", "bos_token", "eos_token")
SENTENCEPIECE_FILES = ("spiece.model", "sentencepiece.bpe.model", "tokenizer.model")


def check_model_folder(folder: Path, config: Optional[Mapping[str, Any]] = None) -> None:
    """Raise :class:`InputError` naming the file unless ``folder``'s weights files are whole
    and its tokenizer exists and fits the model (``config``: its ``config.json``, read here
    when not given)."""
    if config is None:
        config = _read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    for weights in sorted(folder.glob("*.safetensors")):
        check_safetensors(weights)
    check_tokenizer(folder, config)


def check_safetensors(path: Path) -> None:
    """The header of a safetensors file is readable and every tensor it lists lies inside the file."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise InputError(f"truncated safetensors file ({size} bytes; the 8-byte header length is missing)", path)
        length = int.from_bytes(prefix, "little")
        if length > MAX_HEADER_BYTES or length > size - 8:
            raise InputError(f"not a whole safetensors file: its header claims {length:,} bytes, the file has "
                             f"{size:,} (cut short, or not safetensors)", path)
        try:
            header = json.loads(handle.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"damaged safetensors file: its header is not JSON ({err})", path) from err
    if not isinstance(header, dict):
        raise InputError("damaged safetensors file: its header is not a JSON object", path)
    data_bytes = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = (int(x) for x in entry["data_offsets"])
            count = 1
            for dim in entry["shape"]:
                count *= int(dim)
            width = DTYPE_BYTES.get(str(entry["dtype"]))
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"damaged safetensors file: tensor {name!r} has no valid dtype/shape/offsets", path,
                             field=name) from err
        if end > data_bytes or start > end:
            raise InputError(f"truncated safetensors file: tensor {name!r} ends at byte {end:,} of the data, which "
                             f"has {data_bytes:,}", path, field=name)
        if width is not None and count * width != end - start:
            raise InputError(f"damaged safetensors file: tensor {name!r} of shape {entry['shape']} needs "
                             f"{count * width:,} bytes, its offsets span {end - start:,}", path, field=name)


def check_tokenizer(folder: Path, config: Mapping[str, Any]) -> None:
    """A tokenizer is there (not only ``tokenizer_config.json``), and its vocabulary fits the
    model's embedding table and holds the special tokens its settings name."""
    vocab = _vocabulary(folder)
    if vocab is None:
        if any((folder / name).is_file() for name in SENTENCEPIECE_FILES):
            return  # a sentencepiece model: read by its own library, no vocabulary to compare here
        raise InputError("no tokenizer: the folder has none of tokenizer.json, vocab.txt, vocab.json + merges.txt or "
                         "a sentencepiece model (from tokenizer_config.json alone transformers builds a tokenizer "
                         "that turns every word into [UNK]); copy the tokenizer files of the model here", folder)
    source, ids = vocab
    rows = config.get("vocab_size")
    if isinstance(rows, int) and ids:
        top = max(ids.values())
        if top >= rows:
            raise InputError(f"the tokenizer gives ids up to {top:,}, but the model's config.json has vocab_size "
                             f"{rows:,}: a tokenizer of another model?", source)
        if len(ids) < rows // 2:
            raise InputError(f"the tokenizer knows {len(ids):,} tokens, the model's embedding table has {rows:,}: "
                             "a tokenizer of another model?", source)
    for settings_file in (folder / "special_tokens_map.json", folder / "tokenizer_config.json"):
        if settings_file.is_file():
            _check_special_tokens(settings_file, set(ids))


def _vocabulary(folder: Path) -> Optional[tuple]:
    """(file, token → id) of the tokenizer in ``folder``, or None when it has no vocabulary file."""
    tokenizer_json = folder / "tokenizer.json"
    if tokenizer_json.is_file():
        data = _read_json(tokenizer_json)
        model = data.get("model") if isinstance(data, dict) else None
        vocab = model.get("vocab") if isinstance(model, dict) else None
        if isinstance(vocab, dict):
            ids = {str(token): int(i) for token, i in vocab.items()}
        elif isinstance(vocab, list):  # Unigram: [[piece, score], ...] in id order
            ids = {str(item[0]): i for i, item in enumerate(vocab) if isinstance(item, list) and item}
        else:
            raise InputError("tokenizer.json has no model vocabulary", tokenizer_json, field="model.vocab")
        for added in data.get("added_tokens") or []:
            if isinstance(added, dict) and "content" in added and "id" in added:
                ids[str(added["content"])] = int(added["id"])
        return tokenizer_json, ids
    vocab_txt = folder / "vocab.txt"
    if vocab_txt.is_file():
        tokens = vocab_txt.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        return vocab_txt, {token: i for i, token in enumerate(tokens)}
    vocab_json = folder / "vocab.json"
    if vocab_json.is_file() and (folder / "merges.txt").is_file():
        data = _read_json(vocab_json)
        if not isinstance(data, dict):
            raise InputError("vocab.json is not a JSON object of token → id", vocab_json)
        return vocab_json, {str(token): int(i) for token, i in data.items()}
    return None


def _check_special_tokens(settings_file: Path, known: Set[str]) -> None:
    data = _read_json(settings_file)
    if not isinstance(data, dict) or not known:
        return
    for key in SPECIAL_TOKEN_KEYS:
        token = _token_text(data.get(key))
        if token is not None and token not in known:
            raise InputError(f"special token {token!r} is not in the tokenizer's vocabulary: these tokenizer files "
                             "belong to different models", settings_file, field=key)


def _token_text(value: Any) -> Optional[str]:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"unreadable JSON ({err})", path) from err


__all__ = ["check_model_folder", "check_safetensors", "check_tokenizer"]
