"""The native encoder's packed pass (:mod:`spacy_sapbert.encoding.packed`): the padded pass's vectors without
padding, whatever the passes and attention groups the texts fall into."""
from __future__ import annotations

import numpy as np
import pytest

from spacy_sapbert.encoding import packed
from spacy_sapbert.encoding.encoder import Encoder

TEXTS = ["heart attack", "x", "", "breast cancer of the left side", "renal failure", "word " * 80,
         "acute myocardial infarction with st elevation", "a", "BRCA1/2 (breast cancer 1) - [type II]"]


def padded(encoder: Encoder, texts, batch_size: int, normalize: bool = True) -> np.ndarray:
    """The same encoder's padded pass (what the transformers backend runs)."""
    backend, encoder.backend = encoder.backend, "padded"
    try:
        return encoder.encode(texts, batch_size=batch_size, normalize=normalize)
    finally:
        encoder.backend = backend


def test_passes_cut_at_the_token_budget_longest_first():
    lengths = np.array([3, 9, 4, 12, 2, 5])
    cut = packed.passes(lengths, tokens=12)
    assert [p.tolist() for p in cut] == [[3], [1], [5, 2, 0], [4]]  # 12 | 9 | 5+4+3 | 2
    assert sorted(np.concatenate(cut).tolist()) == list(range(6))
    assert [p.tolist() for p in packed.passes(np.array([20, 1]), tokens=12)] == [[0], [1]]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("group", [1, 2, 64])
def test_packed_equals_padded_in_float32(tiny_bert, pooling, group):
    encoder = Encoder(tiny_bert, pooling=pooling, device="cpu", dtype="float32")
    assert encoder.backend == "native"
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=group), padded(encoder, TEXTS, 3), atol=1e-5)
    raw = encoder.encode(TEXTS, batch_size=group, normalize=False)  # the pooled vectors, unscaled
    np.testing.assert_allclose(raw, padded(encoder, TEXTS, 3, normalize=False), atol=1e-5)


def test_a_text_is_encoded_alone_whatever_shares_its_pass(tiny_bert, monkeypatch):
    encoder = Encoder(tiny_bert, pooling="mean", device="cpu", dtype="float32")
    alone = np.stack([encoder.encode([text])[0] for text in TEXTS])
    monkeypatch.setattr(packed, "TOKENS_PER_PASS", 7)  # many passes, some of one text
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=2), alone, atol=1e-5)


def test_real_minilm_in_bf16_is_close_to_the_padded_pass(minilm_path):
    encoder = Encoder(minilm_path, device="cpu", dtype="bfloat16", half_linears=True)
    assert encoder.autocast
    texts = TEXTS * 20
    ours, theirs = encoder.encode(texts), padded(encoder, texts, 64)
    assert (ours * theirs).sum(axis=1).min() > 0.9999


def test_linear_layers_see_row_counts_of_a_few_sizes(tiny_bert):
    """oneDNN keeps a kernel per shape: a pass's rows come in a few counts (padded_rows), whatever the texts."""
    encoder = Encoder(tiny_bert, pooling="mean", device="cpu", dtype="float32")
    seen = set()
    hooks = [module.register_forward_hook(lambda m, args, out: seen.add(args[0].shape[0]))
             for module in encoder.model.modules() if module.__class__.__name__ == "Linear"]
    try:
        for n in (1, 7, 40, 90):
            encoder.encode([f"text {i} " * (1 + i % 5) for i in range(n)])
    finally:
        for hook in hooks:
            hook.remove()
    assert len(seen) > 1 and seen <= {32, 64, 128, 256} | {packed.ROW_MULTIPLE * n for n in range(1, 5)}


def test_row_counts_are_powers_of_two_then_multiples():
    assert [packed.padded_rows(n) for n in (1, 5, 32, 33, 200, 256, 257, 1024)] == [32, 32, 32, 64, 256, 256, 512, 1024]


@pytest.mark.filterwarnings("ignore:torch.*autocast_cpu.*deprecated:DeprecationWarning")  # the old functions, on new torch
def test_cpu_autocast_dtype_on_torch_before_2_4(monkeypatch):
    """torch < 2.4 has no device argument to is_autocast_enabled: the CPU-only functions answer instead."""
    import torch

    from spacy_sapbert.util.devices import cpu_autocast_dtype

    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert cpu_autocast_dtype() == torch.bfloat16
        plain = torch.is_autocast_enabled

        def old_signature(*args):
            if args:
                raise TypeError("is_autocast_enabled() takes 0 positional arguments but 1 was given")
            return plain()

        monkeypatch.setattr(torch, "is_autocast_enabled", old_signature)
        assert cpu_autocast_dtype() == torch.bfloat16
    assert cpu_autocast_dtype() is None


@pytest.mark.parametrize("group", [1, 2, 64])
def test_last_rows_are_the_whole_pass_at_those_rows(tiny_bert, group):
    """The last layer computed for some tokens only (the NER's scored pieces) gives those tokens' states of the
    whole pass: whatever share of each text it keeps, none of one text, all of another, groups uneven."""
    import torch

    encoder = Encoder(tiny_bert, pooling="mean", device="cpu", dtype="float32")
    ids = encoder.tokenizer(TEXTS, truncation=True, max_length=64, add_special_tokens=True)["input_ids"]
    ids.sort(key=len, reverse=True)
    lengths = np.array([len(i) for i in ids])
    flat = torch.tensor([t for i in ids for t in i])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    keep = np.array([s + p for n, (s, length) in enumerate(zip(starts, lengths)) if n != 1
                     for p in range(length) if n == 0 or p % (n + 1) == 0])
    with torch.inference_mode():
        whole = packed.packed_states(encoder.model, flat, lengths, group)
        some = packed.packed_states(encoder.model, flat, lengths, group, last_rows=keep)
    assert len(some) == packed.padded_rows(len(keep))
    np.testing.assert_allclose(some[:len(keep)].numpy(), whole[keep].numpy(), atol=1e-5)


@pytest.mark.parametrize("rows", [[3, 2], [1, 1], [-1, 2], [0, 10 ** 6]])
def test_last_rows_out_of_order_or_outside_the_pass_are_refused(tiny_bert, rows):
    import torch

    encoder = Encoder(tiny_bert, pooling="mean", device="cpu", dtype="float32")
    with pytest.raises(ValueError, match="ascending order"):
        packed.packed_states(encoder.model, torch.tensor([1, 2, 3, 4, 5]), np.array([5]), 2, last_rows=np.array(rows))


def test_attention_groups_over_32_pieces_are_padded_to_multiples_of_32(tiny_bert, monkeypatch):
    """PyTorch's CPU flash attention keeps a kernel per block shape, so a group's width (keys and queries) over
    :data:`~spacy_sapbert.encoding.packed.ATTENTION_MULTIPLE` is padded to a multiple of it; narrower groups keep
    theirs; the vectors are the padded pass's all the same."""
    import torch.nn.functional as functional

    encoder = Encoder(tiny_bert, pooling="mean", device="cpu", dtype="float32", max_length=64)
    texts = ["word " * n for n in (1, 3, 6, 8, 10, 12)]  # 6 to 50 word pieces
    reference = padded(encoder, texts, 1)
    widths = set()
    attend = functional.scaled_dot_product_attention

    def spy(query, key, value, **settings):
        widths.update({query.shape[2], key.shape[2]})
        return attend(query, key, value, **settings)

    monkeypatch.setattr(functional, "scaled_dot_product_attention", spy)
    for group in (1, 2):
        np.testing.assert_allclose(encoder.encode(texts, batch_size=group), reference, atol=1e-5)
    assert sorted(widths) == [6, 14, 26, 64]  # 34, 42 and 50 pieces: 64
