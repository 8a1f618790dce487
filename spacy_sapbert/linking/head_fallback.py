"""A span with no concept at the threshold, linked again without its first word (``head_fallback``).

The NER often takes a modifier into a disease span that no KB name has ("delayed neuropathy", "prolonged
coma", "adenovirus pneumonia"), and the whole then scores below the threshold while its head is a concept
the annotators would give. The span keeps its words and gets the head's concept, so the NER's output stays
what it was. A head that is a wording the annotators seldom tag with the label ("abnormalities",
"injury", "symptoms": the ``dictionary_entities`` pipe's exclusions) is not tried: most of them are no
concept a reader would state. Measured on BC5CDR dev and NCBI dev (docs/ner.md, "NER + linking").
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

from spacy.tokens import Span

from spacy_sapbert.linking.stages import Mentions

FUNCTION_WORDS = frozenset({"a", "an", "and", "as", "at", "by", "for", "from", "in", "into", "of", "on", "or",
                            "the", "to", "with"})
"""Words a head never starts with: after the first word is dropped, these are dropped too."""

Excludes = Callable[[str, Span], bool]
"""(label, span) → whether the span's words are no head to try for that label."""
LinkMentions = Callable[[Mentions, Sequence[Optional[float]]], List[List[tuple]]]
"""The pipe's stages over some mentions at their thresholds: one (possibly empty) candidate list each."""


def head_of(span: Span) -> Optional[Span]:
    """``span`` without its first word and the function words or punctuation after it; None for a
    one-word span, or when nothing but those would be left."""
    doc, start = span.doc, span.start + 1
    while start < span.end and (doc[start].is_punct or doc[start].lower_ in FUNCTION_WORDS):
        start += 1
    return doc[start:span.end] if start < span.end else None


def link_heads(mentions: Mentions, labels: Sequence[str], results: List[List[tuple]],
               thresholds: Sequence[Optional[float]], fallback_labels: Sequence[str], excludes: Excludes,
               link: LinkMentions) -> int:
    """Give each span of ``mentions`` (the first ``len(labels)``) that has no candidate in ``results``,
    a label of ``fallback_labels`` and its own text as query (an abbreviation linked through its long form
    is left alone) its head's candidates, where the head reaches the span's threshold; ``results`` is
    changed in place. Returns how many spans took their head's concept."""
    wanted = set(fallback_labels)
    todo = []
    for i, label in enumerate(labels):
        span = mentions.spans[i]
        if results[i] or label not in wanted or mentions.texts[i] != span.text:
            continue
        head = head_of(span)
        if head is not None and not excludes(label, head):
            todo.append((i, head))
    if not todo:
        return 0
    types = [mentions.types[i] for i, _ in todo] if mentions.types is not None else None
    found = link(Mentions([head for _, head in todo], [head.text for _, head in todo], types),
                 [thresholds[i] for i, _ in todo])
    taken = 0
    for (i, _), candidates in zip(todo, found):
        if candidates:
            results[i] = candidates
            taken += 1
    return taken


__all__ = ["FUNCTION_WORDS", "head_of", "link_heads"]
