"""What the context re-ranker reads: a mention in its context, paired with each candidate's text.

One pair is ``[CLS] context [SEP] candidate [SEP]`` (token types 0 then 1), at most
``max_length`` tokens:

- *candidate*: :func:`candidate_text`, the concept's best-matching dictionary name (the one
  the dense search found) and its canonical name, ``"best ; canonical"`` (the canonical name
  alone when they are the same), cut to ``max_candidate_length`` tokens;
- *context*: a window of the text around the mention with the marker strings around the
  mention, ``… left « mention » right …``, filling what the mention's longest candidate leaves
  of ``max_length``. The mention is kept whole (only a mention longer than the whole window
  is cut), the rest is split evenly left and right (what one side lacks goes to the other),
  and the window never starts or ends inside a word. The window is taken from the text given:
  pass a sentence for a sentence window, the document for a wider one.

Markers are plain strings that the model's own tokenizer maps to tokens it was pretrained
with (``«`` and ``»`` are one WordPiece each in BERT's uncased vocabulary): no new special
tokens, so no embedding rows that start untrained, no resized vocabulary, and the tokenizer
files are the base model's, unchanged. Marker tokens occurring in the text are dropped from
the window, so a marker in the input always means the mention.

A :class:`MentionContext` may carry the ``mention`` text the first stage searched (a
sub-mention of a composite, an abbreviation's long form): it is then what stands between
the markers, in place of the span's own text.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from spacy_sapbert.errors import InputError

Pair = Tuple[List[int], List[int]]
"""(input ids, token type ids) of one (context, candidate) pair."""


class MentionContext(NamedTuple):
    """A mention: ``text[start:end]`` (character offsets), optionally with the text that replaces the span."""

    text: str
    start: int
    end: int
    mention: Optional[str] = None


def candidate_text(best_name: str, canonical_name: str, separator: str = " ; ") -> str:
    """A candidate concept as the re-ranker reads it: ``best ; canonical`` (one name when they are equal)."""
    best, canonical = best_name.strip(), canonical_name.strip()
    if not best or best.lower() == canonical.lower():
        return canonical or best
    return f"{best}{separator}{canonical}" if canonical else best


class PairEncoder:
    """Mention contexts and candidate texts → token ids of the pairs, with a ``tokenizers`` tokenizer
    (the ``tokenizer.json`` of the model folder; BERT's ``[CLS]``/``[SEP]`` and WordPiece ``##``)."""

    def __init__(self, tokenizer_file: Path, max_length: int, max_candidate_length: int, marker_start: str,
                 marker_end: str) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        ids = [self.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")]
        if ids[0] is None or ids[1] is None:
            raise InputError("the re-ranker needs a BERT tokenizer with [CLS] and [SEP] tokens", tokenizer_file)
        self.cls, self.sep, self.pad = int(ids[0]), int(ids[1]), int(ids[2] or 0)
        self.max_length = max_length
        self.max_candidate_length = max_candidate_length
        self.start_ids = self._ids(marker_start)
        self.end_ids = self._ids(marker_end)
        if not self.start_ids or not self.end_ids:
            raise InputError("a marker string tokenizes to nothing", tokenizer_file, field="markers")
        self._markers = {ids[0] for ids in (self.start_ids, self.end_ids) if len(ids) == 1}
        if max_length - 3 - max_candidate_length - len(self.start_ids) - len(self.end_ids) < 4:
            raise InputError(f"max_length {max_length} leaves fewer than 4 context tokens besides a candidate of "
                             f"{max_candidate_length} tokens and the markers", field="max_length")

    def _ids(self, text: str) -> List[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def candidate_ids(self, texts: Sequence[str]) -> List[List[int]]:
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [list(e.ids[: self.max_candidate_length]) for e in encodings]

    def context_ids(self, context: MentionContext, budget: int, encoding: Any = None) -> List[int]:
        """``left « mention » right`` in at most ``budget`` tokens (``encoding``: the text's, if at hand)."""
        text, start, end, mention = context
        if encoding is None:
            encoding = self.tokenizer.encode(text, add_special_tokens=False)
        ids, tokens, offsets = encoding.ids, encoding.tokens, encoding.offsets
        n = len(ids)
        inside = [i for i, (s, e) in enumerate(offsets) if s < end and e > start]
        if inside:
            first, last = inside[0], inside[-1] + 1
        else:  # an empty span (or only spaces): the markers go where it is
            first = last = next((i for i, (s, _) in enumerate(offsets) if s >= end), n)
        while 0 < first < n and tokens[first].startswith("##"):  # a span that starts inside a word
            first -= 1
        while last < n and tokens[last].startswith("##"):  # … or ends inside one
            last += 1
        core = list(ids[first:last]) if mention is None else self._ids(mention)
        core = [t for t in core if t not in self._markers]
        room = budget - len(self.start_ids) - len(self.end_ids)
        core = core[:max(room, 1)]  # only a mention longer than the whole window is cut
        room = max(room - len(core), 0)
        right = min(n - last, room - min(first, room // 2))
        left = min(first, room - right)
        lo, hi = first - left, last + right
        while lo < first and tokens[lo].startswith("##"):  # no partial word at the window's edges
            lo += 1
        while last < hi < n and tokens[hi].startswith("##"):
            hi -= 1
        keep = [t for t in ids[lo:first] if t not in self._markers], [t for t in ids[last:hi] if t not in self._markers]
        return keep[0] + self.start_ids + core + self.end_ids + keep[1]

    def pairs(self, contexts: Sequence[MentionContext], candidates: Sequence[Sequence[str]]) -> List[List[Pair]]:
        """The pairs of every mention with each of its candidates (in the candidates' order)."""
        if len(contexts) != len(candidates):
            raise InputError(f"{len(contexts)} contexts but {len(candidates)} candidate lists")
        contexts = [MentionContext(*c) for c in contexts]
        texts = list(dict.fromkeys(c.text for c in contexts))
        encoded: Dict[str, Any] = dict(zip(texts, self.tokenizer.encode_batch(texts, add_special_tokens=False)))
        names = list(dict.fromkeys(t for row in candidates for t in row))
        name_ids = dict(zip(names, self.candidate_ids(names))) if names else {}
        out: List[List[Pair]] = []
        for context, row in zip(contexts, candidates):
            if not row:
                out.append([])
                continue
            cands = [name_ids[t] for t in row]
            budget = self.max_length - 3 - max(len(c) for c in cands)
            left = [self.cls] + self.context_ids(context, budget, encoded[context.text]) + [self.sep]
            out.append([(left + c + [self.sep], [0] * len(left) + [1] * (len(c) + 1)) for c in cands])
        return out

    def collate(self, pairs: Sequence[Pair]) -> Tuple[Any, Any, Any]:
        """(input ids, attention mask, token type ids) tensors of ``pairs``, padded to the longest."""
        import torch

        width = max(len(ids) for ids, _ in pairs)
        input_ids = torch.full((len(pairs), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(pairs), width), dtype=torch.long)
        types = torch.zeros((len(pairs), width), dtype=torch.long)
        for row, (ids, type_ids) in enumerate(pairs):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, : len(ids)] = 1
            types[row, : len(ids)] = torch.tensor(type_ids, dtype=torch.long)
        return input_ids, mask, types


__all__ = ["MentionContext", "Pair", "PairEncoder", "candidate_text"]
