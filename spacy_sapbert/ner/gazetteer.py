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

import gzip
import logging
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Sequence, Set, Tuple, Union

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
    """Pre-tokenised names per label and the longest-match tagger over a ``Doc``."""

    def __init__(self, names: Mapping[str, Iterable[Tuple[str, ...]]]) -> None:
        self.labels: Tuple[str, ...] = tuple(sorted(names))
        self._names: Dict[str, Set[Tuple[str, ...]]] = {label: set(names[label]) for label in self.labels}
        self._prefixes: Dict[str, Set[Tuple[str, ...]]] = {
            label: {name[:k] for name in entries for k in range(1, len(name))}
            for label, entries in self._names.items()
        }

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._names.values())

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
        names, prefixes = self._names[label], self._prefixes[label]
        found, i = [], 0
        while i < len(words):
            best = 0
            for end in range(i + 1, min(len(words), i + MAX_TOKENS) + 1):
                key = tuple(words[i:end])
                if key in names:
                    best = end
                if key not in prefixes:
                    break
            if best:
                found.append((i, best))
                i = best
            else:
                i += 1
        return found

    def to_disk(self, folder: PathLike) -> Path:
        path = Path(folder) / FILE_NAME
        with gzip.open(path, "wt", encoding="utf8", compresslevel=9) as handle:
            for label in self.labels:
                for name in sorted(self._names[label]):
                    handle.write(f"{label}\t{' '.join(name)}\n")
        return path

    @classmethod
    def from_disk(cls, folder: PathLike) -> "Gazetteer":
        path = Path(folder) / FILE_NAME
        names: Dict[str, Set[Tuple[str, ...]]] = {}
        with gzip.open(path, "rt", encoding="utf8") as handle:
            for line_no, line in enumerate(handle, 1):
                label, sep, text = line.rstrip("\n").partition("\t")
                if not sep or not label or not text:
                    raise InputError("expected LABEL<TAB>name tokens", path, line=line_no)
                names.setdefault(label, set()).add(tuple(text.split(" ")))
        return cls(names)

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
