"""The Link text tab as plain data: run the pipeline over a text and collect, per mention, its
candidates, its long form and whether it reaches the threshold; then the highlighted view, the
table and the one-line summary the page shows.

Nothing here imports Gradio (nor do :mod:`demo.neighbours` and :mod:`demo.projection`, the
other tabs' counterparts): every view is a function over an ``nlp`` or an
:class:`~demo.spaces.EmbeddingSpace` that returns dataclasses and lists, so the behaviour is
tested without a browser and the layout in :mod:`spacy_sapbert.demo.app` stays a thin shell.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from spacy_sapbert.kb.knowledge_base import KnowledgeBase

from .inputs import MAX_TEXT_CHARS, check_k, check_text, check_threshold
from .spaces import canonical_name, score_text

logger = logging.getLogger(__name__)

UNLINKED = "no concept"
# One colour per entity type; types beyond the palette cycle through it.
TYPE_PALETTE = ["#f4a261", "#7ec8e3", "#b5e48c", "#e5989b", "#cdb4db", "#ffd166", "#90be6d", "#a3c4f3"]
UNLINKED_COLOUR = "#d9d9d9"


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
            Candidate(cid, canonical_name(kb, cid), float(score)) for cid, score in list(raw)[:top_k])
        mentions.append(LinkedMention(span.text, span.start_char, span.end_char, span.label_ or "ENTITY",
                                      long_forms.get((span.start_char, span.end_char)), candidates, threshold))
    abbreviations = sorted(set(_abbreviation_pairs(doc).values()))
    return LinkedText(text, mentions, abbreviations, threshold, top_k)


def _abbreviation_pairs(doc) -> Dict[Tuple[int, int], Tuple[str, str]]:
    """(start_char, end_char) of each short form → (short form, long form)."""
    from spacy_sapbert.pipes.abbreviations import abbreviation_pairs

    return {(short.start_char, short.end_char): (short.text, long_form)
            for short, long_form in abbreviation_pairs(doc)}


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
