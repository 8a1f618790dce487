"""The generative linker's model: a BERT encoder-decoder that writes ``mention is name``.

Inputs follow GenBioEL: the encoder reads ``[CLS] left [ST] mention [ET] right [SEP]`` (the
markers are two of BERT's ``[unused]`` tokens where the vocabulary has them, else two added
tokens), the decoder starts from the prompt ``[CLS] mention is`` and writes a name and
``[SEP]``. No BART or T5 weights exist here, so the model is transformers'
``EncoderDecoderModel`` warm-started from one BERT folder on both sides (the decoder's
cross-attention is new), the way BertGeneration models are made.

Decoding is transformers' ``generate`` (beam search) with a ``prefix_allowed_tokens_fn``
that lets each beam take only a child of its node in the :class:`~.trie.NameTrie`, so every
output is a KB name. :meth:`GenerativeModel.score_names` is the same model teacher-forced
on names given from elsewhere (the dense linker's candidates): the mean log-probability of
each name's tokens after the prompt.

Saved as a folder: ``model.safetensors`` + config (``save_pretrained``), the tokenizer, and
``generative.json`` (markers, lengths, format version). No pickle.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.generative import CONTEXT_CHARS
from spacy_sapbert.generative.trie import NameTrie
from spacy_sapbert.util.jsonfile import read_json_object

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
SETTINGS_FILE = "generative.json"
FORMAT_VERSION = 1
UNUSED_MARKERS = ("[unused1]", "[unused2]")
ADDED_MARKERS = ("[ST]", "[ET]")
PROMPT = "is"


@dataclass
class Mention:
    """A mention in its context: the text left of it, itself, the text right of it."""

    left: str
    text: str
    right: str = ""

    @classmethod
    def around(cls, document: str, start: int, end: int, text: str, chars: int = CONTEXT_CHARS) -> "Mention":
        """``text`` (the normalised mention) with up to ``chars`` characters of ``document`` on each side of
        ``document[start:end]``: how training samples, evaluation and the pipe all cut the context."""
        return cls(document[max(0, start - chars):start], text, document[end:end + chars])


class GenerativeModel:
    """The encoder-decoder with its tokenizer, markers and length limits."""

    def __init__(self, model: Any, tokenizer: Any, markers: Tuple[str, str], max_context: int = 48,
                 max_name: int = 32) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.markers = markers
        self.marker_ids = tuple(tokenizer.convert_tokens_to_ids(m) for m in markers)
        self.cls_id, self.sep_id, self.pad_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        self.prompt_ids = self.tokens(PROMPT)
        decoder_positions = int(getattr(model.config.decoder, "max_position_embeddings", 512))
        # the decoder reads [CLS] mention prompt name [SEP]: the mention and the name share its positions
        self.max_context = max_context
        self.max_name = min(max_name, (decoder_positions - 2 - len(self.prompt_ids)) // 2)
        self.max_positions = int(getattr(model.config.encoder, "max_position_embeddings", 512))
        """Encoder positions: the context is cut to fit them, whatever ``max_context`` says."""

    # -- building, saving, loading ------------------------------------------------------------
    @classmethod
    def from_bert(cls, bert: PathLike, **limits: int) -> "GenerativeModel":
        """A new model whose encoder and decoder both start from the BERT folder ``bert``."""
        from transformers import AutoTokenizer, EncoderDecoderModel

        tokenizer = AutoTokenizer.from_pretrained(str(bert))
        vocab = tokenizer.get_vocab()
        markers = UNUSED_MARKERS if all(m in vocab for m in UNUSED_MARKERS) else ADDED_MARKERS
        if markers == ADDED_MARKERS:
            tokenizer.add_special_tokens({"additional_special_tokens": list(ADDED_MARKERS)})
        elif not all(m in tokenizer.all_special_tokens for m in markers):
            tokenizer.add_special_tokens({"additional_special_tokens": list(markers)})  # never split them
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(str(bert), str(bert))
        if len(tokenizer) > model.encoder.get_input_embeddings().num_embeddings:
            model.encoder.resize_token_embeddings(len(tokenizer))
            model.decoder.resize_token_embeddings(len(tokenizer))
        model.config.decoder_start_token_id = tokenizer.cls_token_id
        model.config.pad_token_id = tokenizer.pad_token_id
        model.config.eos_token_id = tokenizer.sep_token_id
        model.config.vocab_size = model.config.decoder.vocab_size
        return cls(model, tokenizer, markers, **limits)

    def save(self, folder: PathLike) -> Path:
        folder = Path(folder)
        self.model.save_pretrained(str(folder), safe_serialization=True)
        self.tokenizer.save_pretrained(str(folder))
        settings = {"format_version": FORMAT_VERSION, "markers": list(self.markers), "prompt": PROMPT,
                    "max_context": self.max_context, "max_name": self.max_name}
        (folder / SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return folder

    @classmethod
    def load(cls, folder: PathLike, device: str = "cpu") -> "GenerativeModel":
        from transformers import AutoTokenizer, EncoderDecoderModel

        folder = Path(folder)
        if not (folder / SETTINGS_FILE).is_file():
            raise InputError(f"not a generative linker model (no {SETTINGS_FILE})", folder)
        settings = read_json_object(folder / SETTINGS_FILE, FORMAT_VERSION, "generative model")
        model = EncoderDecoderModel.from_pretrained(str(folder), use_safetensors=True).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        return cls(model, tokenizer, tuple(settings["markers"]), int(settings["max_context"]),
                   int(settings["max_name"]))

    # -- inputs ---------------------------------------------------------------------------------
    def tokens(self, text: str) -> List[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def name_ids(self, name: str) -> List[int]:
        return self.tokens(name)[: self.max_name]

    def encoder_ids(self, mention: Mention) -> List[int]:
        left = self.tokens(mention.left)[-self.max_context:] if mention.left else []
        right = self.tokens(mention.right)[: self.max_context] if mention.right else []
        inner = self.tokens(mention.text)[: self.max_name]
        budget = max(0, self.max_positions - len(inner) - 4)  # [CLS], two markers, [SEP]
        keep_left = min(len(left), max(budget - len(right), budget // 2))
        left, right = left[len(left) - keep_left:], right[: budget - keep_left]
        start, end = self.marker_ids
        return [self.cls_id, *left, start, *inner, end, *right, self.sep_id]

    def decoder_prompt(self, mention: Mention) -> List[int]:
        return [self.cls_id, *self.tokens(mention.text)[: self.max_name], *self.prompt_ids]

    def _padded(self, rows: Sequence[Sequence[int]]) -> Tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        device = self.model.device
        return ids.to(device), mask.to(device)

    # -- training and scoring ---------------------------------------------------------------------
    def token_log_probs(self, mentions: Sequence[Mention], names: Sequence[str]) -> List[torch.Tensor]:
        """Per pair, the log-probabilities of the name's tokens and ``[SEP]`` after the prompt."""
        encoder_ids, encoder_mask = self._padded([self.encoder_ids(m) for m in mentions])
        prompts = [self.decoder_prompt(m) for m in mentions]
        targets = [[*p, *self.name_ids(n), self.sep_id] for p, n in zip(prompts, names)]
        decoder_ids, decoder_mask = self._padded([t[:-1] for t in targets])
        logits = self.model(input_ids=encoder_ids, attention_mask=encoder_mask, decoder_input_ids=decoder_ids,
                            decoder_attention_mask=decoder_mask).logits
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        out = []
        for i, (prompt, target) in enumerate(zip(prompts, targets)):
            positions = torch.arange(len(prompt) - 1, len(target) - 1, device=log_probs.device)
            wanted = torch.tensor(target[len(prompt):], device=log_probs.device)
            out.append(log_probs[i, positions, wanted])
        return out

    def loss(self, mentions: Sequence[Mention], names: Sequence[str]) -> torch.Tensor:
        """Mean negative log-likelihood of the target names' tokens (the prompt is given, not learned)."""
        return -torch.cat(self.token_log_probs(mentions, names)).mean()

    @torch.no_grad()
    def score_names(self, mention: Mention, names: Sequence[str]) -> List[float]:
        """Mean token log-probability of each of ``names`` as the continuation of ``mention``'s prompt."""
        if not names:
            return []
        rows = self.token_log_probs([mention] * len(names), names)
        return [float(row.mean()) for row in rows]

    # -- constrained decoding ---------------------------------------------------------------------
    def generate(self, mention: Mention, trie: NameTrie, beams: int = 5, top: int = 5) -> List[Tuple[str, float]]:
        """The best ``top`` KB concepts for ``mention`` by constrained beam search: (concept ID, score)
        with score the beam's length-normalised log-probability, best first, one entry per concept."""
        ranked: Dict[str, float] = {}
        for name, score in self.generate_names(mention, trie, beams=max(beams, top, 2)):
            for concept in trie.concepts(name):
                ranked.setdefault(concept, score)
        return sorted(ranked.items(), key=lambda item: -item[1])[:top]

    @torch.no_grad()
    def generate_names(self, mention: Mention, trie: NameTrie, beams: int = 5) -> List[Tuple[List[int], float]]:
        """The ``beams`` finished beams of constrained decoding: (name token ids with ``[SEP]``, score)."""
        encoder_ids, encoder_mask = self._padded([self.encoder_ids(mention)])
        prompt = self.decoder_prompt(mention)

        def allowed(batch_id: int, sequence: torch.Tensor) -> List[int]:
            choices = trie.allowed(sequence.tolist()[len(prompt):])
            return choices or [self.pad_id]  # a finished or impossible beam: pad out

        output = self.model.generate(
            input_ids=encoder_ids, attention_mask=encoder_mask,
            decoder_input_ids=torch.tensor([prompt], device=self.model.device), num_beams=beams,
            num_return_sequences=beams, prefix_allowed_tokens_fn=allowed, max_new_tokens=self.max_name + 1,
            eos_token_id=self.sep_id, pad_token_id=self.pad_id, decoder_start_token_id=self.cls_id,
            do_sample=False, early_stopping=True, output_scores=True, return_dict_in_generate=True)
        return [(self._up_to_end(sequence[len(prompt):]), float(score))
                for sequence, score in zip(output.sequences.tolist(), output.sequences_scores.tolist())]

    def _up_to_end(self, ids: List[int]) -> List[int]:
        """A beam's name: its tokens up to its first ``[SEP]`` (generate pads finished beams after it)."""
        return ids[: ids.index(self.sep_id) + 1] if self.sep_id in ids else ids

    def build_trie(self, names: Sequence[Tuple[str, str]]) -> NameTrie:
        """The trie of ``(name, concept ID)`` pairs, tokenized as this model's targets are."""
        return NameTrie.build(((self.name_ids(name), concept) for name, concept in names), self.sep_id)


__all__ = ["CONTEXT_CHARS", "GenerativeModel", "Mention", "PROMPT"]
