"""The one text normalisation shared by training, indexing and queries.

It follows BioSyn's preprocessing (which SapBERT's evaluation used): lower-case,
punctuation replaced by spaces, whitespace collapsed. It is Unicode-aware so that
non-Latin scripts survive and control characters never reach the tokenizer.
"""
from __future__ import annotations

import string
import unicodedata
from functools import lru_cache

_ASCII_PUNCT = set(string.punctuation)


def _is_separator(char: str) -> bool:
    if char in _ASCII_PUNCT:
        return True
    category = unicodedata.category(char)
    # P*: punctuation; Cc/Cf: control and format characters (zero-width joiners, BOM ...);
    # Z*: any kind of space.
    return category[0] in ("P", "Z") or category in ("Cc", "Cf")


@lru_cache(maxsize=200_000)
def normalize(text: str) -> str:
    """Lower-case, NFKC-fold, replace punctuation and control characters by spaces, collapse spaces.

    Returns "" for text with nothing left (whitespace or punctuation only); callers treat
    an empty normal form as "no name".
    """
    text = unicodedata.normalize("NFKC", text).lower()
    cleaned = "".join(" " if _is_separator(ch) else ch for ch in text)
    return " ".join(cleaned.split())
