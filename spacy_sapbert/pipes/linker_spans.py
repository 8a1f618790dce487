"""What the ``sapbert_linker`` pipe reads from a document's spans and writes back to them.

Kept apart from the pipe (:mod:`spacy_sapbert.pipes.linker`) because both rules are about spaCy's
span objects, not about linking: which text stands for a span (its abbreviation's long form), and
how candidates reach ``span._.kb_ents`` and ``span.kb_id_`` on documents that hand out copies of
their spans.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span, SpanGroup

from spacy_sapbert.linking.composite import composite_parts
from spacy_sapbert.linking.linker import Candidates, Linker
from spacy_sapbert.linking.type_filter import TypeSet
from spacy_sapbert.linking.settings import LinkerSettings
from spacy_sapbert.pipes.abbreviations import abbreviation_pairs
from spacy_sapbert.pipes.dictionary import DictionaryEntities

logger = logging.getLogger(__name__)


class SpanCandidates(list):
    """One span's candidates, ``[(concept_id, score), …]`` as before, and ``parts``: for a coordinated
    span, each concept it names with its own candidates, ``[(part text, candidates), …]``."""

    def __init__(self, candidates: Sequence[Tuple[str, float]] = (), parts: Sequence[Tuple[str, list]] = ()) -> None:
        super().__init__(candidates)
        self.parts: List[Tuple[str, list]] = list(parts)


def parts_extension(extension: str) -> str:
    """The span extension of a coordinated span's parts: ``<extension>_parts`` (``kb_ents_parts``)."""
    return f"{extension}_parts"


def add_composite_parts(spans: List[Span], texts: List[str], types: Optional[List[Optional[TypeSet]]],
                        linker: Linker) -> List[int]:
    """Append the parts of every coordinated text (:func:`~spacy_sapbert.linking.composite.composite_parts`,
    with the names of the linker's index; ``types``: per text, the KB types its label links to) to the
    lists, with its span and types; return, per part, the index of its span."""
    owners = []
    for i, part in list(composite_parts(texts, linker.kb, types, linker.index.concepts_named)):
        spans.append(spans[i])
        texts.append(part)
        if types is not None:
            types.append(types[i])
        owners.append(i)
    return owners


def with_parts(results: Sequence[Candidates], texts: Sequence[str], owners: Sequence[int],
               whole: int) -> List[SpanCandidates]:
    """The first ``whole`` results, one per span, each holding the results of its parts (those after ``whole``)."""
    linked = [SpanCandidates(result) for result in results[:whole]]
    for owner, text, result in zip(owners, texts[whole:], results[whole:]):
        linked[owner].parts.append((text, list(result)))
    return linked


def span_queries(spans: List[Span], resolve_abbreviations: bool = True) -> Tuple[List[Span], List[str], List[str]]:
    """The spans, and the text to link per span: an abbreviation's long form when the span is a short form
    (found at the span's offsets, else by its text), the span's text otherwise; and the
    span's label, which sets the types searched, the short form's own when its long form
    is linked (the long form may be no entity at all, or labelled otherwise)."""
    labels = [span.label_ for span in spans]
    if not resolve_abbreviations or not spans:
        return spans, [span.text for span in spans], labels
    long_forms: Dict[Any, str] = {}
    for short, long_form in abbreviation_pairs(spans[0].doc):
        long_forms.setdefault((short.start_char, short.end_char), long_form)
        long_forms.setdefault(short.text, long_form)
    texts = [long_forms.get((s.start_char, s.end_char)) or long_forms.get(s.text) or s.text for s in spans]
    return spans, texts, labels


def pipeline_exclusions(nlp: Optional[Language]) -> Callable[[str, Span], bool]:
    """(label, span) → whether the span's words are an exclusion of ``nlp``'s ``dictionary_entities`` pipe
    (``DictionaryEntities.excludes``): the heads ``head_fallback`` does not try. Nothing is excluded in a
    pipeline without that pipe."""
    dictionary = next((pipe for _, pipe in (nlp.pipeline if nlp is not None else [])
                       if isinstance(pipe, DictionaryEntities)), None)
    return dictionary.excludes if dictionary is not None else (lambda label, span: False)


def write_candidates(doc: Doc, spans: List[Span], results: Sequence[Candidates], settings: LinkerSettings) -> None:
    """``span._.<extension>`` for each span and, with ``set_kb_id``, the best concept as ``kb_id``."""
    if len(spans) != len(results):
        raise ValueError(f"{len(results)} results for {len(spans)} spans")
    if settings.set_kb_id and any(results):
        # doc.ents and span groups hand out copies: kb_id is written by replacing the spans.
        relabelled = [Span(doc, s.start, s.end, label=s.label, kb_id=r[0][0] if r else s.kb_id, span_id=s.id)
                      for s, r in zip(spans, results)]
        if settings.spans_key is None:
            doc.set_ents(relabelled, default="unmodified")
            spans = list(doc.ents)
        else:
            group = doc.spans[settings.spans_key]
            doc.spans[settings.spans_key] = SpanGroup(doc, name=group.name, attrs=dict(group.attrs),
                                                      spans=relabelled)
            spans = list(doc.spans[settings.spans_key])
    parts = parts_extension(settings.extension)
    for span, result in zip(spans, results):
        span._.set(settings.extension, list(result))
        span._.set(parts, [(text, list(found)) for text, found in getattr(result, "parts", [])])


def warn_missing_group(pipe_name: str, spans_key: str, doc: Doc) -> None:
    """Say that ``spans_key`` names no span group of ``doc`` (a misspelt or unset group otherwise
    looks like "no entities"); the pipe says it once."""
    groups = sorted(doc.spans)
    logger.warning("%s: spans_key %r names a span group that this doc does not have (%s), so none of its "
                   "spans are linked; set spans_key to the group your span pipe writes, or to null to link "
                   "doc.ents (warned once per pipe)", pipe_name, spans_key,
                   f"its groups: {groups}" if groups else "it has no span groups")


__all__ = ["SpanCandidates", "add_composite_parts", "parts_extension", "with_parts", "span_queries", "warn_missing_group", "write_candidates"]
