"""Context re-ranker: a cross-encoder that re-scores the dense linker's top-k concepts of a mention in context.

The dense first stage (:meth:`spacy_sapbert.linking.linker.Linker.candidates`) sees the mention
string alone; the re-ranker reads the mention in its sentence together with one candidate
at a time (:mod:`spacy_sapbert.linking.rerank.inputs` says exactly what it reads) and gives each
candidate a score; :meth:`Reranker.probabilities` turns a mention's scores into a
distribution over its candidates, ``softmax(scores / temperature)``, with the temperature
fitted on held-out data so that the probabilities are calibrated.

A re-ranker folder is a Hugging Face ``BertForSequenceClassification`` folder with one label
(``config.json``, ``model.safetensors``, the tokenizer files), which transformers and
sentence-transformers' ``CrossEncoder`` load as they are, plus ``reranker.json``
(:class:`~spacy_sapbert.linking.rerank.settings.RerankerSettings`). The score is that class's: a
linear layer on the pooler's ``tanh(W · h[CLS] + b)``. Loading here needs neither transformers nor
remote code: the weights (safetensors only) go into :mod:`spacy_sapbert.encoding.bert`'s BERT.
Inference runs batched, sorted by length, under ``torch.inference_mode``, with bf16 autocast on
CPUs that compute bf16 natively and float16 weights on a GPU (the ``auto`` precision of
:class:`~spacy_sapbert.encoding.encoder.Encoder`).
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import torch
from torch import nn

from spacy_sapbert.encoding.modelfiles import TOKENIZER_FILES
from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.rerank.inputs import MentionContext, PairEncoder, candidate_text
from spacy_sapbert.linking.rerank.settings import SETTINGS_FILE, RerankerSettings
from spacy_sapbert.util.devices import DTYPE_ALIASES, auto_precision, check_dtype, resolve_device
from spacy_sapbert.util.jsonfile import read_json_object

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
WEIGHTS_FILE = "model.safetensors"
__all__ = ["CrossEncoder", "MentionContext", "Reranker", "candidate_text", "choose", "softmax"]


def softmax(scores: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Softmax of a mention's candidate scores (float64 arithmetic; an empty input stays empty)."""
    if scores.size == 0:
        return scores.astype(np.float64)
    z = np.asarray(scores, dtype=np.float64) / temperature
    z = np.exp(z - z.max())
    return z / z.sum()


def choose(probabilities: np.ndarray, margin: float) -> int:
    """The index of the candidate to link, the candidates being in the first stage's order: the
    re-ranker's best, unless its probability beats the first stage's top candidate (index 0) by
    no more than ``margin``; -1 when there is no candidate."""
    if len(probabilities) == 0:
        return -1
    best = int(np.argmax(probabilities))
    return best if probabilities[best] - probabilities[0] > margin else 0


class CrossEncoder(nn.Module):
    """``BertForSequenceClassification`` (one label) as computed and named there: ``bert``, then
    ``classifier`` on the pooler's ``tanh(dense(h[CLS]))``. ``bert`` is a transformers ``BertModel``
    (training) or :class:`spacy_sapbert.encoding.bert.BertEncoder` (inference): both have ``pooler.dense``."""

    def __init__(self, bert: nn.Module, hidden_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.bert = bert
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
        pooled = torch.tanh(self.bert.pooler.dense(hidden[:, 0]))
        return self.classifier(self.dropout(pooled)).squeeze(-1)


class Reranker:
    """Scores (mention in context, candidate text) pairs. Load one with :meth:`load`; the trainer
    builds one around the model it trains (``config``: the BERT config.json as a dict;
    ``tokenizer_folder``: where ``tokenizer.json`` and the other tokenizer files are)."""

    def __init__(self, model: CrossEncoder, settings: RerankerSettings, config: Dict[str, Any],
                 tokenizer_folder: PathLike, device: str = "cpu", autocast: bool = False,
                 batch_size: int = 128) -> None:
        self.model = model
        self.settings = settings.validate()
        self.config = dict(config)
        self.tokenizer_folder = Path(tokenizer_folder)
        self.inputs = PairEncoder(self.tokenizer_folder / "tokenizer.json", settings.max_length,
                                  settings.max_candidate_length, settings.marker_start, settings.marker_end)
        self.device = device
        self.autocast = autocast
        """CPU bf16: the weights stay float32 and the forward pass runs under bf16 autocast."""
        if batch_size < 1:
            raise InputError(f"batch_size must be positive, got {batch_size}", field="batch_size")
        self.batch_size = int(batch_size)

    # -- files --------------------------------------------------------------------------
    @classmethod
    def load(cls, folder: PathLike, device: str = "auto", dtype: Optional[str] = None,
             batch_size: int = 128) -> "Reranker":
        """A re-ranker folder; ``dtype`` ``auto``: float16 weights on a GPU, bf16 autocast on a CPU with
        native bf16, float32 elsewhere (``float32``/``bfloat16``/``float16`` to choose; float16 on GPU only)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        from spacy_sapbert.encoding import bert

        from spacy_sapbert.encoding.folder_check import check_model_folder

        folder = Path(folder)
        settings = RerankerSettings.read(folder / SETTINGS_FILE)
        check_model_folder(folder)
        config = read_json_object(folder / "config.json")
        ok, why = bert.supports(folder, config)
        if not ok:
            raise InputError(f"not a BERT re-ranker folder this package runs: {why}", folder)
        with bert.unset_weights():  # every parameter comes from the file (strict loading below)
            model = CrossEncoder(bert.BertEncoder(bert.BertSettings.from_config(config), config),
                                 int(config["hidden_size"]))
        try:
            state = {k: v.float() if v.is_floating_point() else v
                     for k, v in load_file(str(folder / WEIGHTS_FILE)).items() if not k.endswith("position_ids")}
            model.load_state_dict(state, strict=True)
        except (OSError, SafetensorError, RuntimeError) as err:
            raise InputError(f"cannot load the re-ranker weights ({err})", folder / WEIGHTS_FILE) from err
        device = resolve_device(device)
        key = check_dtype(dtype)
        if key == "auto":
            key = auto_precision(device)
        if key == "float16" and not device.startswith("cuda"):
            logger.warning("float16 is used on GPU only; scoring in float32 on %s", device)
            key = "float32"
        autocast = key == "bfloat16" and device == "cpu"
        if key != "float32" and not autocast:
            model.to(getattr(torch, key))
        model.to(device).eval()
        logger.info("re-ranker %s: device=%s dtype=%s k=%d", folder, device, key, settings.k)
        return cls(model, settings, config, folder, device=device, autocast=autocast, batch_size=batch_size)

    def exact_weights_dtype(self) -> str:
        """float16 when every weight is a float16 number (a shipped re-ranker, loaded), else float32:
        what saves the weights as they are, so that a saved pipe scores exactly as before."""
        exact = all(torch.equal(v.to(torch.float16).to(v.dtype), v)
                    for v in self.model.state_dict().values() if v.is_floating_point())
        return "float16" if exact else "float32"

    def save(self, folder: PathLike, weights_dtype: str = "float16", overwrite: bool = False) -> Path:
        """Write the folder atomically (whole or not at all), weights in ``weights_dtype`` (float16 to ship).
        Replaces only a missing or empty folder or an earlier re-ranker, unless ``overwrite``."""
        from safetensors.torch import save as to_bytes

        from spacy_sapbert.util.atomic import atomic_dir, check_replaceable

        folder = Path(folder)
        stored = DTYPE_ALIASES.get(str(weights_dtype).lower())
        if stored is None:
            raise InputError(f"unknown weights_dtype {weights_dtype!r}", field="weights_dtype")
        check_replaceable(folder, lambda p: (p / SETTINGS_FILE).is_file(), f"a re-ranker (no {SETTINGS_FILE})",
                          "Choose a new or empty folder.", overwrite=overwrite)
        target = getattr(torch, stored)
        state = {k: (v.detach().to("cpu", target) if v.is_floating_point() else v.detach().cpu()).contiguous()
                 for k, v in self.model.state_dict().items() if not k.endswith("position_ids")}
        config = {k: v for k, v in self.config.items() if k not in ("torch_dtype", "id2label", "label2id")}
        config.update(architectures=["BertForSequenceClassification"], num_labels=1, dtype=stored,
                      id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
        with atomic_dir(folder) as tmp:
            # written as bytes so that the file gets the usual permissions (save_file makes it 0600)
            (tmp / WEIGHTS_FILE).write_bytes(to_bytes(state, metadata={"format": "pt"}))
            (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True, default=str) + "\n",
                                             encoding="utf-8")
            for name in TOKENIZER_FILES:
                if (self.tokenizer_folder / name).is_file():
                    shutil.copyfile(self.tokenizer_folder / name, tmp / name)
            (tmp / SETTINGS_FILE).write_text(self.settings.to_json(), encoding="utf-8")
        logger.info("re-ranker saved to %s (%s weights)", folder, stored)
        return folder

    # -- scoring ------------------------------------------------------------------------
    def score(self, contexts: Sequence[MentionContext], candidates: Sequence[Sequence[str]],
              batch_size: Optional[int] = None,
              first_stage: Optional[Sequence[Sequence[float]]] = None) -> List[np.ndarray]:
        """One float32 score per candidate text, per mention (higher: better). A context is
        ``(text, start, end)`` or a :class:`MentionContext`; candidate texts come from :func:`candidate_text`.
        ``first_stage``: each candidate's first-stage cosine, needed when ``first_stage_weight`` is set
        (the score is then the model's plus ``first_stage_weight`` × cosine)."""
        weight = self.settings.first_stage_weight
        if weight and first_stage is None:
            raise InputError("this re-ranker adds the first stage's cosines to its scores (first_stage_weight "
                             f"{weight:g}): pass them as first_stage=", field="first_stage")
        pairs = self.inputs.pairs(contexts, candidates)
        flat = [pair for row in pairs for pair in row]
        scores = self._forward(flat, int(batch_size or self.batch_size))
        bounds = np.cumsum([0] + [len(row) for row in pairs])
        out = [scores[bounds[i]:bounds[i + 1]] for i in range(len(pairs))]
        if weight:
            assert first_stage is not None
            if len(first_stage) != len(out) or any(len(f) != len(s) for f, s in zip(first_stage, out)):
                raise InputError("first_stage must hold one cosine per candidate of each mention", field="first_stage")
            out = [s + np.float32(weight) * np.asarray(f, dtype=np.float32) for s, f in zip(out, first_stage)]
        return out

    def _forward(self, pairs: Sequence[Any], batch_size: int) -> np.ndarray:
        out = np.zeros(len(pairs), dtype=np.float32)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]), reverse=True)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
                for start in range(0, len(order), batch_size):
                    rows = order[start:start + batch_size]
                    tensors = [t.to(self.device) for t in self.inputs.collate([pairs[i] for i in rows])]
                    out[rows] = self.model(*tensors).float().cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    def probabilities(self, contexts: Sequence[MentionContext], candidates: Sequence[Sequence[str]],
                      batch_size: Optional[int] = None,
                      first_stage: Optional[Sequence[Sequence[float]]] = None) -> List[np.ndarray]:
        """``softmax(scores / temperature)`` over each mention's candidates."""
        return [softmax(s, self.settings.temperature)
                for s in self.score(contexts, candidates, batch_size, first_stage)]

    def choose(self, probabilities: np.ndarray) -> int:
        """:func:`choose` with this re-ranker's margin."""
        return choose(probabilities, self.settings.margin)

    def rerank(self, contexts: Sequence[MentionContext], candidates: Sequence[Sequence[str]],
               batch_size: Optional[int] = None,
               first_stage: Optional[Sequence[Sequence[float]]] = None) -> List[List[int]]:
        """Per mention, candidate indices best first: the :meth:`choose` choice, then the others by probability."""
        return [self.order(probs) for probs in self.probabilities(contexts, candidates, batch_size, first_stage)]

    def order(self, probabilities: np.ndarray) -> List[int]:
        """Candidate indices best first: the :meth:`choose` choice, then the others by probability."""
        chosen = self.choose(probabilities)
        rest = [int(i) for i in np.argsort(-probabilities, kind="stable") if i != chosen]
        return ([chosen] if chosen >= 0 else []) + rest

    def __repr__(self) -> str:
        return (f"Reranker(k={self.settings.k}, max_length={self.settings.max_length}, temperature="
                f"{self.settings.temperature:.3g}, margin={self.settings.margin:.3g}, first_stage_weight="
                f"{self.settings.first_stage_weight:g}, device={self.device!r})")
