"""A tokenised ``Doc`` → overlapping word-piece windows the transformer can read, and back.

An abstract runs to 300–600 word pieces; attention costs grow with the square of the length and
BERT stops at 512, so a document is read in windows of at most ``max_pieces`` pieces that
overlap by about ``overlap`` pieces. Each token is scored once, in the window where it sits
farthest from an edge (its *core*), so every token keeps context on both sides. A token is scored
by its first word piece; a token with no pieces (whitespace) is ``O``; a very long token (a
systematic chemical name) keeps its first :data:`MAX_PIECES_PER_TOKEN` pieces.

Training and inference cut windows the same way, so the model sees at test time what it saw in
training.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

MAX_PIECES_PER_TOKEN = 16


@dataclass
class Window:
    """One model input: piece ids (with start/end ids), a gazetteer feature per piece, and the
    tokens of its core with the position of each one's first piece."""

    input_ids: List[int]
    features: List[int]
    positions: List[int]
    tokens: List[int]


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
