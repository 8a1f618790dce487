"""The rows of a :class:`~spacy_sapbert.index.name_index.NameIndex` as three compact tables: the
distinct normalised names, the distinct concept IDs, and per FAISS row the pair (name number,
concept number), which is what an index folder stores (``names.json.gz``, ``concepts.json.gz``,
``rows.npy``; :mod:`spacy_sapbert.index.files`).

Apart from the index because they are plain bookkeeping over a KB's (name, concept) pairs,
with neither FAISS nor an encoder: a name shared by several concepts is one name (encoded once)
and one row per concept.
"""
from __future__ import annotations

from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.index.packed_strings import ListLike
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.util.hashed_strings import string_hashes

Tables = Tuple[List[str], List[str], np.ndarray]
"""(distinct names, distinct concept IDs, rows): row ``i`` is (name number, concept number)."""


def kb_tables(kb: KnowledgeBase) -> Tables:
    """The rows to index: every (normalised name, concept) pair of ``kb``, names and concepts numbered."""
    pairs = [(name, cid) for name, cid in kb.name_concept_pairs() if name]
    if not pairs:
        raise InputError(f"knowledge base {kb.name!r} has no names to index ({len(kb)} concepts; every name is "
                         "empty after normalisation)" if len(kb) else
                         f"knowledge base {kb.name!r} is empty: no concepts, no names to index")
    return tables_of([name for name, _ in pairs], [cid for _, cid in pairs])


def tables_of(names: List[str], concept_ids: List[str]) -> Tables:
    """The tables of rows whose name and concept are ``names[i]`` and ``concept_ids[i]``."""
    unique_names = list(dict.fromkeys(names))
    concepts = list(dict.fromkeys(concept_ids))
    name_number = {n: i for i, n in enumerate(unique_names)}
    concept_number = {c: i for i, c in enumerate(concepts)}
    rows = np.array([(name_number[n], concept_number[c]) for n, c in zip(names, concept_ids)],
                    dtype=np.int32).reshape(-1, 2)
    return unique_names, concepts, rows


class RowValues(ListLike):
    """Each row's name (or concept ID), read through its number in the table of distinct values: what a list
    with an entry per row holds, without one (two such lists of the default's 180,068 rows: 2.9 MB, 0.03 s of
    its load)."""

    __slots__ = ("_values", "_numbers")

    def __init__(self, values: Sequence[str], numbers: np.ndarray) -> None:
        self._values, self._numbers = values, numbers

    def __len__(self) -> int:
        return len(self._numbers)

    def __getitem__(self, row):  # type: ignore[override]
        if isinstance(row, slice):
            return [self._values[n] for n in self._numbers[row].tolist()]
        return self._values[self._numbers[row]]

    def __iter__(self) -> Iterator[str]:
        return map(self._values.__getitem__, self._numbers.tolist())

    def __repr__(self) -> str:
        return f"RowValues({len(self)} rows, {len(self._values)} distinct)"


class NameRows:
    """The rows of each distinct name, looked up by the name's text.

    A dict of 180,068 names to arrays of rows took 28 MB (one small array object per name); this
    keeps the names' string hashes sorted beside their numbers and the rows grouped by name, about
    3 MB. Hashes are this process's (string hashing is salted per process), so a copy sent to
    another process is rebuilt from the names there (:meth:`__reduce__`). A text is checked against
    the name its hash points to, so a hash collision never makes a text a name.
    """

    def __init__(self, names: Sequence[str], name_of_row: np.ndarray) -> None:
        """``names``: the distinct names; ``name_of_row``: each row's name number (the tables' ``rows[:, 0]``)."""
        self._names = names
        self._name_numbers = name_of_row
        hashes = string_hashes(names, unique=False)
        self._by_hash = np.argsort(hashes, kind="stable")
        self._hashes = hashes[self._by_hash]
        self._row_order = np.argsort(self._name_numbers, kind="stable")
        self._starts = np.searchsorted(self._name_numbers[self._row_order], np.arange(len(names) + 1))

    def __reduce__(self) -> Tuple[type, Tuple[Sequence[str], np.ndarray]]:
        return NameRows, (self._names, self._name_numbers)

    def numbers(self, texts: Sequence[str]) -> List[Optional[int]]:
        """Per text, the number of the name it is (``None``: no name)."""
        if not len(self._hashes):
            return [None] * len(texts)
        keys = string_hashes(texts, unique=False)
        at = np.searchsorted(self._hashes, keys).tolist()
        found: List[Optional[int]] = []
        for text, key, i in zip(texts, keys.tolist(), at):
            number = None
            while i < len(self._hashes) and self._hashes[i] == key:
                candidate = int(self._by_hash[i])
                if self._names[candidate] == text:
                    number = candidate
                    break
                i += 1
            found.append(number)
        return found

    def rows(self, texts: Sequence[str]) -> List[Optional[np.ndarray]]:
        """Per text, the rows of the name it is, in row order (``None``: no name)."""
        return [None if n is None else self._row_order[self._starts[n]:self._starts[n + 1]]
                for n in self.numbers(texts)]


__all__ = ["NameRows", "Tables", "kb_tables", "tables_of"]
