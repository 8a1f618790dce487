"""The cross-encoder to train: the base BERT (as the self-alignment trainer loads and checks it) with
its pooler and a new one-output classifier, i.e. :class:`spacy_sapbert.linking.rerank.model.CrossEncoder`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Tuple, Union

import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.util.jsonfile import read_json_object
from spacy_sapbert.linking.rerank.model import CrossEncoder

from ..common.basemodel import freeze_word_embeddings


def load_cross_encoder(base_model: Union[str, Path], dropout: float,
                       freeze_embeddings: bool = False) -> Tuple[CrossEncoder, Dict[str, Any], Path]:
    """(model, its config.json as a dict, the folder with its tokenizer files). The base must be a local
    BERT folder that :mod:`spacy_sapbert.encoding.bert` runs, so that the trained re-ranker loads without transformers.
    ``freeze_embeddings``: the word embeddings do not train."""
    from spacy_sapbert.encoding import bert

    from ..common.basemodel import load_base_model

    model, _, path = load_base_model(base_model)
    folder = Path(path)
    if not folder.is_dir():
        raise InputError("the re-ranker trains from a local model folder", path, field="base_model")
    config = read_json_object(folder / "config.json")
    ok, why = bert.supports(folder, config)
    if not ok or getattr(model, "pooler", None) is None:
        raise InputError(f"the re-ranker needs a BERT with a pooler, as spacy_sapbert.encoding.bert runs ({why or 'no pooler'})",
                         folder, field="base_model")
    for param in model.pooler.parameters():  # load_base_model freezes it: here it is part of the head
        param.requires_grad_(True)
    if freeze_embeddings:
        freeze_word_embeddings(model)
    encoder = CrossEncoder(model, int(config["hidden_size"]), dropout)
    with torch.no_grad():  # transformers' initialisation of a classifier
        encoder.classifier.weight.normal_(0.0, float(config.get("initializer_range", 0.02)))
        encoder.classifier.bias.zero_()
    return encoder, config, folder
