"""A KB file's concepts kept as the file's bytes, each record parsed when it is asked for.

A pipeline's own KB file (written by :func:`~spacy_sapbert.kb.files.write_jsonl`, its sha256 recorded
beside it) is read on every load, and a linker asks little of it: the types of each concept once
(the row filters of its span labels) and a few thousand records (its annotated names). Parsing all
45,125 records of the embedded default into :class:`~spacy_sapbert.kb.concept.Concept` objects took
0.18-0.28 s of its load and 33 MB of Python objects, and a pass of Python's garbage collector walks
them all. Here they are the decompressed JSONL (9.8 MB) with where each line starts; the IDs and the
types are read out of the bytes by two regular expressions over all of them, which :func:`parse`
refuses (None: parse the file as any other) unless every line is as ``write_jsonl`` writes it.
"""
from __future__ import annotations

import re
from typing import Dict, FrozenSet, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import orjson

from spacy_sapbert.kb.concept import Concept

# json.dumps(concept.to_dict(), ensure_ascii=False) puts these fields first and in this order; an ID with a
# quote, a backslash or a control character (JSON-escaped) does not match, and the file is parsed whole.
# Inside a JSON string a quote is escaped: neither pattern can match inside a string value.
_LINE = re.compile(rb'\{"concept_id": "([^"\\\x00-\x1f]+)", "canonical_name": ')
_TYPES = re.compile(rb', "types": (\[[^\]\n]*\]), "definition": ')


class StoredConcepts(Mapping[str, Concept]):
    """Concept ID → :class:`Concept`, read from the record's line on each lookup (not kept: a pass over
    all of them, as an index build makes, leaves no copy behind). :meth:`types_of` answers from a table
    of the types made once, without parsing a record."""

    def __init__(self, text: bytes, ids: List[str], starts: np.ndarray) -> None:
        self._text = text
        self._row: Dict[str, int] = dict(zip(ids, range(len(ids))))
        self._starts = starts  # len(ids) + 1 offsets: line i is text[starts[i]:starts[i + 1] - 1]
        self._types: Optional[List[Tuple[str, ...]]] = None

    @classmethod
    def parse(cls, text: bytes) -> Optional["StoredConcepts"]:
        """The records of ``text``, a whole KB file as :func:`write_jsonl` writes it (one object per line,
        each ending in a newline, no ID twice); None when some line is not so."""
        if not text.endswith(b"\n"):
            return None
        matches = list(_LINE.finditer(text))
        starts = np.fromiter((m.start() for m in matches), dtype=np.int64, count=len(matches))
        ends = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == 10) + 1
        if not np.array_equal(starts, np.concatenate(([0], ends[:-1]))):
            return None  # not one record at the start of each line and nothing else
        ids = [m.group(1).decode("utf-8") for m in matches]
        stored = cls(text, ids, np.append(starts, len(text)))
        return stored if len(stored._row) == len(ids) else None

    def _concept(self, row: int) -> Concept:
        record = orjson.loads(self._text[int(self._starts[row]):int(self._starts[row + 1]) - 1])
        return Concept(record["concept_id"], record["canonical_name"], record["aliases"], record["types"],
                       record["definition"])

    def __getitem__(self, concept_id: str) -> Concept:
        return self._concept(self._row[concept_id])

    def get(self, concept_id: str, default: Optional[Concept] = None) -> Optional[Concept]:  # type: ignore[override]
        row = self._row.get(concept_id)  # a miss raises no exception (Mapping.get catches a KeyError)
        return default if row is None else self._concept(row)

    def __contains__(self, concept_id: object) -> bool:
        return concept_id in self._row

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)

    def types_of(self, concept_id: str) -> Optional[Tuple[str, ...]]:
        """The types of the concept with this ``concept_id`` (None: no such concept)."""
        row = self._row.get(concept_id)
        return None if row is None else self._type_table()[row]

    def all_types(self) -> FrozenSet[str]:
        return frozenset(t for types in set(self._type_table()) for t in types)

    def _type_table(self) -> List[Tuple[str, ...]]:
        if self._types is None:
            found = _TYPES.findall(self._text)
            if len(found) == len(self):  # one per line (a second would have to be inside a string: impossible)
                distinct = {raw: tuple(orjson.loads(raw)) for raw in set(found)}
                self._types = [distinct[raw] for raw in found]  # one tuple per distinct list, shared
            else:  # a line with its types elsewhere: read them record by record
                self._types = [tuple(self._concept(row).types) for row in range(len(self))]
        return self._types


__all__ = ["StoredConcepts"]
