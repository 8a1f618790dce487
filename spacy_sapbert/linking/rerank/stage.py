"""The linker's optional second stage: the context re-ranker over the dense top k, adaptively.

The dense first stage ranks concepts by the mention string alone. When a
:class:`~spacy_sapbert.linking.rerank.model.Reranker` is given, the first ``k`` concepts (the
re-ranker's own ``k``) of each mention are re-scored by the cross-encoder, which reads the
mention in its document and each candidate's best-matching name and canonical name.

**Adaptive.** The cross-encoder costs ``k`` transformer passes per mention, the first stage
one. Where the first stage is sure, re-ranking rarely changes the answer, so a mention is
re-ranked only when its best two concepts are closer than ``max_gap`` in cosine
(:func:`needs_rerank`; None: every mention with two or more candidates). What share of the
mentions that is, and what it costs in accuracy, is measured by ``benchmarks/accuracy_throughput.py``.

**Scores.** A re-ranked mention's scores are the re-ranker's probabilities over its ``k``
candidates, ``softmax((model + w · cosine) / T)`` (``w`` = ``first_stage_weight``, ``T`` =
``temperature``, both in ``reranker.json``, fitted on dev). A mention left to the first stage
gets the same formula without the model's term, ``softmax(w · cosine / T)``: the distribution
the re-ranker starts from and corrects, so every score in ``kb_ents`` is a probability of the
same scale and one threshold serves both. For a re-ranker trained without the first stage's
cosines (``w`` = 0) that formula is uniform, so mentions left to the first stage keep their
cosines (and scores then mix two scales: prefer a re-ranker with ``w`` > 0).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.linking.rerank.inputs import MentionContext, candidate_text

if TYPE_CHECKING:  # imports torch, which a pipe without a re-ranker never needs
    from spacy_sapbert.linking.rerank.model import Reranker

logger = logging.getLogger(__name__)

NamedCandidate = Tuple[str, float, str]
"""(concept ID, first-stage cosine, the concept's best-matching name): :meth:`Linker.named_candidates`."""


class Ranked(NamedTuple):
    """A mention's candidates after a stage, and whether their scores are probabilities."""

    candidates: List[Tuple[str, float]]
    probabilities: bool
    names: Tuple[str, ...] = ()
    """Each candidate's best-matching name, where the stage knows it (the first stage's: what the re-ranker reads)."""


def needs_rerank(cosines: Sequence[float], max_gap: Optional[float]) -> bool:
    """Whether a mention whose concepts score ``cosines`` (best first) goes to the re-ranker:
    it has two or more candidates and, with a ``max_gap``, its best two are closer than that."""
    if len(cosines) < 2:
        return False
    return max_gap is None or float(cosines[0]) - float(cosines[1]) < max_gap


def kb_canonical_names(kb: KnowledgeBase) -> Callable[[str], str]:
    """Concept ID → its canonical name in ``kb`` ("" for an ID it lacks)."""
    def canonical_name(concept_id: str) -> str:
        concept = kb.get(concept_id)
        return concept.canonical_name if concept is not None else ""

    return canonical_name


def span_contexts(spans: Sequence[Any], texts: Sequence[str]) -> List[MentionContext]:
    """The context the re-ranker reads for each span (its document and offsets), searched as ``texts``
    (an abbreviation's long form, say)."""
    return [MentionContext(span.doc.text, span.start_char, span.end_char, normalize(text))
            for span, text in zip(spans, texts)]


class ContextReranking:
    """Re-ranks the first stage's candidates of mentions in context (see the module's text)."""

    def __init__(self, reranker: "Reranker", canonical_name: Callable[[str], str],
                 max_gap: Optional[float] = None) -> None:
        self.reranker = reranker
        self.canonical_name = canonical_name
        """Concept ID → its canonical name (:func:`kb_canonical_names` for a KB), read with each candidate."""
        self.max_gap = max_gap
        self.reranked = 0
        """Mentions sent to the cross-encoder so far."""
        self.kept = 0
        """Mentions left to the first stage so far (one candidate, or a gap of at least ``max_gap``)."""

    @property
    def k(self) -> int:
        return int(self.reranker.settings.k)

    def apply(self, contexts: Sequence[MentionContext], found: Sequence[Sequence[NamedCandidate]]) -> List[Ranked]:
        """Per mention, ``[(concept_id, score), …]`` best first, at most ``k``: re-ranked where
        :func:`needs_rerank` says so (one batched cross-encoder call), the first stage's order elsewhere.

        ``found`` is the first stage's output (:meth:`Linker.named_candidates`); this stage never
        calls the first: the pipe chains them, then applies the linker's threshold and cut-off."""
        if len(contexts) != len(found):
            raise ValueError(f"{len(contexts)} contexts for {len(found)} candidate lists")
        settings = self.reranker.settings
        tops = [list(candidates[: self.k]) for candidates in found]
        chosen = [i for i, top in enumerate(tops) if needs_rerank([c[1] for c in top], self.max_gap)]
        out = [self._first_stage(top) for top in tops]
        self.reranked += len(chosen)
        self.kept += len(tops) - len(chosen)
        if not chosen:
            return out
        texts = [[candidate_text(name, self.canonical_name(cid), settings.separator) for cid, _, name in tops[i]]
                 for i in chosen]
        cosines = [[score for _, score, _ in tops[i]] for i in chosen]
        probabilities = self.reranker.probabilities([contexts[i] for i in chosen], texts, first_stage=cosines)
        for i, probs in zip(chosen, probabilities):
            out[i] = Ranked([(tops[i][j][0], float(probs[j])) for j in self.reranker.order(probs)], True)
        return out

    def _first_stage(self, top: Sequence[NamedCandidate]) -> Ranked:
        from spacy_sapbert.linking.rerank.model import softmax

        weight = self.reranker.settings.first_stage_weight
        if not top or not weight:
            return Ranked([(cid, float(score)) for cid, score, _ in top], False)
        probs = softmax(weight * np.asarray([score for _, score, _ in top]), self.reranker.settings.temperature)
        return Ranked([(cid, float(p)) for (cid, _, _), p in zip(top, probs)], True)

    def __repr__(self) -> str:
        return f"ContextReranking({self.reranker!r}, max_gap={self.max_gap}, reranked={self.reranked}, kept={self.kept})"
