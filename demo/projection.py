"""The 2-D picture of the Neighbours tab: the query, its neighbours and the other names of their
concepts, projected with PCA. This is the SapBERT paper's Figure 1 for one query: after
self-alignment the names of a concept form one tight cluster and the query lands inside the
right one."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import numpy as np
from sklearn.decomposition import PCA

from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize

from .inputs import check_query
from .neighbours import Neighbour
from .spaces import EmbeddingSpace, canonical_name


@dataclass(frozen=True)
class ProjectedPoint:
    x: float
    y: float
    text: str
    concept: str
    """Concept ID of the name, or "" for the query."""
    kind: str
    """"query", "neighbour" (in the top k) or "synonym" (another name of a neighbour's concept)."""


@dataclass
class Projection:
    points: List[ProjectedPoint]
    explained: Tuple[float, float]
    """Share of the variance the two axes keep (PCA)."""
    concept_names: Dict[str, str] = field(default_factory=dict)


def pca_2d(vectors: np.ndarray) -> Tuple[np.ndarray, Tuple[float, float]]:
    """Project rows onto their first two principal components (scikit-learn's PCA).

    The sign of each axis is fixed so that its largest loading is positive, so the same
    vectors always give the same picture; fewer than two rows, or rows that are all alike,
    give zeros rather than an error, and a missing second axis is a column of zeros.
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError("pca_2d needs a non-empty 2-D array")
    if x.shape[0] < 2 or not np.any(x - x.mean(axis=0, keepdims=True)):
        return np.zeros((x.shape[0], 2)), (0.0, 0.0)
    pca = PCA(n_components=min(2, *x.shape), svd_solver="full")
    coords = pca.fit_transform(x)
    components = pca.components_
    signs = np.sign(components[np.arange(components.shape[0]), np.argmax(np.abs(components), axis=1)])
    signs[signs == 0] = 1.0
    coords = coords * signs
    missing = 2 - coords.shape[1]
    coords = np.hstack([coords, np.zeros((coords.shape[0], missing))])
    explained = [float(v) for v in pca.explained_variance_ratio_] + [0.0] * missing
    return coords, (explained[0], explained[1])


def neighbourhood_projection(space: EmbeddingSpace, query: str, neighbours: Sequence[Neighbour],
                             max_concepts: int = 6, max_names_per_concept: int = 12) -> Projection:
    """The query, its neighbours (of their first ``max_concepts`` concepts) and up to
    ``max_names_per_concept`` names of each of those concepts, encoded and projected to 2-D."""
    query = check_query(query)
    concepts: List[str] = []
    for n in neighbours:
        if n.concept_id not in concepts and len(concepts) < max_concepts:
            concepts.append(n.concept_id)
    texts: List[str] = [normalize(query)]
    meta: List[Tuple[str, str]] = [("", "query")]
    seen = set()
    for n in neighbours:
        if n.concept_id in concepts and (n.name, n.concept_id) not in seen:
            seen.add((n.name, n.concept_id))
            texts.append(n.name)
            meta.append((n.concept_id, "neighbour"))
    for cid in concepts:
        concept = space.kb.get(cid) or space.kb.resolve(cid)
        if concept is None:
            continue
        added = sum(1 for c, _ in meta if c == cid)
        for name in KnowledgeBase.normalized_names(concept):
            if added >= max_names_per_concept:
                break
            if (name, cid) in seen:
                continue
            seen.add((name, cid))
            texts.append(name)
            meta.append((cid, "synonym"))
            added += 1
    vectors = space.encoder.encode(texts)
    coords, explained = pca_2d(vectors)
    points = [ProjectedPoint(float(x), float(y), text, cid, kind)
              for (x, y), text, (cid, kind) in zip(coords, texts, meta)]
    names = {cid: canonical_name(space.kb, cid) for cid in concepts}
    return Projection(points, explained, names)
