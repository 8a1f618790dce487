"""A tokenised ``Doc`` → overlapping word-piece windows the transformer can read, and back.

An abstract runs to 300–600 word pieces; attention costs grow with the square of the length and
BERT stops at 512, so a document is read in windows of at most ``max_pieces`` pieces that
overlap by about ``overlap`` pieces. Each token is scored once, in the window where it sits
farthest from an edge (its *core*), so every token keeps context on both sides. A token is scored
by its first word piece; a token with no pieces (whitespace) is ``O``; a very long token (a
systematic chemical name) keeps its first :data:`MAX_PIECES_PER_TOKEN` pieces.

Training and inference cut windows the same way, so the model sees at test time what it saw in
training.

A document is first split into paragraphs at its blank lines (:func:`paragraphs`), and each
paragraph is windowed on its own: a model reads every word in context, so where a window
started used to change what it tagged, and the same abstract got other entities at another
place in a long document ("heart attack" became "heart"). Now a paragraph's windows, and so its
entities, depend on the paragraph alone. The training corpora (PubTator title + abstract) have
no blank lines, so the model is trained as it reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

MAX_PIECES_PER_TOKEN = 16


@dataclass
class Window:
    """One model input: piece ids (with start/end ids), a gazetteer feature per piece, and the
    tokens of its core with the position of each one's first piece."""

    input_ids: List[int]
    features: List[int]
    positions: List[int]
    tokens: List[int]


def paragraphs(tokens: Sequence[str]) -> List[Tuple[int, int]]:
    """Token ranges between blank lines: a whitespace token holding two line breaks or more (spaCy
    keeps a run of whitespace beyond one space as a token of its own) ends a paragraph; it belongs
    to none, since it has no word pieces."""
    ranges, start = [], 0
    for i, text in enumerate(tokens):
        if text.isspace() and text.count("\n") >= 2:
            if i > start:
                ranges.append((start, i))
            start = i + 1
    if start < len(tokens):
        ranges.append((start, len(tokens)))
    return ranges


def document_windows(tokens: Sequence[str], pieces: Sequence[Sequence[int]], features: Sequence[int],
                     special: Sequence[int], max_pieces: int = 256, overlap: int = 64) -> List[Window]:
    """:func:`cut_windows` over each paragraph of a document (token texts ``tokens``) on its own, with
    token indices of the whole document."""
    windows = []
    for start, end in paragraphs(tokens):
        for window in cut_windows(pieces[start:end], features[start:end], special, max_pieces, overlap):
            window.tokens = [start + i for i in window.tokens]
            windows.append(window)
    return windows


def cut_windows(pieces: Sequence[Sequence[int]], features: Sequence[int], special: Sequence[int],
                max_pieces: int = 256, overlap: int = 64) -> List[Window]:
    """Windows over a document whose token ``i`` has word pieces ``pieces[i]`` and gazetteer
    feature ``features[i]``; ``special`` is the (start, end) piece pair around each window."""
    if max_pieces < 8 + MAX_PIECES_PER_TOKEN or not 0 <= overlap < max_pieces // 2:
        raise ValueError(f"max_pieces={max_pieces}, overlap={overlap}: need max_pieces >= "
                         f"{8 + MAX_PIECES_PER_TOKEN} and 0 <= overlap < max_pieces / 2")
    counts = [min(len(p), MAX_PIECES_PER_TOKEN) for p in pieces]
    budget = max_pieces - 2
    n = len(counts)
    spans = []  # (start, end) token ranges
    start = 0
    while start < n:
        end, used = start, 0
        while end < n and used + counts[end] <= budget:
            used += counts[end]
            end += 1
        spans.append((start, end))
        if end >= n:
            break
        back, carried = end, 0
        while back - 1 > start and carried + counts[back - 1] <= overlap:
            back -= 1
            carried += counts[back]
        start = back if back > start + 1 else end
    windows = []
    for k, (start, end) in enumerate(spans):
        core_start = start if k == 0 else (start + spans[k - 1][1] + 1) // 2
        core_end = end if k == len(spans) - 1 else (spans[k + 1][0] + end + 1) // 2
        ids, feats, positions, tokens = [special[0]], [0], [], []
        for i in range(start, end):
            if core_start <= i < core_end and counts[i]:
                positions.append(len(ids))
                tokens.append(i)
            ids.extend(pieces[i][:counts[i]])
            feats.extend([features[i]] * counts[i])
        ids.append(special[1])
        feats.append(0)
        windows.append(Window(ids, feats, positions, tokens))
    return windows
