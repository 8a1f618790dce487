"""The native BERT's forward pass over many short texts without padding ("packed").

A mention or a KB name is 3 to 25 word pieces. In a padded batch the linear layers, which do almost all
of the arithmetic, multiply a (texts × longest text) block in small pieces, padding included. Here every
real token of up to :data:`TOKENS_PER_PASS` tokens is one row of one matrix: the linear layers, layer
norms and GELU run once over all of them, with no padding and in fewer, larger multiplies (a 384-wide
bf16 layer on two AMX cores: about 260 GFLOP/s at 256 rows, 470 at 640, 610 at 1,280). Only attention,
the one step that mixes tokens, runs per group of texts of about the same length, padded within the
group. The model and its outputs are those of :class:`~spacy_sapbert.encoding.bert.BertEncoder`'s
padded pass, to float rounding (``tests/encoding/test_packed.py``).
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from spacy_sapbert.util.devices import cpu_autocast_dtype

TOKENS_PER_PASS = 1024
"""Real tokens per packed pass on a CPU. Linking NCBI test's and BC5CDR dev's gold mentions took as long at
1,024, 2,048 and 4,096 (within the run-to-run noise); the pipeline's peak over NCBI test was 14 MB higher at
4,096 than at 1,024. A GPU takes ``batch_size × max_length`` when that is more (the encoder's choice)."""
ROW_MULTIPLE = 256
"""On a CPU a pass's rows are padded to a multiple of this, or, under it, to a power of two from
:data:`SMALLEST_ROWS` (the extra rows are in no text and no attention group). oneDNN builds and keeps a
matrix-multiply kernel for each shape it sees (bf16 on a CPU): over 60 calls of 20 to 400 short texts the
default's encoder grew by 285 MB with passes of their exact row count, 135 MB at a multiple of 128, 106 MB
at 256, and 184 MB with batches padded to their longest text (the padded pass, :func:`padded_batches`).
So at most 7 row counts up to :data:`TOKENS_PER_PASS`, and a single short text costs 32 rows, not 256."""
SMALLEST_ROWS = 32
ATTENTION_MULTIPLE = 32
"""On a CPU an attention group's width (its longest text, or the most queries one text keeps) over this is
padded to a multiple of it (the extra key slots masked, the extra query rows dropped); a narrower group, such as
the linker's mentions and names, keeps its width, so at most this many narrow shapes. PyTorch's CPU flash attention
builds a oneDNN micro-kernel (brgemm) for each block shape it meets and keeps it: groups of their exact width made
210 shapes over NCBI test's windows, and on a Xeon with AMX the NER alone grew by 159 MB over BC5CDR dev's 500
abstracts (the padded batches before the packed pass, at a multiple of 64: 13 MB; padded to 32 now: 11 MB)."""


def passes(lengths: np.ndarray, tokens: Optional[int] = None) -> List[np.ndarray]:
    """The texts' positions, longest first, cut into passes of at most ``tokens`` tokens
    (:data:`TOKENS_PER_PASS`; a single longer text makes a pass of its own)."""
    tokens = tokens or TOKENS_PER_PASS
    order = np.argsort(-lengths, kind="stable")
    cuts, total = [0], 0
    for position, length in enumerate(lengths[order].tolist()):
        if total and total + length > tokens:
            cuts.append(position)
            total = 0
        total += length
    cuts.append(len(order))
    return [order[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def padded_batches(lengths: np.ndarray, size: int) -> List[np.ndarray]:
    """The texts' positions, longest first, ``size`` per padded batch (the ``transformers`` backend)."""
    order = np.argsort(-lengths, kind="stable")
    return [order[start:start + size] for start in range(0, len(order), size)]


def padded_ids(rows: List[List[int]], pad_id: int) -> Tuple[np.ndarray, np.ndarray]:
    """(ids, mask) of token-id lists padded to the longest, both int64 (the ``transformers`` and ``onnx`` backends'
    batches, and the onnx NER's windows)."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max()) if len(rows) else 0
    mask = np.arange(width)[None, :] < lengths[:, None]
    ids = np.full(mask.shape, int(pad_id), dtype=np.int64)
    ids[mask] = np.fromiter((t for row in rows for t in row), dtype=np.int64, count=int(lengths.sum()))
    return ids, mask.astype(np.int64)


def padded_rows(real: int) -> int:
    """Rows a CPU pass of ``real`` tokens computes (:data:`ROW_MULTIPLE`)."""
    if real > ROW_MULTIPLE:
        return -(-real // ROW_MULTIPLE) * ROW_MULTIPLE
    return max(SMALLEST_ROWS, 1 << max(real - 1, 0).bit_length())


def _groups(lengths: np.ndarray, size: int, device: Any) -> List[Tuple[int, int, int, int, Any, Any]]:
    """Attention groups of ``size`` consecutive texts: ``(first token, end token, texts, width, key mask,
    positions of the real tokens in the padded block)``; mask and positions are None where the group's
    texts all have the padded width (no padding)."""
    import torch

    offsets = np.concatenate([[0], np.cumsum(lengths)])
    multiple = ATTENTION_MULTIPLE if device.type == "cpu" else 1
    groups = []
    for start in range(0, len(lengths), size):
        group = lengths[start:start + size]
        width, grid = _padded_grid(group, multiple)
        mask = where = None
        if grid is not None:  # built on the host: no device round trip per group
            where = torch.from_numpy(np.flatnonzero(grid)).to(device)
            mask = torch.from_numpy(grid).to(device)[:, None, None, :]
        groups.append((int(offsets[start]), int(offsets[start + len(group)]), len(group), width, mask, where))
    return groups


def _padded_grid(counts: np.ndarray, multiple: int = 1) -> Tuple[int, Optional[np.ndarray]]:
    """(the largest of ``counts``, over ``multiple`` rounded up to a multiple of it; the (len(counts), that width)
    grid of which slots of a padded block are real, None where every count is that width: no padding)."""
    width = int(counts.max())
    width = width if width <= multiple else -(-width // multiple) * multiple
    if int(counts.min()) == width:
        return width, None
    return width, np.arange(width)[None, :] < counts[:, None]


def _query_groups(lengths: np.ndarray, size: int, last_rows: np.ndarray, device: Any
                  ) -> List[Tuple[int, int, int, Any]]:
    """For each attention group of :func:`_groups`, the queries the last layer keeps (``last_rows``, sorted):
    ``(first kept, end kept, most kept in one text, positions of the kept queries in the padded block)``;
    positions are None where every text of the group keeps as many."""
    import torch

    offsets = np.concatenate([[0], np.cumsum(lengths)])
    per_text = np.diff(np.searchsorted(last_rows, offsets))
    multiple = ATTENTION_MULTIPLE if device.type == "cpu" else 1
    groups, kept = [], 0
    for start in range(0, len(lengths), size):
        counts = per_text[start:start + size]
        most, grid = _padded_grid(counts, multiple)
        where = None if grid is None else torch.from_numpy(np.flatnonzero(grid)).to(device)
        groups.append((kept, kept + int(counts.sum()), most, where))
        kept += int(counts.sum())
    return groups


def _heads(rows: Any, texts: int, longest: int, where: Any, heads: int) -> Any:
    """A group's packed ``rows`` as a padded (texts, heads, longest, head width) block (``where``: the real slots,
    None when there is no padding)."""
    width = rows.shape[1]
    if where is not None:
        block = rows.new_zeros(texts * longest, width)
        block[where] = rows
        rows = block
    return rows.view(texts, longest, heads, width // heads).transpose(1, 2)


def _attend(projected: List[Any], groups: List[Tuple[int, int, int, int, Any, Any]], heads: int, real: int,
            queries: Optional[List[Tuple[int, int, int, Any]]] = None) -> Any:
    """Attention within each group, over the packed rows of ``projected`` (query, key, value), the query rows
    past ``real`` (padding) zero; with ``queries`` (:func:`_query_groups`) the query rows are only the kept
    ones, packed alike."""
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    query, key, value = projected
    width = key.shape[1]
    mixed = torch.empty_like(query)
    mixed[real:] = 0
    for number, (first, end, texts, longest, mask, where) in enumerate(groups):
        q_first, q_end, q_longest, q_where = (first, end, longest, where) if queries is None else queries[number]
        if q_end == q_first:
            continue
        out = scaled_dot_product_attention(_heads(query[q_first:q_end], texts, q_longest, q_where, heads),
                                           _heads(key[first:end], texts, longest, where, heads),
                                           _heads(value[first:end], texts, longest, where, heads), attn_mask=mask)
        out = out.transpose(1, 2).reshape(texts * q_longest, width)
        mixed[q_first:q_end] = out if q_where is None else out[q_where]
    return mixed


def packed_states(model: Any, input_ids: Any, lengths: np.ndarray, group_size: int, extra: Optional[Any] = None,
                  last_rows: Optional[np.ndarray] = None) -> Any:
    """Last-layer states ``(tokens, hidden)`` of the texts whose word pieces ``input_ids`` holds end to
    end (``lengths`` of them each, the texts sorted longest first so that a group pads little), as
    ``model(...).last_hidden_state`` gives them row by row for the real tokens. ``extra`` (``tokens ×
    hidden``) is added to the embeddings after their LayerNorm, as the NER adds its gazetteer features
    (:class:`~spacy_sapbert.ner.model.TokenTagger`).

    ``last_rows`` (sorted token positions) asks for the states of those tokens only: the last layer then
    computes its queries, attention output and feed-forward block for them alone (keys and values still
    come from every token), so a NER that scores a window's core tokens by their first piece skips the rest
    (NCBI test: 24,265 of its windows' 36,988 pieces scored; BC5CDR dev 112,687 of 180,175). The result then has
    :func:`padded_rows` rows on a CPU, the first ``len(last_rows)`` of them those tokens' states."""
    import torch

    if last_rows is not None and (np.any(np.diff(last_rows) <= 0) or (len(last_rows) and (
            last_rows[0] < 0 or last_rows[-1] >= int(lengths.sum())))):
        raise ValueError("last_rows must be distinct token positions of the pass, in ascending order")
    device = input_ids.device
    positions = torch.from_numpy(np.concatenate([np.arange(n) for n in lengths])).to(device)
    embeddings = model.embeddings
    words = embeddings.word_embeddings(input_ids).to(embeddings.position_embeddings.weight.dtype)
    x = words + embeddings.token_type_embeddings.weight[0] + embeddings.position_embeddings(positions)
    x = embeddings.LayerNorm(x)
    x = x if extra is None else x + extra
    real, width = x.shape
    cpu = device.type == "cpu"
    rows = padded_rows(real) if cpu else real
    x = torch.cat([x, x.new_zeros(rows - real, width)]) if rows > real else x
    heads = model.settings.num_attention_heads
    groups = _groups(lengths, group_size, device)
    # under autocast the three projections would each cast the same float32 states: cast them once
    cast = cpu_autocast_dtype() if cpu else None
    layers = list(model.encoder.layer)
    for number, layer in enumerate(layers):
        attention = layer.attention.self
        h = x if cast is None else x.to(cast)
        if last_rows is None or number < len(layers) - 1:
            mixed = _attend([attention.query(h), attention.key(h), attention.value(h)], groups, heads, real)
        else:  # the last layer, for the kept tokens only
            kept = len(last_rows)
            at = np.zeros(padded_rows(kept) if cpu else kept, dtype=np.int64)
            at[:kept] = last_rows
            at = torch.from_numpy(at).to(device)
            x = x[at]
            x[kept:] = 0
            queries = _query_groups(lengths, group_size, last_rows, device)
            mixed = _attend([attention.query(h[at]), attention.key(h), attention.value(h)], groups, heads, kept,
                             queries)
        x = layer.attention.output(mixed, x)
        x = layer.output(layer.intermediate(x), x)
    return x if last_rows is not None else x[:real]


__all__ = ["ATTENTION_MULTIPLE", "ROW_MULTIPLE", "SMALLEST_ROWS", "TOKENS_PER_PASS", "padded_batches", "padded_ids",
           "padded_rows", "packed_states", "passes"]
