"""What the demo computes, as plain functions over a pipeline and embedding spaces.

Nothing here imports Gradio: every view of the app is one function that takes an ``nlp``
or an :class:`EmbeddingSpace` and returns dataclasses and lists, so the behaviour is
tested without a browser and the layout in :mod:`demo.app` stays a thin shell.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Protocol, Sequence, Tuple

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb import KnowledgeBase
from spacy_sapbert.normalize import normalize

logger = logging.getLogger(__name__)

MAX_TEXT_CHARS = 5000
MAX_QUERY_CHARS = 200
MAX_K = 20
UNLINKED = "no concept"
# One colour per entity type; types beyond the palette cycle through it.
TYPE_PALETTE = ["#f4a261", "#7ec8e3", "#b5e48c", "#e5989b", "#cdb4db", "#ffd166", "#90be6d", "#a3c4f3"]
UNLINKED_COLOUR = "#d9d9d9"


class DemoInputError(InputError):
    """Input the demo refuses (empty, too long, k out of range); shown to the user as is."""

    def __init__(self, problem: str, field: Optional[str] = None) -> None:
        super().__init__(problem, field=field)


class EncoderLike(Protocol):
    def encode(self, texts: Sequence[str], batch_size: Optional[int] = None,
               show_progress: bool = False) -> np.ndarray: ...


class IndexLike(Protocol):
    names: List[str]
    concept_ids: List[str]

    def search(self, vectors: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]: ...


@dataclass
class EmbeddingSpace:
    """An encoder, the index of the KB's names it built, and the KB: one space to search."""

    label: str
    encoder: EncoderLike
    index: IndexLike
    kb: KnowledgeBase


# --- input checks ----------------------------------------------------------------------
def check_text(text: Optional[str], max_chars: int = MAX_TEXT_CHARS) -> str:
    """The text to link, or a :class:`DemoInputError` that tells the user what to change."""
    text = (text or "").strip()
    if not text:
        raise DemoInputError("Please enter some text to link (or pick one of the examples).", "text")
    if len(text) > max_chars:
        raise DemoInputError(
            f"The text has {len(text):,} characters; the demo links at most {max_chars:,}. "
            "Please shorten it (one abstract at a time works best).", "text")
    return text


def check_query(query: Optional[str], max_chars: int = MAX_QUERY_CHARS) -> str:
    """A name to look up: non-empty after normalisation and at most ``max_chars`` long."""
    query = (query or "").strip()
    if not query:
        raise DemoInputError("Please type a name to look up, e.g. “heart attack”.", "query")
    if len(query) > max_chars:
        raise DemoInputError(
            f"The name has {len(query)} characters; names up to {max_chars} are looked up. "
            "To link a whole text, use the “Link text” tab.", "query")
    if not normalize(query):
        raise DemoInputError("The name has no letters or digits left after removing punctuation.", "query")
    return query


def check_k(k: object, max_k: int = MAX_K) -> int:
    """``k`` as an int in 1..max_k (sliders bound it in the page; API calls are checked here)."""
    try:
        value = int(k)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DemoInputError(f"k must be a whole number between 1 and {max_k}.", "k") from None
    if not 1 <= value <= max_k:
        raise DemoInputError(f"k must be between 1 and {max_k} (got {value}).", "k")
    return value


def check_threshold(threshold: object) -> float:
    try:
        value = float(threshold)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DemoInputError("The threshold must be a number between 0 and 1.", "threshold") from None
    if not 0.0 <= value <= 1.0:
        raise DemoInputError(f"The threshold must be between 0 and 1 (got {value}).", "threshold")
    return value


# --- linking a text ----------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    concept_id: str
    canonical_name: str
    score: float


@dataclass(frozen=True)
class LinkedMention:
    text: str
    start_char: int
    end_char: int
    label: str
    long_form: Optional[str]
    candidates: Tuple[Candidate, ...]
    threshold: float

    @property
    def best(self) -> Optional[Candidate]:
        """The top candidate if it reaches the threshold: what the mention is linked to."""
        if self.candidates and self.candidates[0].score >= self.threshold:
            return self.candidates[0]
        return None


@dataclass
class LinkedText:
    text: str
    mentions: List[LinkedMention]
    abbreviations: List[Tuple[str, str]]
    threshold: float
    top_k: int

    @property
    def n_linked(self) -> int:
        return sum(m.best is not None for m in self.mentions)


def link_text(nlp, text: str, threshold: float, top_k: int, kb: KnowledgeBase,
              linker_name: Optional[str] = None, max_chars: int = MAX_TEXT_CHARS) -> LinkedText:
    """Run the pipeline over ``text`` and collect, per mention, its top-k candidates.

    The mentions are the spans the linker pipe ``linker_name`` links (``doc.ents`` when no
    pipe is named). The threshold is applied here rather than in the pipe, so that moving
    the slider shows which mentions fall below it instead of hiding them.
    """
    text = check_text(text, max_chars)
    threshold = check_threshold(threshold)
    top_k = check_k(top_k)
    doc = nlp(text)
    pipe = nlp.get_pipe(linker_name) if linker_name else None
    spans = pipe.spans(doc) if pipe is not None else doc.ents
    extension = pipe.extension if pipe is not None else "kb_ents"
    long_forms = abbreviation_long_forms(doc)
    mentions = []
    for span in spans:
        raw = getattr(span._, extension, None) or []
        candidates = tuple(
            Candidate(cid, _canonical_name(kb, cid), float(score)) for cid, score in list(raw)[:top_k])
        mentions.append(LinkedMention(span.text, span.start_char, span.end_char, span.label_ or "ENTITY",
                                      long_forms.get((span.start_char, span.end_char)), candidates, threshold))
    abbreviations = sorted(set(_abbreviation_pairs(doc).values()))
    return LinkedText(text, mentions, abbreviations, threshold, top_k)


def _canonical_name(kb: KnowledgeBase, concept_id: str) -> str:
    concept = kb.get(concept_id) or kb.resolve(concept_id)
    return concept.canonical_name if concept is not None else ""


def _abbreviation_pairs(doc) -> Dict[Tuple[int, int], Tuple[str, str]]:
    """(start_char, end_char) of each short form → (short form, long form)."""
    pairs: Dict[Tuple[int, int], Tuple[str, str]] = {}
    if not doc.has_extension("abbreviations"):
        return pairs
    for short in doc._.abbreviations:
        long_form = short._.long_form
        if long_form is None:
            continue
        long_text = long_form if isinstance(long_form, str) else long_form.text
        pairs[(short.start_char, short.end_char)] = (short.text, long_text)
    return pairs


def abbreviation_long_forms(doc) -> Dict[Tuple[int, int], str]:
    return {offsets: long for offsets, (_, long) in _abbreviation_pairs(doc).items()}


def type_colours(labels: Sequence[str]) -> Dict[str, str]:
    """A stable colour per entity type (sorted, so the same type keeps its colour)."""
    return {label: TYPE_PALETTE[i % len(TYPE_PALETTE)] for i, label in enumerate(sorted(set(labels)))}


def highlight_category(mention: LinkedMention) -> str:
    """The inline label of a highlighted mention: type, then the linked concept or a note."""
    best = mention.best
    if best is None:
        return f"{mention.label} · {UNLINKED}"
    name = f" {best.canonical_name}" if best.canonical_name else ""
    return f"{mention.label} · {best.concept_id}{name}"


def highlighted(linked: LinkedText) -> Tuple[Dict[str, object], Dict[str, str]]:
    """The value and colour map for a highlighted-text view: entities coloured by type,
    unlinked mentions grey."""
    colours = type_colours([m.label for m in linked.mentions])
    entities = []
    colour_map: Dict[str, str] = {}
    for mention in linked.mentions:
        category = highlight_category(mention)
        entities.append({"entity": category, "start": mention.start_char, "end": mention.end_char})
        colour_map[category] = colours[mention.label] if mention.best else UNLINKED_COLOUR
    return {"text": linked.text, "entities": entities}, colour_map


def score_text(score: float) -> str:
    """Scores as fixed three-decimal text, so a column of them lines up and 1.000 reads as a score."""
    return f"{score:.3f}"


MENTION_COLUMNS = ["Mention", "Type", "Long form", "Rank", "Concept ID", "Concept name", "Score", "Linked"]


def mention_rows(linked: LinkedText) -> List[List[object]]:
    """One row per (mention, candidate); a mention with no candidate still gets a row."""
    rows: List[List[object]] = []
    for mention in linked.mentions:
        long_form = mention.long_form or ""
        if not mention.candidates:
            rows.append([mention.text, mention.label, long_form, "", "", "", "", "no candidate"])
            continue
        for rank, cand in enumerate(mention.candidates, 1):
            linked_mark = "✓" if rank == 1 and mention.best is not None else (
                "below threshold" if rank == 1 else "")
            rows.append([mention.text, mention.label, long_form, rank, cand.concept_id, cand.canonical_name,
                         score_text(cand.score), linked_mark])
    return rows


def link_summary(linked: LinkedText, ner_source: str) -> str:
    """One line of Markdown that says what was found and how."""
    if not linked.mentions:
        return (f"No mentions found by the {ner_source}. "
                "Try one of the examples, or use the Neighbours tab to look up any name.")
    return (f"**{len(linked.mentions)}** mention(s) found by the {ner_source}; **{linked.n_linked}** linked "
            f"at threshold {linked.threshold:.2f}. Grey mentions score below the threshold.")


# --- neighbours of a name -------------------------------------------------------------------
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
    out = []
    for score, row in zip(scores[0], rows[0]):
        if row < 0:
            continue
        cid = space.index.concept_ids[int(row)]
        out.append(Neighbour(len(out) + 1, space.index.names[int(row)], cid, _canonical_name(space.kb, cid),
                             float(score)))
    return out


NEIGHBOUR_COLUMNS = ["Rank", "KB name", "Concept ID", "Concept name", "Cosine"]


def neighbour_rows(neighbours: Sequence[Neighbour]) -> List[List[object]]:
    return [[n.rank, n.name, n.concept_id, n.canonical_name, score_text(n.score)] for n in neighbours]


COMPACT_NEIGHBOUR_COLUMNS = ["Rank", "KB name", "Concept", "Cosine"]


def compact_neighbour_rows(neighbours: Sequence[Neighbour]) -> List[List[object]]:
    """Four columns, for the narrower side-by-side tables of the compare view."""
    return [[n.rank, n.name, f"{n.concept_id} {n.canonical_name}".strip(), score_text(n.score)] for n in neighbours]


# --- 2-D projection -------------------------------------------------------------------------
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
    """Project rows onto their first two principal components (SVD of the centred matrix).

    Deterministic up to the sign of each axis, which is fixed so the largest loading is
    positive; fewer than two informative dimensions give zeros rather than an error.
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError("pca_2d needs a non-empty 2-D array")
    centred = x - x.mean(axis=0, keepdims=True)
    if x.shape[0] < 2 or not np.any(centred):
        return np.zeros((x.shape[0], 2)), (0.0, 0.0)
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    comps = vt[:2]
    signs = np.sign(comps[np.arange(comps.shape[0]), np.argmax(np.abs(comps), axis=1)])
    signs[signs == 0] = 1.0
    coords = centred @ (comps * signs[:, None]).T
    if coords.shape[1] < 2:
        coords = np.hstack([coords, np.zeros((coords.shape[0], 2 - coords.shape[1]))])
    total = float((s ** 2).sum()) or 1.0
    explained = tuple(float(v) for v in (s[:2] ** 2) / total)
    explained = explained + (0.0,) * (2 - len(explained))
    return coords, (explained[0], explained[1])


def neighbourhood_projection(space: EmbeddingSpace, query: str, neighbours: Sequence[Neighbour],
                             max_concepts: int = 6, max_names_per_concept: int = 12) -> Projection:
    """The query, its neighbours and the other names of their concepts, projected to 2-D.

    This is the SapBERT paper's Figure 1 for one query: after self-alignment the names of a
    concept form one tight cluster and the query lands inside the right one.
    """
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
    names = {cid: _canonical_name(space.kb, cid) for cid in concepts}
    return Projection(points, explained, names)


# --- two spaces side by side -------------------------------------------------------------------
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
