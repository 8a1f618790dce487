"""What the ``sapbert_linker`` pipe's ``predict`` does with one batch's spans, apart from spaCy's side.

The pipe gathers the spans of a batch of documents and their queries (:mod:`.linker_spans`); this runs them
through the candidate stages together, so the encoder sees one batch: the parts of coordinated spans with them
(``split_composites``), a span without a concept by an exact name the KB lacks (``exact_names``), a disease span
still without one again as its head (``head_fallback``), and the annotated-names table's coordinated wordings as
parts. The pipe hands its loaded parts in, so nothing here
loads a model.
"""
from __future__ import annotations

from typing import Any, Callable, List, Mapping, Optional, Sequence

from spacy.tokens import Span

from spacy_sapbert.linking.annotated_names import AnnotatedNames
from spacy_sapbert.linking.exact_names import ExactNames
from spacy_sapbert.linking.head_fallback import link_heads
from spacy_sapbert.linking.linker import Linker
from spacy_sapbert.linking.settings import LinkerSettings
from spacy_sapbert.linking.stages import Mentions, mention_thresholds, run_stages
from spacy_sapbert.pipes.linker_spans import SpanCandidates, add_composite_parts, with_parts


def link_batch(spans: List[Span], texts: List[str], labels: Sequence[str], *, stages: Mapping[str, Callable[..., Any]],
               linker: Linker, reranking: Any, table: Optional[AnnotatedNames], exact: Optional[ExactNames],
               settings: LinkerSettings, exclusions: Callable[[], Any]) -> List[SpanCandidates]:
    """One result per span (``texts[i]`` is span ``i``'s query, ``labels[i]`` its label), each holding its parts'
    results. ``exclusions`` gives the pipeline's dictionary exclusions, which heads are never; it is called only
    when ``head_fallback`` is set."""
    whole = len(texts)
    labels = list(labels)
    types = linker.types_for(labels)
    owners: List[int] = []  # per coordinated part (linked after the spans), the span it belongs to
    if settings.split_composites:
        owners = add_composite_parts(spans, texts, types, linker)
        labels += [labels[i] for i in owners]
    thresholds = mention_thresholds(labels, linker.threshold, settings.label_thresholds)

    def run(mentions: Mentions, at: Sequence[Optional[float]]) -> list:
        return run_stages(stages, linker, reranking, table, mentions, at)

    results = run(Mentions(spans, texts, types), thresholds)
    if exact is not None:  # a whole span's exact name, before its head
        results = exact.apply(texts, types, results, thresholds)
    if settings.head_fallback:
        link_heads(Mentions(spans, texts, types), labels[:whole], results, thresholds, settings.head_fallback,
                   exclusions(), run)
    linked = with_parts(results, texts, owners, whole)
    if table is not None and settings.split_composites:  # a wording annotated as one coordinated mention
        table.write_parts(linked, texts[:whole], types[:whole], thresholds[:whole])
    return linked


__all__ = ["link_batch"]
