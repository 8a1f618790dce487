"""Coordinated (composite) mentions: one span that names several concepts.

Annotators of BC5CDR and NCBI disease tag "renal or hepatic toxicity" or "breast and ovarian
cancer" as one mention with one ID per concept; a linker that gives a span one concept can find
one of them at most. :func:`split_coordination` writes out the concepts such a span coordinates
("renal toxicity", "hepatic toxicity"), so each can be linked on its own. Only shapes whose
parts are unambiguous are split: modifiers coordinated before a shared head ("breast, brain and
kidney cancer"), a shared head with "of" ("carcinoma of the breast and ovary") and one word on
each side of a slash before a shared head ("breast/ovarian cancer"). A coordination of two whole
names ("nausea and vomiting") has no shared head and is left alone: the NER usually tags its
parts as spans of their own. Which modifiers are words and which are whole names the rules
cannot tell ("hypertension and diabetes mellitus" has the shape of "renal and hepatic failure"):
:func:`composite_parts` asks the KB.

The evaluation's reading of a gold composite (``training/evaluation/queries.py: split_composite``)
uses the same rules first, and knows how many parts to expect. The linker
(``sapbert_linker``'s ``split_composites``) splits a span only where its KB supports the split
(:func:`composite_parts`).
"""
from __future__ import annotations

import re
from typing import Callable, FrozenSet, Iterator, List, Optional, Sequence, Tuple

from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize

_WORD = r"[A-Za-z-]+"
PREFIX_OF = re.compile(rf"(?P<head>{_WORD}) of (?:both )?(?:the )?(?P<first>(?:{_WORD} )+)(?:and|or) (?:the )?"
                       rf"(?P<second>{_WORD}(?: {_WORD})*)")
"""'carcinoma of the breast and ovary' → carcinoma of breast, carcinoma of ovary."""
NESTED_AND = re.compile(rf"(?P<heads>(?:{_WORD},? )+)(?:and|or|and/or) (?P<last>{_WORD} and {_WORD}) (?P<stem>.*)")
"""'breast, ovarian, and colon and rectal cancer': the last conjunct itself holds an 'and'."""
COORDINATED = re.compile(rf"(?P<heads>(?:{_WORD},? )+)(?:and|or|and/or) (?P<last>(?:the )?{_WORD}) (?P<stem>.*)")
"""'breast, brain and kidney cancer' / 'breast and ovarian cancer'."""
SLASH_HEAD = re.compile(rf"(?P<before>(?:{_WORD} )*)(?P<left>{_WORD})/(?P<right>{_WORD}) (?P<stem>{_WORD}(?: {_WORD})*)")
"""'breast/ovarian cancer' → breast cancer, ovarian cancer: one word each side, a shared head after.
(Word groups are ``word( word)*``, never ``(word ?)+``: that form backtracks exponentially on a long
span that does not match.)"""


def coordinated_parts(mention: str) -> List[str]:
    """The parts of ``mention`` by the shared-head rules (:data:`PREFIX_OF`, :data:`NESTED_AND`,
    :data:`COORDINATED`), or ``[]`` when none fits."""
    match = PREFIX_OF.match(mention)
    if match:
        head = match.group("head")
        return [f"{head} of {match.group('first').strip()}", f"{head} of {match.group('second').strip()}"]
    match = NESTED_AND.match(mention) or COORDINATED.match(mention)
    if match:
        heads = [h.strip() for h in match.group("heads").strip().split(",")]
        heads.append(match.group("last"))
        return [f"{h.strip()} {match.group('stem')}" for h in heads if h.strip()]
    return []


def split_coordination(mention: str) -> List[str]:
    """The concepts a coordinated mention names, written out, or ``[]`` if it is not one.

    >>> split_coordination("renal or hepatic toxicity")
    ['renal toxicity', 'hepatic toxicity']
    >>> split_coordination("breast/ovarian cancer")
    ['breast cancer', 'ovarian cancer']
    >>> split_coordination("nausea and vomiting")
    []
    """
    mention = " ".join(mention.split())
    parts = coordinated_parts(mention)
    if not parts and "and/or" not in mention:
        match = SLASH_HEAD.fullmatch(mention)
        if match:
            before, stem = match.group("before"), match.group("stem").strip()
            parts = [f"{before}{match.group(side)} {stem}" for side in ("left", "right")]
    parts = [p.strip() for p in parts if p.strip()]
    return parts if len(parts) >= 2 and len(set(parts)) == len(parts) else []


def composite_parts(texts: Sequence[str], kb: KnowledgeBase,
                    types: Optional[Sequence[Optional[FrozenSet[str]]]] = None,
                    named: Optional[Callable[[str], Sequence[str]]] = None) -> Iterator[Tuple[int, str]]:
    """(index of the text, part) for every coordinated text of ``texts`` whose split the KB supports.

    A text is left whole when it is a name of ``kb`` as it stands ("breast and ovarian cancer" names
    one syndrome, D061325, in MeSH, and NCBI's annotators mostly tag it so), and when what its parts
    do not share is itself the name of a concept of the text's ``types`` (per text, None: any): then
    it coordinates whole names, not modifiers of one head ("hypertension and diabetes mellitus" is
    hypertension + diabetes mellitus, not "hypertension mellitus"; "retinal", a chemical's name,
    still modifies "tumours" in a DISEASE span). ``named``: normalised name → the concepts that have it
    (the linker passes its index's table, built with its first search; default: the KB's alias index,
    which normalises every name of the KB once, seconds for the default's 180,000)."""
    if named is None:
        named = lambda name: kb.alias_to_concepts.get(name, ())  # noqa: E731

    def names_a_concept(words: str, allowed: Optional[FrozenSet[str]]) -> bool:
        return any(allowed is None or set(kb.get(cid).types) & allowed for cid in named(normalize(words)))

    for i, text in enumerate(texts):
        parts = split_coordination(text)
        if not parts or named(normalize(text)):
            continue
        allowed = types[i] if types is not None else None
        if any(names_a_concept(own, allowed) for own in _own_words(parts)):
            continue
        for part in parts:
            yield i, part


def _own_words(parts: Sequence[str]) -> List[str]:
    """What each part does not share with every other: its words between the common first and last words."""
    words = [part.split() for part in parts]
    shortest = min(len(w) for w in words)
    head = 0
    while head < shortest - 1 and len({tuple(w[:head + 1]) for w in words}) == 1:
        head += 1
    tail = 0
    while tail < shortest - 1 - head and len({tuple(w[len(w) - tail - 1:]) for w in words}) == 1:
        tail += 1
    return [" ".join(w[head:len(w) - tail]) for w in words]


__all__ = ["composite_parts", "COORDINATED", "NESTED_AND", "PREFIX_OF", "SLASH_HEAD", "coordinated_parts", "split_coordination"]
