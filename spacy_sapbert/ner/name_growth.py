"""KB names a NER entity grows to: "hyperparathyroidism" inside "secondary hyperparathyroidism".

A tagger trained on about 1,100 abstracts often stops short of a specific disease name that its
KB lists whole: it tags "hyperparathyroidism" in "secondary hyperparathyroidism", "glaucoma" in
"open-angle glaucoma", "migraine" and "aura" in "migraine with aura", and the linker then names the
broader concept. The KB's own names say where such a name ends. An entity grows to the longest
name of its label that contains it, when

- only words and hyphens are added (no comma, bracket, slash, digit or line break: "Wilms tumor 1"
  is a gene, "muscle, rigidity" two things),
- an added first or last word is not a stop word ("other cancers"),
- every entity the name overlaps is inside it whole and has its label (two entities, "migraine" and
  "aura", become one; a name never swallows a chemical: "levodopa-induced dyskinesias").

Nothing is tagged where the NER tagged nothing: the names only move an entity's edges. Chemicals
are left alone in the embedded default (BC5CDR's annotators tag "calcium" in "calcium channel",
which the KB lists whole). Measured on BC5CDR dev and NCBI in docs/ner.md.

File (``grow_names.tsv.gz`` in the ``dictionary_entities`` folder): ``LABEL<TAB>lower-case tokens``
per line, the tokens as the pipeline's tokenizer cuts the name ("open - angle glaucoma"), joined by
single spaces. When it is built, a name with a punctuation token ("epilepsy , generalized") is left
out: growing never adds one, and an entity seldom holds one.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple, Union

import numpy as np
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from spacy_sapbert.util.hashed_strings import HashedStrings


FILE_NAME = "grow_names.tsv.gz"
MAX_TOKENS = 12
"""Longest name kept (in tokens; a hyphen is a token)."""
MAX_ADDED = 6
"""At most this many tokens are added on each side of an entity."""


def addable(token) -> bool:
    """A token a name may add to an entity: a word or a hyphen."""
    return token.is_alpha or token.text == "-"


def good_edge(token) -> bool:
    """An added first or last token: a word that is not a stop word."""
    return token.is_alpha and not token.is_stop


class NameGrowth:
    """Per label, the names (lower-case tokens joined by spaces) an entity of that label may grow to."""

    def __init__(self, names: Iterable[Tuple[str, str]] = ()) -> None:
        self._names: Dict[str, HashedStrings] = {}
        """Per label, the names as hashes (:mod:`spacy_sapbert.util.hashed_strings`): the default's 38,970
        held 4.8 MB as strings in sets, 1.2 MB so."""
        self.add(names)

    def add(self, names: Iterable[Tuple[str, str]]) -> None:
        """(label, name) pairs, the name's tokens joined by spaces."""
        by_label: Dict[str, List[str]] = {}
        for label, wording in names:
            by_label.setdefault(label, []).append(wording)
        for label, wordings in by_label.items():
            self.add_label(label, wordings)

    def add_label(self, label: str, wordings: Iterable[str]) -> None:
        """Names of one label: kept with single spaces between tokens, those of 2 to :data:`MAX_TOKENS` tokens.
        Names already so (a file this module wrote: 39,000 for the default) are checked all at once, as
        one string, instead of one by one."""
        text = "\0".join(wordings)
        if any(odd in text for odd in ("  ", "\t", "\n", "\r", "\0 ", " \0")) or text[:1] == " " or text[-1:] == " ":
            text = "\0".join(" ".join(wording.split()) for wording in text.split("\0"))
        names = text.split("\0")
        spaces = np.fromiter(map(str.count, names, itertools.repeat(" ")), dtype=np.int64, count=len(names))
        keep = (spaces >= 1) & (spaces < MAX_TOKENS)
        kept = names if keep.all() else list(itertools.compress(names, keep.tolist()))
        self._names[label] = self._names[label].union(kept) if label in self._names else HashedStrings(kept)

    def __len__(self) -> int:
        return sum(len(names) for names in self._names.values())

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(sorted(self._names))

    def pairs(self) -> List[Tuple[str, str]]:
        """(label, wording), sorted: what :func:`grow_names_tsv` writes."""
        return [(label, name) for label in self.labels for name in sorted(self._names[label])]

    def _longest(self, doc: Doc, lower: Sequence[str], ents: Sequence[Span], owner: Dict[int, int], n: int
                 ) -> Union[Span, None]:
        ent = ents[n]
        names = self._names.get(ent.label_)
        if not names:
            return None
        best = None
        for start in range(ent.start, max(-1, ent.start - MAX_ADDED - 1), -1):
            if start < ent.start and not addable(doc[start]):
                break
            if start < ent.start and not good_edge(doc[start]):
                continue
            for end in range(ent.end, min(len(doc), ent.end + MAX_ADDED) + 1):
                if end > ent.end and not addable(doc[end - 1]):
                    break
                if end - start > MAX_TOKENS:
                    break
                if (start, end) == (ent.start, ent.end) or end > ent.end and not good_edge(doc[end - 1]):
                    continue
                if best is not None and end - start <= best[1] - best[0]:
                    continue
                covered = {owner[i] for i in range(start, end) if i in owner}
                if any(ents[m].label_ != ent.label_ or ents[m].start < start or ents[m].end > end for m in covered):
                    continue
                if " ".join(lower[start:end]) in names:
                    best = (start, end)
        return Span(doc, best[0], best[1], label=ent.label_) if best else None

    def grow(self, doc: Doc, ents: Sequence[Span]) -> List[Span]:
        """``ents`` with each entity that lies inside a longer name of its label replaced by that name
        (see the module); the others as they are."""
        if not self._names or not ents:
            return list(ents)
        lower = [t.lower_ for t in doc]
        owner = {i: n for n, ent in enumerate(ents) for i in range(ent.start, ent.end)}
        grown = filter_spans([s for n in range(len(ents)) if (s := self._longest(doc, lower, ents, owner, n))])
        if not grown:
            return list(ents)
        replaced = {owner[i] for span in grown for i in range(span.start, span.end) if i in owner}
        return sorted([e for n, e in enumerate(ents) if n not in replaced] + grown, key=lambda s: s.start)


def read_grow_names(path: Union[str, Path]) -> NameGrowth:
    """The ``LABEL<TAB>tokens`` lines of a names file, gzip or plain, as the gazetteer's file is read
    (each label's lines in one block are split with string methods), each name kept as
    :meth:`NameGrowth.add` keeps them."""
    from spacy_sapbert.ner.gazetteer import label_name_lists
    from spacy_sapbert.util.textfile import read_text

    growth = NameGrowth()
    for label, wordings in label_name_lists(read_text(path), path).items():
        growth.add_label(label.strip(), "\0".join(wordings).lower().split("\0"))
    return growth


def write_grow_names(path: Union[str, Path], growth: NameGrowth) -> Path:
    """Write a names file (gzip), as :func:`read_grow_names` reads it."""
    import gzip

    from spacy_sapbert.util.atomic import atomic_write_bytes

    atomic_write_bytes(path, gzip.compress(grow_names_tsv(growth).encode("utf-8"), compresslevel=9, mtime=0))
    return Path(path)


def grow_names_tsv(growth: NameGrowth) -> str:
    """The text of a names file, as :func:`read_grow_names` reads it (no header: the gazetteer's format)."""
    return "".join(f"{label}\t{name}\n" for label, name in growth.pairs())


def kb_grow_names(concepts: Iterable, label_types: Mapping[str, Sequence[str]], tokenize) -> NameGrowth:
    """The names of the KB ``concepts`` whose types ``label_types`` maps to a label (label → KB types),
    cut by ``tokenize`` (the pipeline's ``make_doc``): those of 2 to :data:`MAX_TOKENS` tokens, each a
    word (a letter or a digit in it) or a hyphen."""
    from spacy_sapbert.ner.gazetteer import kb_label_names

    pairs = []
    for label, name in kb_label_names(concepts, label_types):
        tokens = [t.lower_ for t in tokenize(name)]
        if 2 <= len(tokens) <= MAX_TOKENS and all(t == "-" or any(ch.isalnum() for ch in t) for t in tokens):
            pairs.append((label, " ".join(tokens)))
    return NameGrowth(pairs)


__all__ = ["NameGrowth", "read_grow_names", "grow_names_tsv", "write_grow_names", "kb_grow_names", "FILE_NAME", "MAX_TOKENS",
           "MAX_ADDED"]
