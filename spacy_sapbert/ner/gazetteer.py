"""KB names as token features for the NER: which tokens start or continue a known chemical or disease name.

A model trained on 1,100 abstracts has never seen most drug names; the knowledge bases the linker
already uses list them. The gazetteer does not decide anything: for each label it tags the
tokens of the longest KB-name match as ``B``/``I`` and the model learns how far to trust that
(a KB name can be a common word: "lead", "cold", "mass"). Names are stored pre-tokenised with the
pipeline's own tokenizer (lower case, tokens joined by a space), so loading does not re-tokenise
135,000 names.

File format (``gazetteer.tsv.gz``): one ``LABEL<TAB>tok tok tok`` per line; no pickle.
"""
from __future__ import annotations

import functools
import gzip
import itertools
import logging
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Sequence, Set, Tuple, Union

import numpy as np
from spacy.tokens import Doc
from tqdm import tqdm

from spacy_sapbert.errors import InputError
from spacy_sapbert.util.hashed_strings import member, string_hashes
from spacy_sapbert.util.textfile import decode_text

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
FILE_NAME = "gazetteer.tsv.gz"
MAX_TOKENS = 12
"""Longer names are left out: they are systematic chemical names that never occur in text as such."""
MIN_CHARS = 3
"""Shorter names ("K", "Ca", "PD") match too much; abbreviations are the abbreviation pipe's job."""


class Gazetteer:
    """Pre-tokenised names per label and the longest-match tagger over a ``Doc``.

    A name is its tokens joined by a space. What a document is matched against is, per label, a
    sorted array of the names' hashes (Python's string hash, computed when the names are read, so
    in this process only) and one of their first tokens' hashes: a token that starts no name is
    ruled out with the rest of the document's tokens in one vectorised lookup, and the candidate
    spans of the others are looked up together. A text that is no name has the 64-bit hash of one
    of the default's names with odds of about 1 in 6·10^13 per lookup. The names themselves are
    kept only as the compressed file (:meth:`to_disk` writes it back, a copy in another process
    reads it again): the default's 286,177 names as one text per label held 16 MB, as one Python
    string per name in sets 64 MB (0.36 s to load), as tuples with every prefix 129 MB (1.8 s).
    """

    def __init__(self, names: Mapping[str, Iterable[Tuple[str, ...]]]) -> None:
        joined = {label: sorted({" ".join(name) for name in entries}) for label, entries in names.items()}
        self._set_names(joined.items())
        self._file = gzip.compress(_file_text(joined).encode("utf8"), compresslevel=9, mtime=0)

    def _set_names(self, pieces: Iterable[Tuple[str, Sequence[str]]]) -> None:
        """The lookup arrays from ``(label, names)`` pieces (a label may come in several; one with no
        names still makes the label one of this object's, though its file, which lists names, will not hold it). The names are hashed piece by piece and
        dropped: the default's 286,177 names read whole into lists for this made a transient of about
        80 MB when the NER first ran; a piece at a time it is the file's text and the arrays."""
        keys: Dict[str, List[np.ndarray]] = {}
        firsts: Dict[str, List[np.ndarray]] = {}
        lengths: Dict[str, List[np.ndarray]] = {}
        for label, names in pieces:
            keys.setdefault(label, []).append(string_hashes(names, unique=False))
            firsts.setdefault(label, []).append(string_hashes([name.partition(" ")[0] for name in names], unique=False))
            lengths.setdefault(label, []).append(
                np.fromiter(map(str.count, names, itertools.repeat(" ")), dtype=np.int64, count=len(names)) + 1)
        self.labels: Tuple[str, ...] = tuple(sorted(keys))
        self._names: Dict[str, np.ndarray] = {}
        self._firsts: Dict[str, np.ndarray] = {}
        self._lengths: Dict[str, np.ndarray] = {}
        for label in self.labels:
            self._names[label] = np.unique(np.concatenate(keys.pop(label)))
            self._firsts[label], self._lengths[label] = _lengths_by_first_word(
                np.concatenate(firsts.pop(label)), np.concatenate(lengths.pop(label)))

    def _read(self, raw: bytes, path: PathLike) -> None:
        """:meth:`_set_names` from a file's bytes: each label's block a piece at a time, each piece
        decoded alone (the default's file is 10.4 MB, and its few Greek letters made the whole text two
        bytes a character), as :func:`label_name_lists` reads it; a file of another layout, or with a
        byte-order mark, a carriage return or a byte that is not UTF-8, is read whole (its errors name the line)."""
        try:
            if not raw or raw.isspace() or raw[:3] == b"\xef\xbb\xbf" or b"\r" in raw:
                raise _NotInBlocks
            self._set_names(_block_pieces(raw))
        except _NotInBlocks:
            self._set_names(label_name_lists(decode_text(raw, path), path).items())

    def __len__(self) -> int:
        return sum(len(keys) for keys in self._names.values())

    def __getstate__(self) -> Dict[str, bytes]:
        """Only the file: the hashes are this process's (string hashing is salted per process), so a
        copy in another process (a pickled pipeline under ``nlp.pipe(n_process=…)`` with spawn) makes its own."""
        return {"file": self._file}

    def __setstate__(self, state: Dict[str, bytes]) -> None:
        self._file = state["file"]
        raw = gzip.decompress(self._file)
        if raw:
            self._read(raw, FILE_NAME)
        else:  # an empty gazetteer's file (a file read from disk is never empty: read_text says so)
            self._set_names(())

    @property
    def n_features(self) -> int:
        """Size of the feature vocabulary: 3 states (O, B, I) per label, combined."""
        return 3 ** len(self.labels)

    def features(self, doc: Doc) -> List[int]:
        """One feature id per token: ``sum(state_L * 3**k)`` over labels ``L`` (state 0 = O, 1 = B, 2 = I)."""
        words = [token.lower_ for token in doc]
        out = [0] * len(words)
        for k, label in enumerate(self.labels):
            weight = 3 ** k
            for start, end in self._longest_matches(words, label):
                out[start] += weight
                for i in range(start + 1, end):
                    out[i] += 2 * weight
        return out

    def _longest_matches(self, words: Sequence[str], label: str) -> List[Tuple[int, int]]:
        """Left to right, the longest name starting at each token not inside an earlier match."""
        found, at = member(string_hashes(words, unique=False), self._firsts[label])
        starts = np.flatnonzero(found)
        spans: List[Tuple[int, int]] = []
        # from each start, only the lengths of the names that begin with its word
        for i, mask in zip(starts.tolist(), self._lengths[label][at[starts]].tolist()):
            spans.extend((i, i + n) for n in _lengths_in(mask) if i + n <= len(words))
        if not spans:
            return []
        hits, _ = member(string_hashes([" ".join(words[i:end]) for i, end in spans], unique=False), self._names[label])
        longest: Dict[int, int] = {}
        for (i, end), hit in zip(spans, hits.tolist()):
            if hit:
                longest[i] = end  # ends grow: the last hit is the longest
        found, covered = [], 0
        for i in sorted(longest):
            if i >= covered:
                found.append((i, longest[i]))
                covered = longest[i]
        return found

    def to_disk(self, folder: PathLike) -> Path:
        """Write ``gazetteer.tsv.gz``: the file it was read from, byte for byte, or the names it was
        made from, sorted, each label's lines in one block."""
        path = Path(folder) / FILE_NAME
        path.write_bytes(self._file)
        return path

    @classmethod
    def from_disk(cls, folder: PathLike) -> "Gazetteer":
        """Read ``gazetteer.tsv.gz``: the lines of each label as one block, split with string methods
        (as :meth:`to_disk` writes them), or else line by line, a bad line reported with its number."""
        from spacy_sapbert.util.textfile import read_bytes

        path = Path(folder) / FILE_NAME
        gazetteer = cls.__new__(cls)
        gazetteer._read(read_bytes(path), path)
        gazetteer._file = path.read_bytes()
        return gazetteer

    @classmethod
    def from_names(cls, names: Iterable[Tuple[str, str]], tokenize: Callable[[str], Doc]) -> "Gazetteer":
        """From ``(label, name)`` pairs, each name cut by ``tokenize`` (the pipeline's tokenizer)."""
        table: Dict[str, Set[Tuple[str, ...]]] = {}
        kept = dropped = 0
        for label, name in tqdm(list(names), desc="gazetteer", unit="name", mininterval=2):
            words = tuple(t.lower_ for t in tokenize(name) if not t.is_space)
            if len(name.strip()) < MIN_CHARS or not words or len(words) > MAX_TOKENS or \
                    all(w.isdigit() for w in words):
                dropped += 1
                continue
            table.setdefault(label, set()).add(words)
            kept += 1
        logger.info("gazetteer: %d names kept, %d dropped (shorter than %d characters, longer than %d tokens "
                    "or numbers)", kept, dropped, MIN_CHARS, MAX_TOKENS)
        return cls(table)


def _file_text(joined: Mapping[str, Sequence[str]]) -> str:
    """``LABEL<TAB>name`` lines, labels in order, each label's names in the order given."""
    return "".join(f"{label}\t" + f"\n{label}\t".join(joined[label]) + "\n" for label in sorted(joined) if joined[label])


def _lengths_by_first_word(firsts: np.ndarray, lengths: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(the sorted distinct hashes of the names' first words, for each a bit mask of the lengths in words
    of the names that begin with it: bit ``n`` set when one has ``n`` words, :data:`MAX_TOKENS` at most),
    from each name's first word's hash and its length in words.
    A match from a word is looked for at those lengths only: over NCBI test's 100 abstracts the default's
    gazetteer looked up 201,125 candidate spans (every length up to :data:`MAX_TOKENS` from each word that
    begins a name), 68,419 with the masks: the same matches, the features 0.129 → 0.065 s (BC5CDR dev's 500
    abstracts 0.655 → 0.311 s; 2 cores, one process, alternating), for about 47 ms more when the gazetteer
    loads (its 286,177 names' words counted)."""
    if not len(firsts):
        return firsts, np.zeros(0, dtype=np.int64)
    table, inverse = np.unique(firsts, return_inverse=True)
    masks = np.zeros(len(table), dtype=np.int64)
    np.bitwise_or.at(masks, inverse, np.left_shift(1, np.minimum(lengths, MAX_TOKENS)))
    return table, masks


@functools.lru_cache(maxsize=None)
def _lengths_in(mask: int) -> Tuple[int, ...]:
    """The name lengths a bit mask of :func:`_lengths_by_first_word` holds, shortest first."""
    return tuple(n for n in range(1, MAX_TOKENS + 1) if mask >> n & 1)


def label_name_lists(text: str, path: PathLike) -> Dict[str, List[str]]:
    """The names per label of a ``LABEL<TAB>tok tok`` file's text (the gazetteer's, the dictionary pipe's grow
    names), each label's as a list in file order (repeats kept): split with string methods when each label's
    lines come in one block, as both writers write them, else line by line, a bad line reported with its
    number."""
    if "\r" in text:  # written on Windows
        text = text.replace("\r\n", "\n")
    try:
        joined: Dict[str, List[str]] = {}
        for label, names in _block_pieces(text):
            joined.setdefault(label, []).extend(names)
        return joined
    except _NotInBlocks:
        return _label_lines(text, Path(path))


PIECE_CHARS = 1 << 18
"""A label's block of lines is split into pieces of about this many characters (bytes, when the file's bytes are
read), each of whole lines."""


class _NotInBlocks(Exception):
    """The text is not one block of lines per label (or has a bad line): it is read line by line."""


def _block_pieces(text: Union[str, bytes]) -> Iterator[Tuple[str, List[str]]]:
    """(label, names) for pieces of each label's block of lines, in file order; :class:`_NotInBlocks` (perhaps
    after some pieces) when a label's lines do not come in one block, a line is not ``LABEL<TAB>name`` or
    (``text`` as bytes, each piece decoded alone) a piece is not UTF-8."""
    newline, tab = ("\n", "\t") if isinstance(text, str) else (b"\n", b"\t")
    seen: Set[Union[str, bytes]] = set()
    position = 0
    while position < len(text):
        tab_at = text.find(tab, position)
        if tab_at <= position:
            raise _NotInBlocks
        label = text[position:tab_at + 1]
        if newline in label or label in seen:
            raise _NotInBlocks
        seen.add(label)
        last = text.rfind(newline + label)
        end = len(text) if last < position else text.find(newline, last + 1)
        end = len(text) if end < 0 else end + 1
        label_text = _as_text(label)
        while position < end:
            cut = text.find(newline, min(position + PIECE_CHARS, end - 1))
            cut = end if cut < 0 or cut + 1 > end else cut + 1
            piece = _as_text(text[position:cut])
            lines = piece.replace(label_text, "").split("\n")
            if lines[-1] == "":
                lines.pop()
            if not piece.startswith(label_text) or piece.count("\t") != len(lines) or \
                    piece.count("\n" + label_text) + 1 != len(lines) or "" in lines:
                raise _NotInBlocks
            yield label_text[:-1], lines
            position = cut


def _as_text(part: Union[str, bytes]) -> str:
    if isinstance(part, str):
        return part
    try:
        return part.decode("utf-8")
    except UnicodeDecodeError:
        raise _NotInBlocks from None


def _label_lines(text: str, path: Path) -> Dict[str, List[str]]:
    joined: Dict[str, List[str]] = {}
    for line_no, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        label, sep, name = line.partition("\t")
        if not sep or not label or not name or "\t" in name:
            raise InputError("expected LABEL<TAB>name tokens", path, line=line_no)
        joined.setdefault(label, []).append(name)
    return joined


def kb_label_names(concepts: Iterable, label_to_types: Mapping[str, Sequence[str]]) -> Iterable[Tuple[str, str]]:
    """``(label, name)`` for every name of every concept whose types map to a label."""
    type_to_labels: Dict[str, List[str]] = {}
    for label, types in label_to_types.items():
        for type_name in types:
            type_to_labels.setdefault(type_name, []).append(label)
    for concept in concepts:
        labels = {label for t in concept.types for label in type_to_labels.get(t, [])}
        for label in sorted(labels):
            for name in [concept.canonical_name, *concept.aliases]:
                yield label, name
