"""The :class:`~spacy_sapbert.encoding.encoder.Encoder`'s vectors of token ids on torch, as
:func:`~spacy_sapbert.encoding.onnx_bert.encode_ids` computes them on ONNX Runtime.

The native model (:mod:`~spacy_sapbert.encoding.bert`) takes the texts packed end to end, without padding but within
attention groups (:mod:`~spacy_sapbert.encoding.packed`); a ``transformers`` model takes padded batches of texts of
about one length. Both pool as :mod:`~spacy_sapbert.encoding.pooling` pools, in float32, under CPU bf16 autocast
where the encoder computes so.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List

import numpy as np

from spacy_sapbert.encoding.pooling import pool, pool_packed

if TYPE_CHECKING:  # the encoder imports this module
    from spacy_sapbert.encoding.encoder import Encoder


def encode_ids(encoder: "Encoder", ids: List[List[int]], batch_size: int, normalize: bool = True,
               show_progress: bool = False) -> np.ndarray:
    """(texts × dim) float32 vectors of token-id lists, in their order (unit length with ``normalize``)."""
    import torch
    from tqdm.auto import tqdm

    from spacy_sapbert.encoding.packed import TOKENS_PER_PASS, padded_batches, passes

    out = np.empty((len(ids), encoder.dim), dtype=np.float32)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    native = encoder.backend == "native"
    # a GPU fills larger passes: as many tokens as batch_size texts of max_length
    tokens = None if encoder.device == "cpu" else max(TOKENS_PER_PASS, batch_size * encoder.max_length)
    batches = passes(lengths, tokens) if native else padded_batches(lengths, batch_size)
    with torch.inference_mode():
        for rows in tqdm(batches, desc="encoding", unit="batch", disable=not show_progress):
            texts = [ids[i] for i in rows]
            pooled = packed_vectors(encoder, texts, batch_size) if native else padded_vectors(encoder, texts)
            if normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out[rows] = pooled.cpu().numpy()
    return out


def padded_vectors(encoder: "Encoder", ids: List[List[int]]) -> Any:
    """Pooled float32 vectors of one batch of texts padded to the longest (the ``transformers`` backend's
    models; padded to a multiple of 8, BC5CDR dev's 2,594 mention texts took 2.2-2.9 s, not 1.7-2.1)."""
    import torch

    from spacy_sapbert.encoding.packed import padded_ids

    input_ids, mask = padded_ids(ids, int(encoder.tokenizer.pad_token_id))
    input_ids, attention = torch.from_numpy(input_ids), torch.from_numpy(mask)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=encoder.autocast):
        hidden = encoder.model(input_ids=input_ids.to(encoder.device),
                               attention_mask=attention.to(encoder.device)).last_hidden_state.float()
    return pool(hidden, attention.to(encoder.device), encoder.pooling)


def packed_vectors(encoder: "Encoder", ids: List[List[int]], group_size: int) -> Any:
    """Pooled float32 vectors of texts sorted longest first, through the native model's packed pass
    (:mod:`~spacy_sapbert.encoding.packed`): no padding but within attention groups of ``group_size``."""
    import torch

    from spacy_sapbert.encoding.packed import packed_states

    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = torch.from_numpy(np.fromiter((t for text in ids for t in text), dtype=np.int64, count=int(lengths.sum())))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=encoder.autocast):
        states = packed_states(encoder.model, flat.to(encoder.device), lengths, group_size)
    return pool_packed(states.float(), lengths, encoder.pooling)


__all__ = ["encode_ids", "packed_vectors", "padded_vectors"]
