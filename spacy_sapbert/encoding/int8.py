"""Dynamic int8 inference: the ``int8`` precision of the NER on a CPU (an option: ``auto`` does not pick it).

A CPU where bf16 is not the faster precision (AVX2 only, or AVX512-BF16 on an Intel CPU without
AMX) computes the models in float32.
There, int8 matrix multiplies (fbgemm) run ``nn.Linear`` layers faster: each weight matrix is
quantised once, per output channel, when the model loads; each batch's activations are quantised
on the fly with a scale of their own. Embeddings, LayerNorm, attention scores and GELU stay float32,
and so does each layer's feed-forward output projection, whose input (GELU's output) has the
outliers that a per-tensor activation scale loses.

Measured on 2 AMD EPYC cores (AVX2), the embedded default's NER on 200 BC5CDR dev abstracts: 14.0 s
in float32, 11.1 s in int8 (10.3 s with the feed-forward outputs quantised too); strict NER F1 on
BC5CDR dev 88.34 → 88.33 (88.08 with them), NCBI test 82.00 → 81.89 (82.25). Through the whole
pipeline (``sapbert ner-e2e``) int8 cost 0.05-0.22 F1, and fresh processes annotating BC5CDR dev ran
no faster (10.31 against 10.43 documents/s, medians of 3), so ``auto`` stays float32 there. The linker's
encoder stays float32: under int8 its vectors moved to cosine 0.95-0.97 of float32's, too far for linking.
With the 4-layer NER shipped since (an AVX2-only AMD EPYC, 2026-12-01) int8 ran the whole pipeline 1.20× faster,
but NCBI test NER F1 fell 86.06 → 85.58 (docs/ner.md, "int8 on CPUs without native bf16"): ``auto`` still stays float32.

Quantised layers hold no float weights, so a model is quantised only where it is used for
inference; saving reads the float weights from its files again (the NER pipe's ``to_disk``).
"""
from __future__ import annotations

import re
import warnings
from typing import Any

INT8 = "int8"
KEPT_FLOAT = re.compile(r"(^|\.)layer\.\d+\.output\.dense$")
"""Qualified names of the linear layers left in float32: each BERT layer's feed-forward output."""


def quantize_linears(model: Any) -> Any:
    """``model`` with its ``nn.Linear`` layers (but :data:`KEPT_FLOAT`) replaced, in place, by
    dynamically quantised int8 layers (per-channel weight scales). Returned for chaining; put the
    model in eval mode first."""
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    spec = {name: per_channel_dynamic_qconfig for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and not KEPT_FLOAT.search(name)}
    with warnings.catch_warnings():
        # torch 2.10+ announces that eager-mode quantisation moves to torchao; it still runs in the pinned torch
        for category in (UserWarning, DeprecationWarning, FutureWarning):
            warnings.filterwarnings("ignore", message=r".*(quantiz|torchao).*", category=category)
        return quantize_dynamic(model, spec, inplace=True)


def is_quantized(model: Any) -> bool:
    """True when some layer of ``model`` is a dynamically quantised linear layer."""
    from torch.ao.nn.quantized.dynamic import Linear as QuantizedLinear

    return any(isinstance(module, QuantizedLinear) for module in model.modules())
