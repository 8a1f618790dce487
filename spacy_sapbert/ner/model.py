"""The transformer NER model: a BERT encoder, a gazetteer-feature embedding, a linear tag head.

The gazetteer embedding is added to the encoder's embedding output and starts at zero, so
training begins from the unchanged encoder and learns how much each KB-match state is worth.
Saved as a plain folder: ``model.safetensors`` (encoder weights under their ``BertModel`` names,
plus ``gazetteer_embed.weight``, ``head.weight``, ``head.bias``), the encoder's ``config.json``
and ``tokenizer.json``, and ``tagger.json`` (tags, feature settings); loaded with
:mod:`spacy_sapbert.encoding.bert`, so inference needs no ``transformers`` import.

Trained with its word-piece table frozen, the NER keeps the table of the encoder it started
from: in the default pipeline, the linker's. There the NER is saved without it (half its
weights) and takes it from the linker's encoder when loaded, after checking its digest.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn

from spacy_sapbert.encoding import bert
from spacy_sapbert.encoding.fast_tokenizer import TOKENIZER_FILE, FastTokenizer
from spacy_sapbert.encoding.folder_check import check_model_folder
from spacy_sapbert.encoding.half_weights import WORD_EMBEDDINGS, half_linear_weights, read_as
from spacy_sapbert.ner.model_files import FORMAT, SETTINGS_FILE, SHARED_KEY, read_settings, read_table, table_digest
from spacy_sapbert.ner.windows import Window

PathLike = Union[str, Path]
__all__ = ["FORMAT", "SETTINGS_FILE", "SHARED_KEY", "WORD_EMBEDDINGS", "TokenTagger", "collate", "from_encoder", "load",
           "packed_log_probs", "read_settings", "read_word_embeddings", "save", "table_digest"]


class TokenTagger(nn.Module):
    """Word pieces (+ gazetteer features) → tag scores at the requested piece positions."""

    def __init__(self, encoder: bert.BertEncoder, n_tags: int, n_features: int, dropout: float = 0.1) -> None:
        super().__init__()
        width = encoder.settings.hidden_size
        self.encoder = encoder
        self.gazetteer_embed = nn.Embedding(max(n_features, 1), width)
        nn.init.zeros_(self.gazetteer_embed.weight)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(width, n_tags)

    def forward(self, input_ids: torch.Tensor, features: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Scores (batch × pieces × tags)."""
        enc = self.encoder
        x = enc.embeddings(input_ids, torch.zeros_like(input_ids)) + self.gazetteer_embed(features)
        mask = (attention_mask != 0)[:, None, None, :]
        for layer in enc.encoder.layer:
            x = layer(x, mask)
        return self.head(self.dropout(x))


def collate(windows: Sequence[Window], pad_id: int, device: Union[str, torch.device] = "cpu"
            ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, features, attention_mask), padded to the longest window: training's batches (inference packs
    its windows instead: :func:`packed_log_probs`)."""
    width = max(len(w.input_ids) for w in windows)
    ids = torch.full((len(windows), width), pad_id, dtype=torch.long)
    feats = torch.zeros((len(windows), width), dtype=torch.long)
    mask = torch.zeros((len(windows), width), dtype=torch.long)
    for row, w in enumerate(windows):
        ids[row, :len(w.input_ids)] = torch.tensor(w.input_ids)
        feats[row, :len(w.features)] = torch.tensor(w.features)
        mask[row, :len(w.input_ids)] = 1
    return ids.to(device), feats.to(device), mask.to(device)


def read_word_embeddings(encoder_folder: PathLike) -> torch.Tensor:
    """The word-piece table of a saved encoder folder (``model.safetensors``), read alone, in float32."""
    return torch.from_numpy(read_table(encoder_folder)).float()


def save(model: TokenTagger, tokenizer_folder: Path, tags: Sequence[str], folder: PathLike,
         dtype: torch.dtype = torch.float32, extra: Dict[str, Any] = None, shared_from: Optional[str] = None) -> Path:
    """Write the model folder (see the module docstring); ``dtype`` float16 for shipping. With
    ``shared_from`` (a pipe name), the word-piece table is left out and ``tagger.json`` says which
    pipe's encoder holds it (:func:`load` checks the digest)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {}
    for name, tensor in model.state_dict().items():
        name = name[len("encoder."):] if name.startswith("encoder.") else name
        if shared_from is not None and name == WORD_EMBEDDINGS:
            extra = {**(extra or {}), SHARED_KEY: {"from": shared_from, "sha256": table_digest(tensor)}}
            continue
        tensor = tensor.detach().cpu()
        state[name] = (tensor.to(dtype) if tensor.is_floating_point() else tensor).contiguous()
    save_file(state, str(folder / bert.WEIGHTS_FILE), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(model.encoder.config.to_dict(), indent=2), encoding="utf-8")
    if tokenizer_folder.resolve() != folder.resolve():
        shutil.copyfile(tokenizer_folder / TOKENIZER_FILE, folder / TOKENIZER_FILE)
    settings = {"format": FORMAT, "tags": list(tags), "n_features": model.gazetteer_embed.num_embeddings,
                **(extra or {})}
    (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=2), encoding="utf-8")
    return folder


def load(folder: PathLike, word_embeddings: Optional[torch.Tensor] = None, table_checked: bool = False,
         linear_dtype: Optional[str] = None) -> Tuple[TokenTagger, FastTokenizer, Dict[str, Any]]:
    """(model in eval mode, tokenizer, tagger.json) from a folder :func:`save` wrote; a model saved
    with ``shared_from`` needs the table, ``word_embeddings``, from that pipe's encoder (its digest is
    checked here unless the caller already did: ``table_checked``). ``linear_dtype`` (``bfloat16`` or
    ``float16``): the linear layers' weights read straight into that precision, for inference under
    autocast of it only (:func:`~spacy_sapbert.encoding.half_weights.half_linear_weights` says why);
    float32 otherwise."""
    from safetensors.torch import load_file

    folder = Path(folder)
    check_model_folder(folder)
    settings = read_settings(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    with bert.unset_weights():  # every parameter comes from the file (or the shared table): checked below
        model = TokenTagger(bert.BertEncoder(bert.BertSettings.from_config(config), config), len(settings["tags"]),
                            int(settings["n_features"]))
    tensors = load_file(str(folder / bert.WEIGHTS_FILE))
    half = half_linear_weights(model, linear_dtype)
    state = {}
    for name, tensor in tensors.items():
        key = name if name.startswith(("gazetteer_embed.", "head.")) else f"encoder.{name}"
        state[key] = read_as(tensor, half.get(key))
    shared = settings.get(SHARED_KEY)
    if shared is not None:
        if word_embeddings is None or not table_checked and table_digest(word_embeddings) != shared["sha256"]:
            raise ValueError(f"{folder / SETTINGS_FILE}: the word-piece table is shared with the "
                             f"{shared['from']!r} pipe's encoder, and " +
                             ("none was given" if word_embeddings is None else "the one given differs"))
        # the table itself, not a copy: the NER and the linker's encoder hold one 30k x 384 tensor, in the
        # precision the encoder keeps it (float16 as stored: half_weights.WORD_EMBEDDINGS)
        state[f"encoder.{WORD_EMBEDDINGS}"] = word_embeddings.detach().cpu()
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise ValueError(f"{folder / bert.WEIGHTS_FILE}: not a tagger state dict (missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]})")
    return model.eval(), FastTokenizer(folder, config.get("pad_token_id")), settings


def from_encoder(folder: PathLike, tags: Sequence[str], n_features: int, layers: int = 0
                 ) -> Tuple[TokenTagger, FastTokenizer]:
    """A new tagger on a pretrained BERT folder (the project's encoder, or MiniLM's); ``layers`` > 0
    keeps only the encoder's first ``layers`` layers (a faster tagger; the config says so)."""
    import dataclasses

    encoder, tokenizer, config = bert.load(Path(folder))
    if 0 < layers < encoder.settings.num_hidden_layers:
        encoder.encoder.layer = encoder.encoder.layer[:layers]
        encoder.settings = dataclasses.replace(encoder.settings, num_hidden_layers=layers)
        encoder.config = bert.ConfigView({**config, "num_hidden_layers": layers}, encoder.settings)
    return TokenTagger(encoder.train(), len(tags), n_features), tokenizer


def scores_at(logits: torch.Tensor, windows: Sequence[Window]) -> List[torch.Tensor]:
    """Per window, the rows of ``logits`` at its core tokens' first pieces."""
    return [logits[row, w.positions] for row, w in enumerate(windows)]


def packed_log_probs(model: TokenTagger, windows: Sequence[Window], group_size: int,
                     device: Union[str, torch.device] = "cpu") -> List[torch.Tensor]:
    """Per window, the log-probabilities of each tag at its core tokens' first pieces, from one pass over
    the windows' pieces end to end (:func:`~spacy_sapbert.encoding.packed.packed_states`, the windows
    sorted longest first, its last layer only at those pieces): no padding but within attention groups of
    ``group_size`` windows, and the rows of every linear layer in a few fixed counts (CPU matrix multiplies, oneDNN's, build and keep a kernel
    with its own packed copy of the weights for each shape they see: windows padded to their exact length once
    held about 85 MB more at the default NER's peak over NCBI test). The padded batch (:func:`collate`,
    :meth:`TokenTagger.forward`) gives the same to float rounding (``tests/ner/test_packed_tagging.py``); over
    NCBI test's 100 abstracts, padded to a multiple of 64 pieces in batches of 4, it computed 10% more rows."""
    from spacy_sapbert.encoding.packed import packed_states

    lengths = np.fromiter((len(w.input_ids) for w in windows), dtype=np.int64, count=len(windows))
    if any(len(w.features) != len(w.input_ids) for w in windows):
        raise ValueError("a window has not one feature per word piece")
    total = int(lengths.sum())
    ids = torch.from_numpy(np.fromiter((t for w in windows for t in w.input_ids), dtype=np.int64, count=total))
    feats = torch.from_numpy(np.fromiter((f for w in windows for f in w.features), dtype=np.int64, count=total))
    ids, feats = ids.to(device), feats.to(device)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    scored = [len(w.positions) for w in windows]
    n_scored = sum(scored)
    at = np.fromiter((start + p for start, w in zip(starts.tolist(), windows) for p in w.positions), dtype=np.int64,
                     count=n_scored)
    # the last layer only at the scored pieces, and the head over them in the row count the pass padded them to
    states = packed_states(model.encoder, ids, lengths, group_size, extra=model.gazetteer_embed(feats), last_rows=at)
    picked = model.head(model.dropout(states)).float().log_softmax(-1)
    return list(torch.split(picked[:n_scored], scored))
