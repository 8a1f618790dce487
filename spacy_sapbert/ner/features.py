"""The per-token features added to the word pieces: KB-name state (:mod:`.gazetteer`), optionally
word shape, and the annotation style asked for.

MiniLM's vocabulary is lower-cased, so "CO" (carbon monoxide), "Co" and "co" reach the encoder
as the same pieces; a shape class restores what the capitals said ("NaCl", "HbA1c" and "5-HT"
are *mixed*, "STZ" is *upper*).

The training corpora follow different guidelines: BC5CDR tags "migraine with aura" whole and
chemicals too, NCBI disease tags its own disease classes and modifiers and no chemicals. A
model trained on both as one learns their average. With *styles*, each training document says
which guideline it follows and the model learns both; at run time the pipe's ``style`` setting
picks one (the first, BC5CDR's, by default).

All of it goes through one embedding table, indexed by
``(style * n_gazetteer_states + gazetteer_state) * N_SHAPES + shape`` (``N_SHAPES`` = 1 without shapes).
"""
from __future__ import annotations

from typing import List

from spacy.tokens import Doc, Token

from spacy_sapbert.ner.gazetteer import Gazetteer

N_SHAPES = 5
SHAPES = ("no letters", "lower", "Capitalised", "UPPER", "mIxEd")


def shape_of(token: Token) -> int:
    """Index into :data:`SHAPES`."""
    letters = [c for c in token.text if c.isalpha()]
    if not letters:
        return 0
    uppers = sum(c.isupper() for c in letters)
    if uppers == 0:
        return 1
    if uppers == 1 and letters[0].isupper() and token.text[0].isupper():
        return 2
    if uppers == len(letters) and len(letters) > 1:
        return 3
    return 4


def n_features(gazetteer: Gazetteer, shapes: bool, n_styles: int = 1) -> int:
    return gazetteer.n_features * (N_SHAPES if shapes else 1) * max(n_styles, 1)


def token_features(doc: Doc, gazetteer: Gazetteer, shapes: bool, style: int = 0) -> List[int]:
    """One feature id per token of ``doc``; ``style`` is the index of the annotation style."""
    offset = style * gazetteer.n_features
    states = [offset + state for state in gazetteer.features(doc)]
    if not shapes:
        return states
    return [state * N_SHAPES + shape_of(token) for state, token in zip(states, doc)]
