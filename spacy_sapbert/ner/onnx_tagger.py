"""The NER's :class:`~spacy_sapbert.ner.model.TokenTagger` on ONNX Runtime: tagging without torch.

The same folder, weights and word-piece table as the torch model (:mod:`spacy_sapbert.ner.model`), computed by
:class:`~spacy_sapbert.encoding.onnx_bert.OnnxBert` with the gazetteer embedding added to the word embeddings and
the tag head's log-softmax in the graph. :meth:`~spacy_sapbert.ner.tagging.Tagging.scores` sends it one window's
pieces a run (short windows together, padded to the longest), longest first: ONNX Runtime's arena keeps what the
largest run needed, so a run of one window keeps the pipeline's peak low (docs/performance-notes.md, session 19).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from spacy_sapbert.encoding.bert_settings import WEIGHTS_FILE, WORD_EMBEDDINGS, BertSettings, state_name
from spacy_sapbert.encoding.fast_tokenizer import FastTokenizer
from spacy_sapbert.encoding.folder_check import check_model_folder
from spacy_sapbert.ner.model_files import SETTINGS_FILE, SHARED_KEY, read_settings, table_digest
from spacy_sapbert.ner.windows import Window


def load(folder: Path, word_embeddings: Optional[np.ndarray] = None, table_checked: bool = False
         ) -> Tuple[Any, FastTokenizer, Dict[str, Any]]:
    """(model, tokenizer, tagger.json) as :func:`spacy_sapbert.ner.model.load` reads them, for ONNX Runtime; a
    model saved without its word-piece table needs it (``word_embeddings``, a numpy array), digest checked
    unless the caller did (``table_checked``)."""
    from safetensors.numpy import load_file

    from spacy_sapbert.encoding.onnx_bert import OnnxBert

    check_model_folder(folder)
    settings = read_settings(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    state = {state_name(name): array for name, array in load_file(str(folder / WEIGHTS_FILE)).items()}
    shared = settings.get(SHARED_KEY)
    if shared is not None:
        if word_embeddings is None or not table_checked and table_digest(word_embeddings) != shared["sha256"]:
            raise ValueError(f"{folder / SETTINGS_FILE}: the word-piece table is shared with the {shared['from']!r} "
                             "pipe's encoder, and " + ("none was given" if word_embeddings is None else
                                                       "the one given differs"))
        state[WORD_EMBEDDINGS] = word_embeddings  # the same array as the linker's session reads
    missing = [name for name in ("gazetteer_embed.weight", "head.weight", "head.bias", WORD_EMBEDDINGS)
               if name not in state]
    if missing:
        raise ValueError(f"{folder / WEIGHTS_FILE}: not a tagger state dict (missing {missing})")
    gazetteer = state["gazetteer_embed.weight"]
    if gazetteer.shape[0] != max(int(settings["n_features"]), 1) or len(state["head.bias"]) != len(settings["tags"]):
        raise ValueError(f"{folder / WEIGHTS_FILE}: gazetteer or head shape differs from {folder / SETTINGS_FILE}")
    model = OnnxBert(state, BertSettings.from_config(config), config, gazetteer=gazetteer,
                     head=(state["head.weight"], state["head.bias"]), table_file=None if shared else folder)
    return model, FastTokenizer(folder, config.get("pad_token_id")), settings


def log_probs(model: Any, windows: Sequence[Window], pad_id: int) -> List[np.ndarray]:
    """Per window, the log-probabilities of each tag at its core tokens' first pieces (one padded pass)."""
    if any(len(w.features) != len(w.input_ids) for w in windows):
        raise ValueError("a window has not one feature per word piece")
    from spacy_sapbert.encoding.packed import padded_ids

    ids, mask = padded_ids([w.input_ids for w in windows], pad_id)
    features, _ = padded_ids([w.features for w in windows], 0)
    scores = model(ids, mask, features)
    return [scores[row, list(w.positions)] for row, w in enumerate(windows)]
