"""What share of this machine's matrix-multiply peak the default's NER and linker encoder reach: the peak measured
(float32 and bf16 2048³ products, the NER's int8 layer), the models' FLOPs counted from their shapes, the passes
timed. Used by :mod:`pipeline_vs_scispacy`, in one of its fresh processes (``efficiency``) and in its parent (the
peak)."""
from __future__ import annotations

import time
from typing import Any, Dict, List


def layer_flops(settings: Any, length: int) -> float:
    """Multiply-adds ×2 of one BERT layer over ``length`` pieces: the four attention projections, the
    feed-forward pair and the attention products (scores and weighted sum)."""
    h, i = settings.hidden_size, settings.intermediate_size
    return length * (2 * (4 * h * h + 2 * h * i) + 4 * length * h)


def window_flops(settings: Any, layers: int, length: int, scored: int) -> float:
    """:func:`layer_flops` of a NER window of ``length`` pieces through ``layers`` layers, the last one only at
    its ``scored`` pieces (its keys and values at every piece: ``packed_states``' ``last_rows``)."""
    h, i = settings.hidden_size, settings.intermediate_size
    last = length * 2 * (2 * h * h) + scored * (2 * (2 * h * h + 2 * h * i) + 4 * length * h)
    return (layers - 1) * layer_flops(settings, length) + last


def efficiency(nlp: Any, documents: List[Any]) -> Dict[str, Any]:
    """GFLOP/s reached by the NER's forward pass (over every window of every document) and by the
    linker's encoder (over the corpus's distinct gold mention strings), counting only the pieces
    that are not padding (what the padded batches cost is reported beside)."""
    import torch
    from spacy.util import minibatch

    from spacy_sapbert.kb.normalize import normalize

    tagging = nlp.get_pipe("sapbert_ner")._ready()
    docs = [nlp.make_doc(d.text) for d in documents]
    tagging.scores(docs[:2])  # first-use costs (weights, allocator) are not the steady rate
    windows = sorted((w for doc in docs for w in tagging.windows(doc)), key=lambda w: len(w.input_ids))
    ner_settings = tagging.model.encoder.settings
    layers = len(tagging.model.encoder.encoder.layer)
    useful = sum(window_flops(ner_settings, layers, len(w.input_ids), len(w.positions)) for w in windows)
    padded = sum(window_flops(ner_settings, layers, max(len(w.input_ids) for w in b), len(w.positions))
                 for b in minibatch(windows, size=tagging.batch_size) for w in b)
    start = time.perf_counter()
    tagging.scores(docs)
    ner_s = time.perf_counter() - start
    encoder = nlp.get_pipe("sapbert_linker").linker.encoder
    texts = sorted({normalize(m.text) for d in documents for m in d.mentions} - {""})
    pieces = encoder.tokenizer(texts, truncation=True, max_length=encoder.max_length,
                               add_special_tokens=True)["input_ids"]
    # the native backend's BertSettings, or a transformers model's config: the same three fields
    enc_settings = getattr(encoder.model, "settings", None) or encoder.model.config
    enc_layers = int(enc_settings.num_hidden_layers)
    encoder.encode(texts[:64])
    start = time.perf_counter()
    encoder.encode(texts)
    enc_s = time.perf_counter() - start
    enc_flops = sum(enc_layers * layer_flops(enc_settings, len(p)) for p in pieces)
    return {"ner": {"windows": len(windows), "pieces": sum(len(w.input_ids) for w in windows), "layers": layers,
                    "scored_pieces": sum(len(w.positions) for w in windows),
                    "seconds": ner_s, "gflop": useful / 1e9, "gflop_padded": padded / 1e9,
                    "gflops": useful / ner_s / 1e9, "dtype": tagging.dtype},
            "encoder": {"texts": len(texts), "pieces": sum(map(len, pieces)), "layers": enc_layers,
                        "seconds": enc_s, "gflop": enc_flops / 1e9, "gflops": enc_flops / enc_s / 1e9,
                        "dtype": encoder.dtype, "threads": torch.get_num_threads()}}


def matmul_peak() -> Dict[str, float]:
    """This machine's dense matrix-multiply rate (GFLOP/s, best of 5) in float32 and bf16, 2048³, and of
    the NER's int8 layer (a dynamically quantised 2048 × 2048 linear layer on 2048 rows)."""
    import torch

    from spacy_sapbert.encoding.int8 import quantize_linears

    rates = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        a, b = torch.randn(2048, 2048, dtype=dtype), torch.randn(2048, 2048, dtype=dtype)
        a @ b
        best = min(_timed(lambda: a @ b) for _ in range(5))
        rates[f"{name}_gflops"] = round(2 * 2048 ** 3 / best / 1e9, 1)
    layer = quantize_linears(torch.nn.Sequential(torch.nn.Linear(2048, 2048, bias=False)).eval())
    x = torch.randn(2048, 2048)
    with torch.inference_mode():
        layer(x)
        best = min(_timed(lambda: layer(x)) for _ in range(5))
    rates["int8_gflops"] = round(2 * 2048 ** 3 / best / 1e9, 1)
    return rates


def matmul_peak_of_dtype(peak: Dict[str, float], dtype: str) -> float:
    """The peak of the precision a model computes in (bf16 autocast, int8 layers or float32)."""
    return peak.get(f"{dtype}_gflops") or peak["float32_gflops"]


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
