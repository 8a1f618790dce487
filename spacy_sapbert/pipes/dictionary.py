"""The ``dictionary_entities`` pipe: listed wordings become entities wherever they occur, after the
NER and never over its spans.

The embedded default lists the wordings its training corpora's annotators tag nearly everywhere
(``sapbert ner-dictionary``; docs/ner.md). spaCy's ``entity_ruler`` with ``overwrite_ents = false``
does the same, but not at this pipeline's speed: with token patterns its ``Matcher`` takes about
40 ms per BC5CDR abstract for 1,771 patterns on a 2-core CPU (the whole NER 66 ms), and with
phrase patterns it runs every pipe before it, the transformer NER here, over each pattern
whenever the pipeline loads. This pipe keeps the ruler's file format (JSONL of ``{"label": …,
"pattern": [{"LOWER": …}, …]}``, so the file also loads into an ``entity_ruler``) and matches
what a ``PhraseMatcher`` on ``LOWER`` matches, by looking the documents' token sequences up (as
spaCy's ``LOWER`` string ids) in a table of the listed ones: nothing runs when it loads (a
``PhraseMatcher`` needs a ``Doc`` and new lexemes per pattern: 0.25 s of the default pipeline's
load for its 3,768 patterns, the table 0.03 s), and 200 BC5CDR abstracts are matched in about 30 ms
(the ``PhraseMatcher``: 11 ms). Overlapping matches keep the longest (spaCy's ``filter_spans``).

It also holds the other half of what the annotators did: *exclusions*, wordings they seldom tag with
a label although they occur often ("acute", "mrna", "degeneration": tagged at under a tenth of three or
more occurrences). A NER entity that is exactly such a wording with that label is removed before the
listed wordings are added. They are many (18,094 in the embedded default: 12,053 by their annotation rate, the
rest KB names of MeSH branches the annotators leave untagged) and only ever compared whole,
so they are kept as text, ``LABEL<TAB>lower-case tokens`` per line (``exclusions.tsv``), which reads in
a hundredth of a second where the JSON patterns took 0.2 s; a package without the file has none.

Third, KB names an entity grows to (``grow_names.tsv.gz``, :mod:`spacy_sapbert.ner.name_growth`): a NER
entity inside a longer name of its label, only words added, becomes that name ("secondary
hyperparathyroidism" over "hyperparathyroidism"). The order is: exclusions, growth, listed wordings.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from spacy.attrs import LOWER
from spacy.language import Language
from spacy.strings import get_string_id
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from spacy_sapbert.errors import InputError
from spacy_sapbert.ner.name_growth import FILE_NAME as GROW_FILE
from spacy_sapbert.ner.name_growth import NameGrowth, read_grow_names, write_grow_names
from spacy_sapbert.util.hashed_strings import HashedStrings

PATTERNS_FILE = "patterns.jsonl"
EXCLUSIONS_FILE = "exclusions.tsv"
Pattern = Dict[str, Any]
Exclusion = Tuple[str, str]
"""(label, wording): the wording is the entity's tokens in lower case, joined by single spaces."""


def check_pattern(pattern: Any, path: Union[str, Path, None] = None, line: Union[int, None] = None
                  ) -> Tuple[str, List[str]]:
    """(label, lower-case tokens) of one pattern; an :class:`InputError` naming the file and line otherwise."""
    tokens = pattern.get("pattern") if isinstance(pattern, dict) else None
    label = pattern.get("label") if isinstance(pattern, dict) else None
    if not isinstance(label, str) or not label or not isinstance(tokens, list) or not tokens or not all(
            isinstance(t, dict) and set(t) == {"LOWER"} and isinstance(t["LOWER"], str) and t["LOWER"]
            for t in tokens):
        raise InputError(f"a pattern is {{\"label\": LABEL, \"pattern\": [{{\"LOWER\": TOKEN}}, ...]}}, got {pattern!r}",
                         path, line, field="pattern")
    return label, [t["LOWER"] for t in tokens]


def patterns_jsonl(patterns: Iterable[Pattern]) -> str:
    """The text of a patterns file: one JSON object per line, as spaCy's ``entity_ruler`` reads them."""
    return "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in patterns)


def exclusion(label: Any, wording: Any, path: Union[str, Path, None] = None, line: Union[int, None] = None
              ) -> Exclusion:
    """One checked (label, wording), the wording normalised as the pipe compares it; an
    :class:`InputError` naming the file and line otherwise."""
    if not isinstance(label, str) or not label.strip() or any(c in label for c in "\t\n\r"):
        raise InputError(f"an exclusion's label is a non-empty text without tabs or line breaks, got {label!r}",
                         path, line, field="label")
    if not isinstance(wording, str) or not wording.split() or "\t" in wording:
        raise InputError(f"an exclusion's wording is a non-empty text without tabs, got {wording!r}", path, line,
                         field="wording")
    return label.strip(), " ".join(wording.lower().split())


def read_exclusions(path: Union[str, Path]) -> List[Exclusion]:
    """The (label, wording) lines of an exclusions file (``#`` starts a comment line), read whole and
    checked as :func:`exclusion` checks one: each distinct label once, each wording where it is normalised
    (12,053 lines in about a third of the time one :func:`exclusion` call a line took)."""
    from spacy_sapbert.util.textfile import read_text

    found = []
    labels: Dict[str, str] = {}  # a label as written → as checked
    for number, line in enumerate(read_text(path).split("\n"), 1):
        line = line.rstrip("\r")
        if not line or line[0] == "#" or line.isspace():
            continue
        label, tab, wording = line.partition("\t")
        if not tab or "\t" in wording:
            raise InputError(f"expected LABEL<TAB>wording, got {line.count(chr(9)) + 1} field(s)", path, number)
        checked = labels.get(label)
        if checked is None:
            checked = labels[label] = exclusion(label, "-", path, number)[0]
        words = wording.lower().split()
        if not words:
            exclusion(label, wording, path, number)  # raises, naming the field
        found.append((checked, " ".join(words)))
    return found


def exclusions_tsv(exclusions: Iterable[Exclusion]) -> str:
    """The text of an exclusions file, as :func:`read_exclusions` reads it."""
    return "# label\twording (lower-case tokens): a NER entity that is exactly one is removed\n" + "".join(
        f"{label}\t{wording}\n" for label, wording in exclusions)


def read_patterns(path: Union[str, Path]) -> List[Pattern]:
    """The patterns of a JSONL file; an error names the file and the line."""
    return [pattern for pattern, _, _ in _read_checked_patterns(Path(path))]


def _read_checked_patterns(path: Path) -> List[Tuple[Pattern, Tuple[str, List[str]], str]]:
    """Each pattern of a JSONL file with what :func:`check_pattern` made of it (the pipe's load checks once)
    and its line's JSON text."""
    import orjson  # as the KB's reader: faster than json for many small records

    found = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                pattern = orjson.loads(line)
            except json.JSONDecodeError as err:  # orjson's error is one
                raise InputError(f"invalid JSON ({err})", path, number) from err
            found.append((pattern, check_pattern(pattern, path, number), line.strip()))
    return found


class DictionaryEntities:
    """Adds an entity for each listed wording that overlaps none of ``doc.ents``; with ``extend``,
    also one that covers entities whole and is longer ("high blood pressure" over a NER's "high").
    Before that it removes the excluded wordings' entities and grows entities to the KB names they
    lie in (see the module's docstring)."""

    def __init__(self, nlp: Language, name: str = "dictionary_entities", extend: bool = False) -> None:
        self.name = name
        self.extend = extend
        self.vocab = nlp.vocab
        self._patterns: List[str] = []
        """The patterns as JSON texts (the default's 3,768 as dicts held 3 MB, 0.45 so): :attr:`patterns`."""
        self._pattern_labels: Set[str] = set()
        # listed tokens' LOWER ids (spaCy's string hashes, as Doc.to_array gives them) -> their labels
        self._labels: Dict[Tuple[int, ...], List[str]] = {}
        self._lengths: Dict[int, Set[int]] = {}  # first token -> the lengths of the sequences it starts
        self._excluded = HashedStrings()
        """``LABEL<TAB>wording`` of each exclusion (:mod:`spacy_sapbert.util.hashed_strings`): :attr:`exclusions`."""
        self.growth = NameGrowth()
        """KB names entities grow to (see the module's docstring)."""

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(sorted(self._pattern_labels))

    @property
    def patterns(self) -> List[Pattern]:
        """The listed wordings' patterns, in the order added: a new list of new dicts at each call (parsed from
        their JSON), so changing it changes nothing: :meth:`add_patterns` adds."""
        return [json.loads(text) for text in self._patterns]

    def add_patterns(self, patterns: Iterable[Pattern]) -> None:
        for pattern in patterns:
            self._add_checked(pattern, *check_pattern(pattern))

    def _add_checked(self, pattern: Pattern, label: str, tokens: List[str], text: Optional[str] = None) -> None:
        """Add a checked pattern; ``text``: its JSON as read from a file (else it is written again)."""
        key = tuple(get_string_id(token.lower()) for token in tokens)  # a token's LOWER, as spaCy computes it
        labels = self._labels.setdefault(key, [])
        if label not in labels:
            labels.append(label)
        self._lengths.setdefault(key[0], set()).add(len(key))
        self._patterns.append(text if text is not None else json.dumps(pattern, ensure_ascii=False))
        self._pattern_labels.add(label)

    @property
    def exclusions(self) -> List[Exclusion]:
        """The (label, wording) pairs whose NER entities are removed, in the order added or read; assigning a
        list replaces them."""
        return [tuple(text.split("\t", 1)) for text in self._excluded]  # type: ignore[misc]

    @exclusions.setter
    def exclusions(self, exclusions: Iterable[Exclusion]) -> None:
        self._excluded = HashedStrings("\t".join(exclusion(label, wording)) for label, wording in exclusions)

    def add_exclusions(self, exclusions: Iterable[Exclusion]) -> None:
        """(label, wording) pairs whose NER entities are removed (see the module's docstring)."""
        self._excluded = self._excluded.union("\t".join(exclusion(label, wording)) for label, wording in exclusions)

    def add_grow_names(self, names: Iterable[Tuple[str, str]]) -> None:
        """(label, KB name) pairs, the name's tokens in lower case joined by spaces, that an entity of the
        label inside one grows to (:mod:`spacy_sapbert.ner.name_growth`)."""
        self.growth.add(names)

    def excludes(self, label: str, span: Span) -> bool:
        """Whether ``span``'s words, with ``label``, are an exclusion: a wording the annotators seldom tag so
        (the rule for NER entities here, and for the heads the linker tries, ``head_fallback``)."""
        return bool(len(self._excluded)) and label + "\t" + " ".join(t.lower_ for t in span) in self._excluded

    def _revised_ents(self, doc: Doc) -> List[Span]:
        """``doc.ents`` without the excluded wordings, grown to the KB names they lie in; set on ``doc``."""
        ents = list(doc.ents)
        kept = [e for e in ents if not self.excludes(e.label_, e)]
        kept = self.growth.grow(doc, kept)
        if kept != ents:
            doc.set_ents(kept)
        return kept

    def matches(self, doc: Doc) -> List[Span]:
        """Every occurrence of a listed wording in ``doc`` (overlapping ones included), as the
        ``PhraseMatcher`` on ``LOWER`` of the same patterns finds them."""
        lower = doc.to_array(LOWER).tolist()
        found = []
        for start, first in enumerate(lower):
            for length in self._lengths.get(first, ()):
                end = start + length
                if end <= len(lower):
                    for label in self._labels.get(tuple(lower[start:end]), ()):
                        found.append(Span(doc, start, end, label=label))
        return found

    def __call__(self, doc: Doc) -> Doc:
        ents = self._revised_ents(doc)
        owner = {i: n for n, ent in enumerate(ents) for i in range(ent.start, ent.end)}

        def under(span: Span) -> set:
            return {owner[i] for i in range(span.start, span.end) if i in owner}

        def admissible(span: Span) -> bool:
            covered = under(span)
            return not covered or (self.extend and len(span) > max(len(ents[n]) for n in covered) and all(
                span.start <= ents[n].start and ents[n].end <= span.end for n in covered))

        found = filter_spans([span for span in self.matches(doc) if admissible(span)])
        replaced = set().union(*(under(span) for span in found)) if found else set()
        if found:
            doc.set_ents([e for n, e in enumerate(ents) if n not in replaced] + found)
        return doc

    def pipe(self, stream: Iterable[Doc], batch_size: int = 128) -> Iterable[Doc]:
        for doc in stream:
            yield self(doc)

    def to_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = ()) -> None:
        from spacy_sapbert.util.atomic import atomic_write_text

        Path(path).mkdir(parents=True, exist_ok=True)
        atomic_write_text(Path(path) / PATTERNS_FILE, patterns_jsonl(self.patterns))
        if len(self._excluded):
            atomic_write_text(Path(path) / EXCLUSIONS_FILE, exclusions_tsv(self.exclusions))
        elif (Path(path) / EXCLUSIONS_FILE).is_file():  # an earlier save's: it would come back at from_disk
            (Path(path) / EXCLUSIONS_FILE).unlink()
        if len(self.growth):
            write_grow_names(Path(path) / GROW_FILE, self.growth)
        elif (Path(path) / GROW_FILE).is_file():
            (Path(path) / GROW_FILE).unlink()

    def from_disk(self, path: Union[str, Path], *, exclude: Sequence[str] = ()) -> "DictionaryEntities":
        from spacy_sapbert.util.gc_pause import gc_paused

        with gc_paused():  # tens of thousands of small objects, no cycles: see gc_paused
            return self._read(Path(path))

    def _read(self, path: Path) -> "DictionaryEntities":
        self._patterns, self._pattern_labels, self._labels, self._lengths = [], set(), {}, {}
        for pattern, (label, tokens), text in _read_checked_patterns(path / PATTERNS_FILE):
            self._add_checked(pattern, label, tokens, text)
        self._excluded = HashedStrings()
        if (path / EXCLUSIONS_FILE).is_file():  # checked as read
            self._excluded = HashedStrings("\t".join(pair) for pair in read_exclusions(path / EXCLUSIONS_FILE))
        self.growth = read_grow_names(path / GROW_FILE) if (path / GROW_FILE).is_file() else NameGrowth()
        return self


@Language.factory("dictionary_entities", default_config={"extend": False}, assigns=["doc.ents"])
def make_dictionary_entities(nlp: Language, name: str, extend: bool) -> DictionaryEntities:
    """The pipe, empty (``add_patterns`` or ``from_disk`` fills it); ``extend``: a listed wording
    may also replace entities it covers whole and outgrows."""
    return DictionaryEntities(nlp, name, extend)


__all__ = ["DictionaryEntities", "make_dictionary_entities", "read_patterns", "patterns_jsonl", "check_pattern",
           "read_exclusions", "exclusions_tsv", "exclusion", "Exclusion", "PATTERNS_FILE", "EXCLUSIONS_FILE",
           "GROW_FILE"]
