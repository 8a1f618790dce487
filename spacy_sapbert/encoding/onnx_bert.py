"""The native BERT's forward pass on ONNX Runtime, built in memory from ``model.safetensors``: inference without torch.

Importing torch costs about 220 MB of RSS before anything runs (its operator registry and ~770 modules), and
thinc imports it whenever it is installed, so a pipeline that never computes with torch still carries it.
This module computes what :class:`~spacy_sapbert.encoding.bert.BertEncoder` computes (plus, for the NER, its
gazetteer embedding and tag head: :class:`~spacy_sapbert.ner.model.TokenTagger`) with ONNX Runtime's CPU
kernels, reading the weights with ``safetensors.numpy``.

No ``.onnx`` file is exported or shipped: the graph (standard opset-17 operators, in float32) is written here
from the model's shapes, each weight a placeholder without data, and the session is handed the arrays
(``SessionOptions.add_external_initializers``). It copies them, so they are dropped once it exists and the heap's
freed pages go back to the system (:func:`~spacy_sapbert.util.heap.release_freed_memory`); each session (the NER's,
the linker encoder's) holds its own copy of the word-piece table. Activations come from ONNX Runtime's arena,
which keeps what the largest run needed, so the callers keep runs small (the NER one window at a time:
:mod:`spacy_sapbert.ner.onnx_tagger`). The outputs are those of the torch model in float32 to float rounding
(``tests/encoding/test_onnx_bert.py``); on a CPU with AMX torch's bf16 is the faster path, and this one the one
with the lower peak memory (``sapbert annotate --onnx``; docs/performance.md).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from spacy_sapbert.encoding.bert_settings import (IGNORED_TENSORS, WEIGHTS_FILE, WORD_EMBEDDINGS, BertSettings,
                                                   ConfigView, read_table, state_name)

OPSET = 17
POSITIONS = "embeddings.position_plus_type"
"""Position embeddings with token type 0's row added (every text here is one segment)."""


def available() -> bool:
    """Whether ``onnxruntime`` and ``onnx`` import (base requirements; the ``onnx`` extra names them too)."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def read_weights(folder: Path) -> Dict[str, np.ndarray]:
    """A weight file's tensors under this module's state names (numpy, as stored)."""
    from safetensors.numpy import load_file

    return {state_name(name): array for name, array in load_file(str(folder / WEIGHTS_FILE)).items()}


def float_state(folder: Path) -> Dict[str, np.ndarray]:
    """The weights as the torch model's float32 state dict has them (for the encoder's fingerprint)."""
    return {name: array.astype(np.float32) if array.dtype.kind == "f" else array
            for name, array in read_weights(folder).items()
            if name not in IGNORED_TENSORS and not name.startswith(("cls.", "lm_"))}


def _threads() -> int:
    """ONNX Runtime's intra-op threads: ``OMP_NUM_THREADS`` where it is set (as torch takes it: what a Ray actor or
    a batch job gives the process), else every CPU the process may run on."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Graph:
    """The nodes, placeholder initializers and bound arrays of one graph, written in order."""

    def __init__(self) -> None:
        from onnx import helper

        self.helper = helper
        self.nodes: List[Any] = []
        self.placeholders: List[Any] = []
        self.arrays: Dict[str, np.ndarray] = {}
        self._count = 0

    def weight(self, name: str, array: np.ndarray) -> str:
        """A weight handed to the session as an array (the graph holds a placeholder without its data)."""
        from onnx import TensorProto

        array = np.ascontiguousarray(array)
        kind = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16}[array.dtype]
        # no data in the graph: a reference to a file the session never opens, since it is handed the array
        placeholder = TensorProto(name=name, dims=list(array.shape), data_type=kind,
                                  data_location=TensorProto.EXTERNAL)
        for key, value in (("location", "given-as-an-array"), ("offset", "0"), ("length", str(array.nbytes))):
            entry = placeholder.external_data.add()
            entry.key, entry.value = key, value
        self.placeholders.append(placeholder)
        self.arrays[name] = array
        return name

    def const(self, values: Any, dtype: Any = np.int64) -> str:
        """A small constant (shapes, axes, scalars) stored in the graph itself."""
        from onnx import numpy_helper

        name = f"const{len(self.placeholders)}_{self._count}"
        self._count += 1
        self.placeholders.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        self._count += 1
        out = f"{kind.lower()}{self._count}"
        self.nodes.append(self.helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str, scale: float = 1.0) -> str:
        """``x @ weight.T + bias`` (``nn.Linear``), the weight transposed once here, in float32."""
        b = self.weight(f"{name}.b", (bias.astype(np.float32) * scale).astype(np.float32))
        w = self.weight(f"{name}.wT", (weight.astype(np.float32).T * scale).astype(np.float32))
        return self.op("Add", self.op("MatMul", x, w), b)

    def layer_norm(self, x: str, state: Dict[str, np.ndarray], name: str, eps: float) -> str:
        gamma = self.weight(f"{name}.weight", state[f"{name}.weight"].astype(np.float32))
        beta = self.weight(f"{name}.bias", state[f"{name}.bias"].astype(np.float32))
        return self.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=eps)


def _layer(g: _Graph, x: str, mask_bias: str, state: Dict[str, np.ndarray], i: int, s: BertSettings) -> str:
    """One BERT layer: self-attention (the query scaled by 1/sqrt(head width) in its weights), GELU."""
    p = f"encoder.layer.{i}."
    width = s.hidden_size // s.num_attention_heads
    split = g.const([0, 0, s.num_attention_heads, width])

    def heads(name: str, perm: List[int], scale: float = 1.0) -> str:
        projected = g.linear(x, state[f"{p}attention.self.{name}.weight"], state[f"{p}attention.self.{name}.bias"],
                             f"{p}{name}", scale)
        return g.op("Transpose", g.op("Reshape", projected, split), perm=perm)

    q = heads("query", [0, 2, 1, 3], 1.0 / math.sqrt(width))
    k = heads("key", [0, 2, 3, 1])
    v = heads("value", [0, 2, 1, 3])
    probs = g.op("Softmax", g.op("Add", g.op("MatMul", q, k), mask_bias), axis=-1)
    context = g.op("Reshape", g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3]),
                   g.const([0, 0, s.hidden_size]))
    attended = g.op("Add", g.linear(context, state[f"{p}attention.output.dense.weight"],
                                    state[f"{p}attention.output.dense.bias"], f"{p}attention.output"), x)
    x = g.layer_norm(attended, state, f"{p}attention.output.LayerNorm", s.layer_norm_eps)
    inner = g.linear(x, state[f"{p}intermediate.dense.weight"], state[f"{p}intermediate.dense.bias"],
                     f"{p}intermediate")
    # exact GELU, as torch's default: x/2 * (1 + erf(x / sqrt 2)) (the runtime fuses the pattern)
    erf = g.op("Erf", g.op("Div", inner, g.const(math.sqrt(2.0), np.float32)))
    gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", erf, g.const(1.0, np.float32))), g.const(0.5, np.float32))
    out = g.op("Add", g.linear(gelu, state[f"{p}output.dense.weight"], state[f"{p}output.dense.bias"],
                               f"{p}output"), x)
    return g.layer_norm(out, state, f"{p}output.LayerNorm", s.layer_norm_eps)


class OnnxBert:
    """Token ids (+ a mask, + the NER's gazetteer feature ids) → last hidden states, or the tag head's
    log-probabilities when built with one; a session of its own, which holds the weights."""

    def __init__(self, state: Dict[str, np.ndarray], settings: BertSettings, config: Dict[str, Any],
                 gazetteer: Optional[np.ndarray] = None, head: Optional[Tuple[np.ndarray, np.ndarray]] = None,
                 table_file: Optional[Path] = None, threads: Optional[int] = None) -> None:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        from spacy_sapbert.util.heap import release_freed_memory

        self.settings = settings
        self.config = ConfigView(config, settings)
        self.table_file = table_file
        """The folder whose weight file holds the word-piece table (the session keeps its own copy)."""
        g = _Graph()
        inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "length"])
                  for name in ("input_ids", "attention_mask")]
        table = state[WORD_EMBEDDINGS]
        words = g.op("Gather", g.weight(WORD_EMBEDDINGS, table), "input_ids")
        if table.dtype != np.float32:  # float16 as stored: only the rows looked up are widened
            words = g.op("Cast", words, to=TensorProto.FLOAT)
        positions = state["embeddings.position_embeddings.weight"].astype(np.float32) + \
            state["embeddings.token_type_embeddings.weight"][0].astype(np.float32)
        length = g.op("Shape", "input_ids", start=1, end=2)
        x = g.op("Add", words, g.op("Slice", g.weight(POSITIONS, positions), g.const([0]), length, g.const([0])))
        x = g.layer_norm(x, state, "embeddings.LayerNorm", settings.layer_norm_eps)
        if gazetteer is not None:  # the NER's KB-name states, added to the normalised embeddings as TokenTagger does
            inputs.append(helper.make_tensor_value_info("features", TensorProto.INT64, ["batch", "length"]))
            x = g.op("Add", x, g.op("Gather", g.weight("gazetteer_embed.weight", gazetteer.astype(np.float32)),
                                    "features"))
        # keys a text does not have: -10,000 before the softmax (a weight of exactly 0 in float32)
        keep = g.op("Cast", g.op("Unsqueeze", "attention_mask", g.const([1, 2])), to=TensorProto.FLOAT)
        mask_bias = g.op("Mul", g.op("Sub", g.const(1.0, np.float32), keep), g.const(-10000.0, np.float32))
        for i in range(settings.num_hidden_layers):
            x = _layer(g, x, mask_bias, state, i, settings)
        if head is not None:
            x = g.op("LogSoftmax", g.linear(x, head[0], head[1], "head"), axis=-1)
        g.nodes[-1].output[0] = "out"
        out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
        model = helper.make_model(helper.make_graph(g.nodes, "bert", inputs, [out], initializer=g.placeholders),
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or _threads()
        options.inter_op_num_threads = 1
        # the session copies what it is handed, so the arrays go at once (64 MB for the default's encoder)
        values = [ort.OrtValue.ortvalue_from_numpy(array) for array in g.arrays.values()]
        options.add_external_initializers(list(g.arrays), values)
        self.session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self._features = gazetteer is not None
        del values, g, table
        release_freed_memory()

    @property
    def word_embeddings(self) -> np.ndarray:
        """The word-piece table as stored (float16 in the shipped models), read again from :attr:`table_file`: the
        NER of the default pipeline checks it against its digest and builds its own session with it."""
        if self.table_file is None:
            raise ValueError("this model's word-piece table lives in its session only")
        return read_table(self.table_file)

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray,
                 features: Optional[np.ndarray] = None) -> np.ndarray:
        """(batch × length × hidden) states, or (batch × length × tags) log-probabilities with a head."""
        feed = {"input_ids": np.ascontiguousarray(input_ids, dtype=np.int64),
                "attention_mask": np.ascontiguousarray(attention_mask, dtype=np.int64)}
        if self._features:
            if features is None:
                raise ValueError("this model reads gazetteer features: none were given")
            feed["features"] = np.ascontiguousarray(features, dtype=np.int64)
        return self.session.run(["out"], feed)[0]

    # what the Encoder asks of a model
    def eval(self) -> "OnnxBert":
        return self

    def parameters(self) -> List[Any]:
        return []


def encode_ids(model: OnnxBert, ids: List[List[int]], pad_id: int, pooling: str, batch_size: int,
               normalize: bool = True, show_progress: bool = False) -> np.ndarray:
    """The :class:`~spacy_sapbert.encoding.encoder.Encoder`'s vectors of token-id lists: padded batches of texts of
    about one length (longest first), pooled as :func:`~spacy_sapbert.encoding.pooling.pool` pools (in numpy)."""
    from tqdm.auto import tqdm

    from spacy_sapbert.encoding.packed import padded_batches, padded_ids

    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    out = np.empty((len(ids), model.settings.hidden_size), dtype=np.float32)
    for rows in tqdm(padded_batches(lengths, batch_size), desc="encoding", unit="batch", disable=not show_progress):
        input_ids, mask = padded_ids([ids[i] for i in rows], pad_id)
        hidden = model(input_ids, mask)
        if pooling == "cls":
            out[rows] = hidden[:, 0]
        else:
            weights = mask[:, :, None].astype(np.float32)
            out[rows] = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1.0)
    if normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


def load(folder: Path, config: Dict[str, Any], threads: Optional[int] = None) -> OnnxBert:
    """The encoder of a folder :func:`~spacy_sapbert.encoding.bert.supports` (its pooler, never run, is not read
    into the graph)."""
    state = read_weights(folder)
    settings = BertSettings.from_config(config)
    missing = [name for name in (WORD_EMBEDDINGS, "embeddings.position_embeddings.weight") if name not in state]
    if missing:
        raise ValueError(f"{folder / WEIGHTS_FILE}: not a BertModel state dict (missing {missing})")
    return OnnxBert(state, settings, config, table_file=folder, threads=threads)
