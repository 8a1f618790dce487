"""Names the dense index does not hold, matched exactly: a vocabulary too large to encode, as a last stage.

MeSH has some 323,000 supplementary concept records (SCRs), nearly all of them chemicals; the embedded default's KB
holds the 28,284 that gilda maps to other vocabularies, since indexing every name of the rest would add some 80 MB
to a pipeline of 93 (560,153 names, at the 145 bytes a name the default's index takes on disk: 26.1 MB for its 180,068). The rest still name substances BC5CDR annotates ("loreclezole", "cibenzoline",
"A-86929"), and the dense search, which cannot find them, links such a span to nothing or to a wrong neighbour below
the threshold. So a span that has no concept at its threshold after every other stage takes the concept of this
table whose name its query is, exactly in the KB's normalised form (:func:`~spacy_sapbert.kb.normalize.normalize`),
when that concept has one of the span's types; it is scored with the table's ``score``.

The table (``exact_names.tsv.xz``, :func:`write_exact_names`; ``sapbert kb exact-names`` builds it) holds only what
the KB lacks: concepts the KB does not resolve, names the KB does not have, names of at least ``min_chars``
characters, and no name of two concepts (such a name would decide nothing); xz, since it is a third smaller than
gzip here and reads in a third of a second. A ``#`` line of JSON (format, score,
counts, source) comes first, then one line per concept: ``ID<TAB>types (,)<TAB>canonical name<TAB>names (|)``, the
names already normalised. It loads on first use into sorted 64-bit hashes of the names (two queries in 10^13 could
meet a table name's hash by chance) and compressed blocks of the concepts' records: about 20 bytes a name rather than a
dictionary of strings.
"""
from __future__ import annotations

import hashlib
import json
import logging
import lzma
import shutil
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.linking.linker import Candidates
from spacy_sapbert.linking.type_filter import TypeSet

PathLike = Union[str, Path]
FILE_NAME = "exact_names.tsv.xz"
FORMAT = "sapbert-exact-names"
VERSION = 1
BLOCK = 256
"""Concepts per compressed block of records in memory."""
logger = logging.getLogger(__name__)

Row = Tuple[str, Tuple[str, ...], str, List[str]]
"""(concept ID, types, canonical name, normalised names): one line of the table."""


def name_hash(normal_form: str) -> int:
    """A normalised name's 64-bit key (stable across processes, unlike ``hash``): its BLAKE2b digest, little-endian."""
    return int.from_bytes(hashlib.blake2b(normal_form.encode("utf-8"), digest_size=8).digest(), "little")


def table_rows(records: Iterable[Tuple[str, str, Sequence[str], Sequence[str]]], kb: Any, min_chars: int = 4
               ) -> Tuple[List[Row], Dict[str, int]]:
    """The table's rows from ``records`` (ID, name, synonyms, the KB IDs whose types it takes), and counts of
    what was left out: records the KB resolves (the dense search has them), records none of whose KB IDs has a
    type, names shorter than ``min_chars`` or that are KB names, names of two or more records."""
    known = kb.alias_to_concepts
    counts: Counter = Counter()
    kept: List[Tuple[str, Tuple[str, ...], str, List[str]]] = []
    owners: Dict[str, set] = defaultdict(set)
    for concept_id, name, synonyms, typed_by in records:
        counts["records"] += 1
        if kb.resolve(concept_id) is not None:
            counts["in the KB already"] += 1
            continue
        types = sorted({t for other in typed_by for t in (kb.types_of(kb.resolve_id(other) or "") or ())})
        if not types:
            counts["no KB type"] += 1
            continue
        names = []
        for raw in [name, *synonyms]:
            form = normalize(raw)
            if len(form) < min_chars:
                counts["names too short"] += bool(form)
            elif form in known:
                counts["names the KB has"] += 1
            elif form not in names:
                names.append(form)
        for form in names:
            owners[form].add(concept_id)
        kept.append((concept_id, tuple(types), name.strip(), names))
    rows = []
    for concept_id, types, canonical, names in kept:
        unique = [form for form in names if len(owners[form]) == 1]
        counts["names of two or more records"] += len(names) - len(unique)
        if unique:
            rows.append((concept_id, types, canonical, unique))
        else:
            counts["no name left"] += 1
    counts["concepts"] = len(rows)
    counts["names"] = sum(len(row[3]) for row in rows)
    return rows, dict(counts)


def write_exact_names(path: PathLike, rows: Sequence[Row], score: float, source: str) -> Path:
    """Write the table file (module docstring); ``score`` is what a match scores, ``source`` where the rows came from."""
    from spacy_sapbert.util.atomic import atomic_open

    if not 0 < score <= 1:
        raise InputError(f"must be above 0 and at most 1, got {score}", field="score")
    header = {"format": FORMAT, "version": VERSION, "score": score, "concepts": len(rows),
              "names": sum(len(r[3]) for r in rows), "source": source}
    lines = ["# " + json.dumps(header, ensure_ascii=False) + "\n"]
    lines += [f"{concept_id}\t{','.join(types)}\t{canonical}\t{'|'.join(names)}\n"
              for concept_id, types, canonical, names in rows]
    with atomic_open(path, "wb") as raw:  # xz writes no time: the same rows give the same bytes
        raw.write(lzma.compress("".join(lines).encode("utf-8"), preset=9))
    return Path(path)


class ExactNames:
    """The table of one file, loaded on first use; :meth:`apply` is the pipe's last stage."""

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError("exact-names file not found", self.path, field="exact_names")
        self.header = self._read_header()
        self.score = float(self.header["score"])
        self._hashes: Optional[np.ndarray] = None
        self._rows: Optional[np.ndarray] = None
        self._blocks: List[bytes] = []
        self._found: Dict[str, Concept] = {}

    def _read_header(self) -> Dict[str, Any]:
        try:
            with lzma.open(self.path, "rt", encoding="utf-8") as fh:
                first = fh.readline()
            header = json.loads(first[2:]) if first.startswith("# ") else None
        except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InputError(f"not an exact-names file ({err})", self.path, 1) from err
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise InputError(f"not an exact-names file (no '# {{\"format\": \"{FORMAT}\", …}}' first line)", self.path, 1)
        if header.get("version") != VERSION:
            raise InputError(f"format version {header.get('version')!r}; this version reads {VERSION}", self.path, 1,
                             field="version")
        score = header.get("score")
        if not isinstance(score, (int, float)) or not 0 < score <= 1:
            raise InputError(f"score must be above 0 and at most 1, got {score!r}", self.path, 1, field="score")
        return header

    def __len__(self) -> int:
        return int(self.header.get("concepts", 0))

    def _load(self) -> None:
        """Read the names into sorted hashes, in arrays the size the first line counts (no Python object per name
        is kept, nor made and freed: freed small objects stay in the process's heap), and each concept's ID, types
        and canonical name into zlib-compressed blocks of :data:`BLOCK` concepts, one of which a match decompresses
        (50 µs): 7.3 MB for the default's table where plain bytes took 14.5."""
        n_names, n_concepts = int(self.header.get("names", -1)), len(self)
        keys = np.empty(max(n_names, 0), dtype=np.uint64)
        owners = np.empty(max(n_names, 0), dtype=np.int32)
        blocks: List[bytes] = []
        block: List[str] = []
        names = row = 0
        with lzma.open(self.path, "rt", encoding="utf-8") as fh:
            next(fh)
            for line_no, line in enumerate(fh, start=2):
                cols = line.rstrip("\n").split("\t")
                forms = cols[3].split("|") if len(cols) == 4 else []
                if not cols[0] or not forms or row >= n_concepts or names + len(forms) > n_names:
                    raise InputError("expected ID, types, canonical name and names, tab-separated, as many as the "
                                     "first line counts", self.path, line_no)
                block.append("\t".join(cols[:3]))
                if len(block) == BLOCK:
                    blocks.append(zlib.compress("\n".join(block).encode("utf-8")))
                    block = []
                for form in forms:
                    keys[names], owners[names] = name_hash(form), row
                    names += 1
                row += 1
        if row != n_concepts or names != n_names:
            raise InputError(f"{row} concepts and {names} names, where the first line counts {n_concepts} and "
                             f"{n_names}", self.path, 1, field="concepts")
        if block:
            blocks.append(zlib.compress("\n".join(block).encode("utf-8")))
        order = np.argsort(keys, kind="stable")
        self._hashes, self._rows, self._blocks = keys[order], owners[order], blocks
        logger.info("%s: %d exact names of %d concepts", self.path, names, row)

    def lookup(self, text: str) -> Optional[Concept]:
        """The concept one of whose names ``text`` is (normalised), or None."""
        if self._hashes is None:
            self._load()
        form = normalize(text)
        if not form:
            return None
        key = np.uint64(name_hash(form))
        at = int(np.searchsorted(self._hashes, key))
        if at >= len(self._hashes) or self._hashes[at] != key:
            return None
        row = int(self._rows[at])
        record = zlib.decompress(self._blocks[row // BLOCK]).decode("utf-8").split("\n")[row % BLOCK]
        concept_id, types, canonical = record.split("\t")
        return Concept(concept_id, canonical, [], [t for t in types.split(",") if t])

    def apply(self, texts: Sequence[str], types: Optional[Sequence[Optional[TypeSet]]], results: List[Candidates],
              thresholds: Sequence[Optional[float]]) -> List[Candidates]:
        """``results`` with each mention that has no concept, and whose threshold the table's score reaches, given
        the concept its query names, if that has one of the mention's types."""
        out = list(results)
        for i, (text, found) in enumerate(zip(texts, results)):
            if found or (thresholds[i] is not None and self.score < thresholds[i]):
                continue
            concept = self.lookup(text)
            allowed = types[i] if types is not None else None
            if concept is not None and (allowed is None or not allowed.isdisjoint(concept.types)):
                self._found[concept.concept_id] = concept
                out[i] = [(concept.concept_id, self.score)]
        return out

    def concept(self, concept_id: str) -> Optional[Concept]:
        """A concept this table gave a span (its canonical name and types), or None."""
        return self._found.get(concept_id)

    def to_disk(self, path: PathLike) -> None:
        """Save the table's file as it is."""
        if Path(path).resolve() != self.path.resolve():
            shutil.copyfile(self.path, path)


__all__ = ["ExactNames", "FILE_NAME", "name_hash", "table_rows", "write_exact_names"]
