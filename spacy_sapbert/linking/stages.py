"""The linker's candidate stages, as functions registered in spaCy's ``misc`` registry and named in the config.

spaCy's own ``entity_linker`` takes its candidate generator from its config
(``get_candidates = {"@misc": "spacy.CandidateGenerator.v1"}``), so that another one is a config
change, not a subclass. ``sapbert_linker`` does the same for each of its three stages, and the
pipe chains them; no stage calls another::

    get_candidates     mentions → ranked concepts, each with the name that matched
                       sapbert.DenseCandidates.v1 (default): the encoder, the index, the top k
                       sapbert.GenerativeCandidates.v1: constrained decoding over the KB's names
    rerank_candidates  the first stage's candidates → re-ranked in context
                       sapbert.ContextRerank.v1 (default): the pipe's re-ranker (``rerank``),
                       passes the candidates on when the pipe has none
    (the pipe)         calibration, ``threshold``, ``max_entities_per_mention``: Linker.select
    prefer_annotated   the selected concepts → with what annotators linked the wording to first
                       sapbert.AnnotatedNames.v1 (default): the pipe's annotated-names table,
                       passes the concepts on when the pipe has none

Each registered function takes the stage's options and returns the stage: a callable with the
signature of its slot (:data:`CandidateStage`, :data:`RerankStage`, :data:`AnnotatedStage`) that
gives one result per mention (the pipe checks) and keeps to each mention's ``types`` (the pipe
does not filter again: the dense stage searches within them).
The stage gets the parts it works with (the linker; the re-ranker; the table) from the pipe,
which loads and saves them, as spaCy's candidate generator gets the pipe's KB. A user's own
stage is registered the same way::

    @spacy.registry.misc("my.ExactNames.v1")
    def make_exact_names():
        def exact_names(linker, mentions):  # concepts with a name equal to the mention (of its types)
            return [Ranked([(cid, 1.0) for cid in linker.kb.alias_to_concepts.get(normalize(text), [])
                            if types is None or set(linker.kb[cid].types) & types], True)
                    for text, types in zip(mentions.texts, mentions.types or [None] * len(mentions.texts))]
        return exact_names

    nlp.add_pipe("sapbert_linker", config={"get_candidates": {"@misc": "my.ExactNames.v1"}})
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence

from spacy.util import registry

from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.linker import Candidates
from spacy_sapbert.linking.rerank.inputs import MentionContext
from spacy_sapbert.linking.rerank.stage import ContextReranking, NamedCandidate, Ranked, span_contexts
from spacy_sapbert.linking.type_filter import TypeSet

if TYPE_CHECKING:
    from spacy_sapbert.linking.annotated_names import AnnotatedNames
    from spacy_sapbert.linking.linker import Linker


class Mentions(NamedTuple):
    """The spans of a batch of documents as every stage reads them."""

    spans: Sequence[Any]
    """The spaCy spans (their documents are the context)."""
    texts: Sequence[str]
    """What is searched for each span: its text, or its abbreviation's long form; with ``split_composites``
    the parts of coordinated spans follow the spans, each with its span repeated in ``spans``."""
    types: Optional[Sequence[Optional[TypeSet]]]
    """Per span, the KB types its concept must have one of (None: any), from its label."""

    def contexts(self) -> List[MentionContext]:
        return span_contexts(self.spans, self.texts)


CandidateStage = Callable[["Linker", Mentions], List[Ranked]]
"""``get_candidates``: per mention, concepts of its types best first; ``Ranked.names`` holds the name
that matched (what a re-ranker reads) and ``probabilities`` says whether the scores are probabilities
already (if not, they are cosines: the re-ranker reads them as such, and the linker's calibration
turns them into probabilities)."""
RerankStage = Callable[[Optional[ContextReranking], Mentions, List[Ranked]], List[Ranked]]
"""``rerank_candidates``: the pipe's re-ranker (None without one), the mentions, the first stage's output."""
AnnotatedStage = Callable[[Optional["AnnotatedNames"], Mentions, List[Candidates], Optional[float], int],
                          List[Candidates]]
"""``prefer_annotated``: the pipe's table (None without one), the mentions, the selected concepts,
the threshold and the cut-off."""

STAGE_CONFIG: Dict[str, Dict[str, str]] = {
    "get_candidates": {"@misc": "sapbert.DenseCandidates.v1"},
    "rerank_candidates": {"@misc": "sapbert.ContextRerank.v1"},
    "prefer_annotated": {"@misc": "sapbert.AnnotatedNames.v1"},
}
"""The stages' config keys and their defaults (the factory's ``default_config``). Each default is a
bare ``@misc`` block, so spaCy's merge of a user's block into it adds no option the user's function lacks."""


def dense_candidates(linker: "Linker", mentions: Mentions) -> List[Ranked]:
    """The dense first stage: each concept among the top ``k`` KB names (of the mention's types),
    scored by its best name's cosine."""
    found = linker.named_candidates(mentions.texts, mentions.types)
    return [Ranked([(cid, score) for cid, score, _ in named], False, tuple(name for _, _, name in named))
            for named in found]


def context_rerank(reranking: Optional[ContextReranking], mentions: Mentions, found: List[Ranked]) -> List[Ranked]:
    """The context re-ranker over the first stage's candidates (:mod:`spacy_sapbert.linking.rerank.stage`);
    without one, the candidates as they came."""
    if reranking is None:
        return found
    if any(ranked.probabilities for ranked in found):
        raise InputError("the context re-ranker reads the first stage's cosines (its features, its max gap), and "
                         "get_candidates gave probabilities; use the dense first stage with 'rerank', or no "
                         "re-ranker", field="rerank")
    return reranking.apply(mentions.contexts(), [named_candidates(ranked, i) for i, ranked in enumerate(found)])


def named_candidates(ranked: Ranked, position: int) -> List[NamedCandidate]:
    """``ranked`` as (concept ID, score, name) triples; a first stage that names no candidate is refused,
    since the re-ranker reads each candidate's name."""
    if ranked.candidates and len(ranked.names) != len(ranked.candidates):
        raise InputError(f"the first stage gave mention {position} {len(ranked.candidates)} candidates and "
                         f"{len(ranked.names)} names; the context re-ranker reads each candidate's name",
                         field="get_candidates")
    return [(cid, score, name) for (cid, score), name in zip(ranked.candidates, ranked.names)]


def annotated_first(table: Optional["AnnotatedNames"], mentions: Mentions, results: List[Candidates],
                    threshold: Optional[float], limit: int) -> List[Candidates]:
    """What annotators linked a wording to, first (:mod:`spacy_sapbert.linking.annotated_names`);
    without a table, the concepts as they came."""
    if table is None:
        return results
    return table.apply(mentions.texts, mentions.types, results, threshold, limit)


@registry.misc("sapbert.DenseCandidates.v1")
def make_dense_candidates() -> CandidateStage:
    """``get_candidates``' default: :func:`dense_candidates`."""
    return dense_candidates


@registry.misc("sapbert.ContextRerank.v1")
def make_context_rerank() -> RerankStage:
    """``rerank_candidates``' default: :func:`context_rerank`."""
    return context_rerank


@registry.misc("sapbert.AnnotatedNames.v1")
def make_annotated_first() -> AnnotatedStage:
    """``prefer_annotated``' default: :func:`annotated_first`."""
    return annotated_first


DEFAULT_STAGES: Dict[str, Callable[..., Any]] = {
    "get_candidates": dense_candidates, "rerank_candidates": context_rerank, "prefer_annotated": annotated_first}
"""What :data:`STAGE_CONFIG`'s blocks resolve to: the stages of a pipe built without a config (``SapBertLinker(nlp)``)."""


def mention_thresholds(labels: Sequence[str], threshold: Optional[float],
                       label_thresholds: Optional[Dict[str, float]]) -> List[Optional[float]]:
    """Per mention, its label's threshold (``label_thresholds``) or else ``threshold``."""
    return [threshold if not label_thresholds else label_thresholds.get(label, threshold) for label in labels]


def lowest(thresholds: Sequence[Optional[float]]) -> Optional[float]:
    """The threshold the stages apply before each mention's own: the lowest (None if one is None)."""
    return None if not thresholds or any(t is None for t in thresholds) else min(thresholds)  # type: ignore


def above(results: Sequence[Candidates], thresholds: Sequence[Optional[float]]) -> List[Candidates]:
    """Each mention's candidates that reach its own threshold."""
    return [list(r) if t is None else [c for c in r if c[1] >= t] for r, t in zip(results, thresholds)]


def run_stages(stages: Mapping[str, Any], linker: "Linker", reranking: Optional[ContextReranking],
               table: Optional["AnnotatedNames"], mentions: Mentions,
               thresholds: Sequence[Optional[float]]) -> List[Candidates]:
    """The pipe's chain: ``get_candidates`` → ``rerank_candidates`` → calibration, threshold and cut-off
    (:meth:`Linker.select`) → ``prefer_annotated``, each checked to give one result per mention; the
    stages run at the lowest of the mentions' ``thresholds``, and each mention keeps what reaches its own."""
    found = one_per_mention(stages["get_candidates"](linker, mentions), mentions, "get_candidates")
    ranked = one_per_mention(stages["rerank_candidates"](reranking, mentions, found), mentions, "rerank_candidates")
    first = lowest(thresholds)
    results = [linker.select(r.candidates, calibrate=not r.probabilities, threshold=first) for r in ranked]
    results = one_per_mention(stages["prefer_annotated"](table, mentions, results, first,
                                                         linker.max_entities_per_mention), mentions, "prefer_annotated")
    return above(results, thresholds)


def one_per_mention(results: Sequence[Any], mentions: Mentions, key: str) -> Sequence[Any]:
    """``results``, if a stage gave one per mention: one more or less would shift every later span's links."""
    if len(results) != len(mentions.texts):
        raise InputError(f"the {key} stage gave {len(results)} results for {len(mentions.texts)} mentions; a stage "
                         "gives one per mention, in order", field=key)
    return results


def check_stages(stages: Dict[str, Any], pipe_name: str) -> None:
    """Refuse a stage that is not callable, naming its config key (a value given where a ``@misc`` block belongs)."""
    for key, stage in stages.items():
        if not callable(stage):
            raise InputError(f"{pipe_name}: {key!r} must be a registered function's block "
                             f"({{\"@misc\": ...}}, e.g. {STAGE_CONFIG[key]}), got {stage!r}", field=key)


__all__ = ["AnnotatedStage", "CandidateStage", "DEFAULT_STAGES", "Mentions", "Ranked", "RerankStage", "STAGE_CONFIG", "annotated_first",
           "above", "check_stages", "context_rerank", "dense_candidates", "lowest", "mention_thresholds", "named_candidates",
           "one_per_mention", "run_stages"]
