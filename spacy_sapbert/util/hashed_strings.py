"""Sets of many short strings asked only "is this text one of them?": kept as their sorted 64-bit hashes.

The NER's gazetteer (286,177 names), the names entities grow to (38,970) and the wordings the dictionary
pipe removes (12,053 when this was measured) are looked up, never listed, while the pipeline runs. As Python strings in sets the
last two held 7.3 MB of the loaded default; as sorted ``int64`` hashes beside one text they hold about
1.5 MB. A text that is not in the set has the hash of one of ``n`` members with odds of about ``n / 2**64``
per lookup (1 in 5·10^14 for the grow names). Hashes are Python's string hashes, salted per process:
a copy for another process is made again from the strings (:class:`HashedStrings` pickles its text).
"""
from __future__ import annotations

from typing import Dict, Iterable, Iterator, Sequence, Tuple

import numpy as np


def string_hashes(texts: Sequence[str], unique: bool = True) -> np.ndarray:
    """The hashes of ``texts`` as int64, sorted and distinct (``unique``) or in order."""
    keys = np.fromiter(map(hash, texts), dtype=np.int64, count=len(texts))
    return np.unique(keys) if unique else keys


def member(keys: np.ndarray, table: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Which of ``keys`` are in the sorted array ``table``, and where in it each is (valid where found)."""
    if not len(table):
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
    at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return table[at] == keys, at


class HashedStrings:
    """A set of strings without line breaks: membership through their hashes, the strings themselves
    kept in the order first given as one newline-joined text (what iterating and pickling give back)."""

    __slots__ = ("_text", "_hashes")

    def __init__(self, strings: Iterable[str] = ()) -> None:
        distinct = dict.fromkeys(strings)
        text = "\n".join(distinct)
        if "" in distinct or text.count("\n") != max(len(distinct) - 1, 0):
            raise ValueError("an empty string or one with a line break cannot be kept in HashedStrings")
        self._set(text, list(distinct))

    def _set(self, text: str, strings: Sequence[str]) -> None:
        self._text = text
        self._hashes = string_hashes(strings)

    def __contains__(self, text: object) -> bool:
        # one text: a scalar search (member() of one key costs three times as much, and growth asks often)
        if not isinstance(text, str) or not len(self._hashes):
            return False
        at = int(np.searchsorted(self._hashes, hash(text)))
        return at < len(self._hashes) and int(self._hashes[at]) == hash(text)

    def __len__(self) -> int:
        return len(self._hashes)

    def __iter__(self) -> Iterator[str]:
        """The strings, in the order first given."""
        return iter(self._text.split("\n") if self._text else ())

    def union(self, strings: Iterable[str]) -> "HashedStrings":
        """A new set of these strings and ``strings`` (made whole again: add many at once, not one by one)."""
        return HashedStrings([*self, *strings])

    def __getstate__(self) -> Dict[str, str]:
        return {"text": self._text}

    def __setstate__(self, state: Dict[str, str]) -> None:
        text = state["text"]
        self._set(text, text.split("\n") if text else [])

    def __repr__(self) -> str:
        return f"HashedStrings({len(self)} strings)"


__all__ = ["HashedStrings", "member", "string_hashes"]
