"""A compact BERT encoder for inference, loaded from a Hugging Face model folder.

Importing ``transformers``' BERT model code costs about 3 s on a 2-core machine, more than
everything else in loading the default pipeline together. For the architecture the linker
ships (a plain BERT encoder: absolute positions, GELU, no cross-attention) this module
computes the same ``last_hidden_state`` with ``torch`` alone, reads the weights from
``model.safetensors`` and tokenizes with the ``tokenizers`` library from ``tokenizer.json``
(the files ``save_pretrained`` writes; the tokenizer is :mod:`spacy_sapbert.encoding.fast_tokenizer`).
Parameter names are those of ``transformers.BertModel``, so a state dict, and with it
:attr:`spacy_sapbert.encoding.encoder.Encoder.fingerprint`, is the same on both paths; the tests
check the outputs against ``transformers`` too.

:func:`supports` says whether a folder qualifies; anything else (other architectures, hub
names, ``pytorch_model.bin`` only) goes through ``transformers``.
"""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import torch
from torch import nn

from spacy_sapbert.encoding.bert_settings import (IGNORED_TENSORS, WEIGHTS_FILE, BertSettings, ConfigView, state_name,
                                                   supports)
from spacy_sapbert.encoding.fast_tokenizer import FastTokenizer
from spacy_sapbert.util.devices import cpu_autocast_dtype

__all__ = ["WEIGHTS_FILE", "BertEncoder", "BertSettings", "ConfigView", "load", "state_name", "supports",
           "unset_weights"]


class _Embeddings(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(s.vocab_size, s.hidden_size, padding_idx=s.pad_token_id)
        self.position_embeddings = nn.Embedding(s.max_position_embeddings, s.hidden_size)
        self.token_type_embeddings = nn.Embedding(s.type_vocab_size, s.hidden_size)
        self.LayerNorm = nn.LayerNorm(s.hidden_size, eps=s.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        # the word-piece table may be kept as stored (half_weights.WORD_EMBEDDINGS): only the
        # rows looked up are widened
        words = self.word_embeddings(input_ids).to(self.position_embeddings.weight.dtype)
        x = words + self.token_type_embeddings(token_type_ids) + self.position_embeddings(positions)[None]
        return self.LayerNorm(x)


class _SelfAttention(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.heads = s.num_attention_heads
        self.query = nn.Linear(s.hidden_size, s.hidden_size)
        self.key = nn.Linear(s.hidden_size, s.hidden_size)
        self.value = nn.Linear(s.hidden_size, s.hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        cast = cpu_autocast_dtype() if x.device.type == "cpu" else None
        if cast is not None:  # one cast for the three projections, not one each
            x = x.to(cast)

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

        out = nn.functional.scaled_dot_product_attention(heads(self.query(x)), heads(self.key(x)),
                                                         heads(self.value(x)), attn_mask=mask)
        return out.transpose(1, 2).reshape(batch, length, width)


class _DenseNorm(nn.Module):
    """BERT's ``*Output`` blocks: dense projection, residual, LayerNorm."""

    def __init__(self, width_in: int, s: BertSettings) -> None:
        super().__init__()
        self.dense = nn.Linear(width_in, s.hidden_size)
        self.LayerNorm = nn.LayerNorm(s.hidden_size, eps=s.layer_norm_eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class _Attention(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.self = _SelfAttention(s)
        self.output = _DenseNorm(s.hidden_size, s)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class _Intermediate(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.dense = nn.Linear(s.hidden_size, s.intermediate_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.gelu(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.attention = _Attention(s)
        self.intermediate = _Intermediate(s)
        self.output = _DenseNorm(s.intermediate_size, s)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class _Stack(nn.Module):
    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(s) for _ in range(s.num_hidden_layers))


class _Pooler(nn.Module):
    """Kept so the state dict (and the fingerprint) matches ``BertModel``'s; never run."""

    def __init__(self, s: BertSettings) -> None:
        super().__init__()
        self.dense = nn.Linear(s.hidden_size, s.hidden_size)


@dataclass
class Output:
    last_hidden_state: torch.Tensor


_UNSET = threading.local()
_INSTALL = threading.Lock()


def _skippable(reset: Any) -> Any:
    """``reset`` (a layer class's ``reset_parameters``), skipped while this thread is inside
    :func:`unset_weights`; other threads, and this one outside it, draw as before."""
    def reset_parameters(self: nn.Module) -> None:
        if not getattr(_UNSET, "active", False):
            reset(self)
    reset_parameters.sapbert_skippable = True  # type: ignore[attr-defined]
    return reset_parameters


@contextmanager
def unset_weights() -> Iterator[None]:
    """Build modules without drawing their random initial weights, for a model whose every
    parameter is then loaded from a file (the callers check that none is missing): the draws
    took a tenth of the default pipeline's load. ``nn.Linear`` and ``nn.Embedding`` are the
    layers that draw; their parameters are left as allocated until the file's tensors replace
    them. Only the calling thread skips the draws: the first use wraps the two classes'
    ``reset_parameters`` once, to a version that asks which thread builds the layer. (Building
    on the meta device skips them too, but its first use imports torch._dynamo: 4 s more to
    load a pipeline in a fresh process.)"""
    with _INSTALL:
        for layer in (nn.Linear, nn.Embedding):
            if not getattr(layer.reset_parameters, "sapbert_skippable", False):
                layer.reset_parameters = _skippable(layer.reset_parameters)  # type: ignore[method-assign]
    before = getattr(_UNSET, "active", False)
    _UNSET.active = True
    try:
        yield
    finally:
        _UNSET.active = before


class BertEncoder(nn.Module):
    """``BertModel`` without the pooler's forward pass: token ids → last hidden states."""

    def __init__(self, settings: BertSettings, config: Optional[Dict[str, Any]] = None) -> None:
        super().__init__()
        self.settings = settings
        self.config = ConfigView(config or {}, settings)
        self.embeddings = _Embeddings(settings)
        self.encoder = _Stack(settings)
        self.pooler = _Pooler(settings)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None) -> Output:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        # boolean mask over keys (True = attend), broadcast over heads and queries: it fits
        # whatever dtype autocast gives the attention inputs
        mask = (attention_mask != 0)[:, None, None, :]
        for layer in self.encoder.layer:
            x = layer(x, mask)
        return Output(last_hidden_state=x)

    @classmethod
    def from_folder(cls, folder: Path, config: Dict[str, Any], linear_dtype: Optional[str] = None,
                    table_dtype: Optional[str] = None) -> "BertEncoder":
        """Weights from ``folder/model.safetensors`` (float16/bfloat16 files are read into
        float32); a missing or misshapen tensor is a ``ValueError`` naming it.

        For a model that only infers, two kinds of tensors are read straight into a half precision, frozen,
        instead of through a float32 copy that is then cast and freed: the linear layers' weights into
        ``linear_dtype`` (:func:`~spacy_sapbert.encoding.half_weights.half_linear_weights` says why the
        outputs stay the same to the bit), and the word-piece table kept in ``table_dtype`` when the file
        stores it so (:data:`~spacy_sapbert.encoding.half_weights.WORD_EMBEDDINGS`). For the embedded
        default's encoder that took 0.15 s instead of 0.23 and 20-26 MB less heap than casting after the load."""
        from safetensors.torch import load_file

        from spacy_sapbert.encoding.half_weights import WORD_EMBEDDINGS, half_linear_weights, read_as

        # the file's tensors become the parameters (assign=True) instead of being copied into them
        with unset_weights():
            model = cls(BertSettings.from_config(config), config)
        tensors = load_file(str(folder / WEIGHTS_FILE))
        half = half_linear_weights(model, linear_dtype)
        frozen = set(half)
        state = {}
        for name, tensor in tensors.items():
            name = state_name(name)
            if name == WORD_EMBEDDINGS and table_dtype in ("float16", "bfloat16") and \
                    tensor.dtype == getattr(torch, table_dtype):
                frozen.add(name)  # kept as stored; a copy, so that no tensor holds the file's mapping open
                state[name] = tensor.clone()
            else:
                state[name] = read_as(tensor, half.get(name))
        expected = model.state_dict()
        unknown = [k for k in state
                   if k not in expected and k not in IGNORED_TENSORS and not k.startswith(("cls.", "lm_"))]
        missing = [k for k in expected if k not in state]
        if missing or unknown:
            raise ValueError(f"{folder / WEIGHTS_FILE}: not a BertModel state dict (missing {missing[:5]}, "
                             f"unexpected {unknown[:5]})")
        for name, target in expected.items():
            if tuple(state[name].shape) != tuple(target.shape):
                raise ValueError(f"{folder / WEIGHTS_FILE}: {name} has shape {tuple(state[name].shape)}, "
                                 f"config.json implies {tuple(target.shape)}")
        model.load_state_dict({k: state[k] for k in expected}, assign=True)
        for name, parameter in model.named_parameters():
            if name in frozen:
                parameter.requires_grad_(False)
        return model.eval()


def load(folder: Path, config: Optional[Dict[str, Any]] = None, linear_dtype: Optional[str] = None,
         table_dtype: Optional[str] = None) -> Tuple[BertEncoder, FastTokenizer, Dict[str, Any]]:
    """(model, tokenizer, config dict) of a folder :func:`supports`; ``config`` is its
    config.json when the caller has read it already; ``linear_dtype`` and ``table_dtype`` as
    :meth:`BertEncoder.from_folder` takes them (inference only)."""
    if config is None:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    model = BertEncoder.from_folder(folder, config, linear_dtype, table_dtype)
    tokenizer = FastTokenizer(folder, config.get("pad_token_id"))
    return model, tokenizer, config

