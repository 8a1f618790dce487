"""A saved index's distinct names kept as the bytes of their JSON file, not as Python strings.

The embedded default's 178,361 names as a list of ``str`` took 17 MB of the loaded pipeline; the same
names as one UTF-8 buffer and the offsets of each are about 6 MB. A name is decoded when it is read,
which happens to a few thousand names per corpus (the candidates re-scored, the names a mention
equals). The index writes its tables with ``json.dumps(…, ensure_ascii=False)``: a name holding no
character JSON escapes lies between two quotes, names are separated by ``", "``, and the offsets are
where the quotes are. A file with a backslash anywhere (an escaped quote, a control character), or
written with other separators, is read with ``json.loads`` instead. The packed reading checks less than
``json.loads`` would (a raw control character passes; a byte that is not UTF-8 fails when its name is read),
which the index's own writer never produces.
"""
from __future__ import annotations

import json
from typing import Iterator, List, Sequence, Union

import numpy as np

QUOTE, COMMA, SPACE = ord('"'), ord(","), ord(" ")


class ListLike(Sequence[str]):
    """A read-only sequence of strings kept some compact way, equal to a list or tuple (or another one) of the
    same strings, as the lists it stands in for were; unhashable, as they were."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ListLike)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class PackedStrings(ListLike):
    """Strings in one UTF-8 buffer: string ``i`` is ``data[starts[i]:ends[i]]``."""

    __slots__ = ("_data", "_starts", "_ends")

    def __init__(self, data: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self._data, self._starts, self._ends = data, starts, ends

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._data[self._starts[i]:self._ends[i]].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        data = self._data
        for start, end in zip(self._starts.tolist(), self._ends.tolist()):
            yield data[start:end].decode("utf-8")

    def __repr__(self) -> str:
        return f"PackedStrings({len(self)} strings, {len(self._data)} bytes)"


def json_string_list(raw: bytes) -> Union[PackedStrings, List[str]]:
    """The JSON array of strings ``raw`` (UTF-8): packed when it is written as the index writes it
    (module docstring), else whatever ``json.loads`` makes of it."""
    packed = _packed(raw)
    return packed if packed is not None else json.loads(raw.decode("utf-8"))


def _packed(raw: bytes) -> Union[PackedStrings, None]:
    text = raw.strip()
    if text == b"[]":
        return PackedStrings(b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(text) < 4 or text[:2] != b'["' or text[-2:] != b'"]' or b"\\" in text:
        return None
    quotes = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == QUOTE)
    opens, closes = quotes[0::2], quotes[1::2]
    if len(opens) != len(closes):
        return None
    between = closes[:-1]  # each closing quote but the last is followed by ", " and the next opening quote
    view = np.frombuffer(text, dtype=np.uint8)
    if len(between) and not ((opens[1:] - between == 3).all() and (view[between + 1] == COMMA).all()
                             and (view[between + 2] == SPACE).all()):
        return None
    dtype = np.int32 if len(text) < 2 ** 31 else np.int64
    return PackedStrings(text, (opens + 1).astype(dtype), closes.astype(dtype))


def as_list(strings: Sequence[str]) -> List[str]:
    """``strings`` as a list (what ``json.dumps`` writes)."""
    return strings if isinstance(strings, list) else list(strings)


__all__ = ["ListLike", "PackedStrings", "as_list", "json_string_list"]
