"""What may be an entity at all, whatever the model says: rules on characters, not on meaning.

A transformer NER scores word pieces, and a token made of symbols has pieces like any other: on
text with emoji the default tagged "😀" and the first person of "👨‍👩‍👧" (a family joined by
zero-width joiners, one character to a reader) as CHEMICAL. Two rules keep such spans out:

- a span keeps whole *grapheme clusters* (what a reader sees as one character): where the
  tokenizer cut a cluster (a combining accent, a zero-width joiner, a variation selector or a
  skin-tone modifier on the far side of the cut), the span grows over the tokens that finish it;
- a span holds at least one letter or digit: symbols, punctuation and emoji alone are no entity.
"""
from __future__ import annotations

import unicodedata
from typing import Optional, Tuple

from spacy.tokens import Doc

ZERO_WIDTH_JOINER = "\u200d"


def continues_cluster(char: str) -> bool:
    """Whether ``char`` belongs to the grapheme cluster of the character before it."""
    code = ord(char)
    return (unicodedata.category(char) in ("Mn", "Mc", "Me") or char == ZERO_WIDTH_JOINER
            or 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F)


def cuts_cluster(text: str, offset: int) -> bool:
    """Whether a boundary at character ``offset`` of ``text`` falls inside a grapheme cluster."""
    if offset <= 0 or offset >= len(text):
        return False
    return continues_cluster(text[offset]) or text[offset - 1] == ZERO_WIDTH_JOINER


def whole_clusters(doc: Doc, start: int, end: int, text: Optional[str] = None) -> Tuple[int, int]:
    """Token range ``[start, end)`` grown until neither edge cuts a grapheme cluster. ``text`` is
    ``doc.text``, which a caller with many spans of one doc passes once: spaCy joins it from every
    token on each access (per span, that made tagging an abstract quadratic in its length)."""
    if start >= end:  # nothing left after trimming
        return start, end
    text = doc.text if text is None else text
    while start > 0 and cuts_cluster(text, doc[start].idx):
        start -= 1
    while end < len(doc) and cuts_cluster(text, doc[end].idx):
        end += 1
    return start, end


def has_word_character(text: str) -> bool:
    """A letter or a digit somewhere in ``text`` (any script): what every entity name has."""
    return any(unicodedata.category(char)[0] in "LN" for char in text)


__all__ = ["continues_cluster", "cuts_cluster", "has_word_character", "whole_clusters"]
