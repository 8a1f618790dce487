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
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np
from spacy.tokens import Doc
from tqdm import tqdm

from spacy_sapbert.errors import InputError

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
        self._set_names(joined)
        self._file = gzip.compress(_file_text(joined).encode("utf8"), compresslevel=9, mtime=0)

    def _set_names(self, joined: Mapping[str, Sequence[str]]) -> None:
        self.labels: Tuple[str, ...] = tuple(sorted(joined))
        self._names: Dict[str, np.ndarray] = {}
        self._firsts: Dict[str, np.ndarray] = {}
        self._lengths: Dict[str, np.ndarray] = {}
        for label in self.labels:
            names = joined[label]
            self._names[label] = _keys(names)
            self._firsts[label], self._lengths[label] = _lengths_by_first_word(names)

    def __len__(self) -> int:
        return sum(len(keys) for keys in self._names.values())

    def __getstate__(self) -> Dict[str, bytes]:
        """Only the file: the hashes are this process's (string hashing is salted per process), so a
        copy in another process (a pickled pipeline under ``nlp.pipe(n_process=…)`` with spawn) makes its own."""
        return {"file": self._file}

    def __setstate__(self, state: Dict[str, bytes]) -> None:
        self._file = state["file"]
        self._set_names(label_name_lists(gzip.decompress(self._file).decode("utf8"), FILE_NAME))

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
        found, at = _member(_keys(words, unique=False), self._firsts[label])
        starts = np.flatnonzero(found)
        spans: List[Tuple[int, int]] = []
        # from each start, only the lengths of the names that begin with its word
        for i, mask in zip(starts.tolist(), self._lengths[label][at[starts]].tolist()):
            spans.extend((i, i + n) for n in _lengths_in(mask) if i + n <= len(words))
        if not spans:
            return []
        hits, _ = _member(_keys([" ".join(words[i:end]) for i, end in spans], unique=False), self._names[label])
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
        from spacy_sapbert.util.textfile import read_text

        path = Path(folder) / FILE_NAME
        joined = label_name_lists(read_text(path), path)
        gazetteer = cls.__new__(cls)
        gazetteer._set_names(joined)
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


def _keys(texts: Sequence[str], unique: bool = True) -> np.ndarray:
    """The hashes of ``texts`` as int64, sorted and distinct (``unique``) or in order."""
    keys = np.fromiter(map(hash, texts), dtype=np.int64, count=len(texts))
    return np.unique(keys) if unique else keys


def _lengths_by_first_word(names: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """(the sorted distinct hashes of the names' first words, for each a bit mask of the lengths in words
    of the names that begin with it: bit ``n`` set when one has ``n`` words, :data:`MAX_TOKENS` at most).
    A match from a word is looked for at those lengths only: over NCBI test's 100 abstracts the default's
    gazetteer looked up 201,125 candidate spans (every length up to :data:`MAX_TOKENS` from each word that
    begins a name), 68,419 with the masks: the same matches, the features 0.129 → 0.065 s (BC5CDR dev's 500
    abstracts 0.655 → 0.311 s; 2 cores, one process, alternating), for about 47 ms more when the gazetteer
    loads (its 286,177 names' words counted)."""
    firsts = _keys([name.partition(" ")[0] for name in names], unique=False)
    if not len(firsts):
        return firsts, np.zeros(0, dtype=np.int64)
    table, inverse = np.unique(firsts, return_inverse=True)
    lengths = np.fromiter(map(str.count, names, itertools.repeat(" ")), dtype=np.int64, count=len(names)) + 1
    masks = np.zeros(len(table), dtype=np.int64)
    np.bitwise_or.at(masks, inverse, np.left_shift(1, np.minimum(lengths, MAX_TOKENS)))
    return table, masks


@functools.lru_cache(maxsize=None)
def _lengths_in(mask: int) -> Tuple[int, ...]:
    """The name lengths a bit mask of :func:`_lengths_by_first_word` holds, shortest first."""
    return tuple(n for n in range(1, MAX_TOKENS + 1) if mask >> n & 1)


def _member(keys: np.ndarray, table: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Which of ``keys`` are in the sorted array ``table``, and where in it each is (valid where found)."""
    if not len(table):
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
    at = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return table[at] == keys, at


def label_names_from_text(text: str, path: PathLike) -> Dict[str, Set[str]]:
    """The names per label of a ``LABEL<TAB>tok tok`` file's text (the gazetteer's, the dictionary pipe's
    grow names): split with string methods when each label's lines come in one block, as both writers
    write them, else line by line, a bad line reported with its number."""
    return {label: set(names) for label, names in label_name_lists(text, path).items()}


def label_name_lists(text: str, path: PathLike) -> Dict[str, List[str]]:
    """As :func:`label_names_from_text`, each label's names as a list in file order (repeats kept): the
    gazetteer hashes them and keeps no strings, so it builds no sets."""
    if "\r" in text:  # written on Windows
        text = text.replace("\r\n", "\n")
    joined = _label_blocks(text)
    return joined if joined is not None else _label_lines(text, Path(path))


def _label_blocks(text: str) -> Optional[Dict[str, List[str]]]:
    """Names per label when each label's lines come in one block; None otherwise (or on a bad line)."""
    joined: Dict[str, List[str]] = {}
    position = 0
    while position < len(text):
        tab = text.find("\t", position)
        if tab <= position:
            return None
        label = text[position:tab + 1]
        if "\n" in label or label[:-1] in joined:
            return None
        last = text.rfind("\n" + label)
        end = len(text) if last < position else text.find("\n", last + 1)
        end = len(text) if end < 0 else end + 1
        block = text[position:end]
        lines = block.replace(label, "").split("\n")
        if lines[-1] == "":
            lines.pop()
        if block.count("\t") != len(lines) or block.count("\n" + label) + 1 != len(lines) or "" in lines:
            return None
        joined[label[:-1]] = lines
        position = end
    return joined


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
