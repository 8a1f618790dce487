"""The Neighbours and Compare tabs as plain data: the KB names nearest to a query in one
embedding space, and the same query in two spaces side by side (e.g. the base encoder and
the self-aligned one: what self-alignment changed)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from spacy_sapbert.kb.normalize import normalize

from .inputs import check_k, check_query
from .spaces import EmbeddingSpace, canonical_name, score_text

NEIGHBOUR_COLUMNS = ["Rank", "KB name", "Concept ID", "Concept name", "Cosine"]
COMPACT_NEIGHBOUR_COLUMNS = ["Rank", "KB name", "Concept", "Cosine"]


@dataclass(frozen=True)
class Neighbour:
    rank: int
    name: str
    concept_id: str
    canonical_name: str
    score: float


def nearest_names(space: EmbeddingSpace, query: str, k: int) -> List[Neighbour]:
    """The ``k`` KB names closest to ``query`` (normalised as the index's names are), with
    their concepts and cosine similarities, best first."""
    query = check_query(query)
    k = check_k(k)
    vector = space.encoder.encode([normalize(query)])
    scores, rows = space.index.search(np.asarray(vector, dtype=np.float32), k)
    out: List[Neighbour] = []
    for score, row in zip(scores[0], rows[0]):
        if row < 0:
            continue
        cid = space.index.concept_ids[int(row)]
        out.append(Neighbour(len(out) + 1, space.index.names[int(row)], cid, canonical_name(space.kb, cid),
                             float(score)))
    return out


def neighbour_rows(neighbours: Sequence[Neighbour]) -> List[List[object]]:
    """Rows under :data:`NEIGHBOUR_COLUMNS`."""
    return [[n.rank, n.name, n.concept_id, n.canonical_name, score_text(n.score)] for n in neighbours]


def compact_neighbour_rows(neighbours: Sequence[Neighbour]) -> List[List[object]]:
    """Four columns, for the narrower side-by-side tables of the compare view."""
    return [[n.rank, n.name, f"{n.concept_id} {n.canonical_name}".strip(), score_text(n.score)] for n in neighbours]


@dataclass
class Comparison:
    query: str
    results: List[Tuple[str, List[Neighbour]]]
    """(space label, neighbours) per space, in the order given."""

    def summary(self) -> str:
        """Markdown: each space's top concept and where the other space's top concept ranks."""
        lines = []
        for label, neighbours in self.results:
            if neighbours:
                top = neighbours[0]
                lines.append(f"- **{label}**: top concept {top.concept_id} {top.canonical_name} "
                             f"(cosine {top.score:.3f} via “{top.name}”)")
            else:
                lines.append(f"- **{label}**: no neighbours")
        tops = {n[0].concept_id for _, n in self.results if n}
        if len(self.results) >= 2 and len(tops) == 1:
            lines.append("- Both spaces agree on the top concept.")
        elif len(self.results) >= 2 and len(tops) > 1:
            lines.append("- The spaces disagree on the top concept.")
        return "\n".join(lines)


def compare_neighbours(spaces: Sequence[EmbeddingSpace], query: str, k: int) -> Comparison:
    """The same query in every space (e.g. the base encoder and the self-aligned one)."""
    query = check_query(query)
    return Comparison(query, [(space.label, nearest_names(space, query, k)) for space in spaces])
