"""Is a predicted concept the gold one? The rule every score of this project uses.

A linker answers with a KB ``concept_id`` (``D006973|OMIM:145500``: a concept with
equivalent IDs); a corpus gives gold IDs one at a time (``OMIM:145500``), in the spelling
of :mod:`spacy_sapbert.kb.ids`. Comparing the strings would miss every gold ID that
is an equivalent rather than the primary one, so both sides go through the KB
(:meth:`~spacy_sapbert.kb.knowledge_base.KnowledgeBase.resolve`) here, once, for the Acc@k evaluation
and the end-to-end NER + linking scores alike.

Without a KB (``kb=None``) the IDs compare as written: the predicted ID splits on ``|`` only and
meets the gold IDs as they are. That is SapBERT's ``check_label``, the rule of the published
BioSyn-format Acc@k (:mod:`spacy_sapbert.formats.biosyn`: its scoring, the re-ranker's and the
generative linker's data): a ``+`` composite dictionary entry (``D009468+D030342``) is one ID, which
meets none of a composite query's gold parts; ``MESH:D1`` is not ``D1``, nor ``d1``; a ``-1`` gold
(no concept) meets nothing.
"""
from __future__ import annotations

from typing import Iterable, Optional, Tuple

from spacy_sapbert.kb.knowledge_base import ID_SEPARATOR, KnowledgeBase


def concept_ids(any_id: str, kb: Optional[KnowledgeBase]) -> Tuple[str, ...]:
    """Every ID of the concept ``any_id`` names in ``kb``, its primary ID first.

    ``any_id`` is a single ID or a joined ``concept_id``; an ID the KB lacks (or no KB)
    stands for itself: its own ``|``-separated parts.
    """
    concept = kb.resolve(any_id) if kb is not None else None
    if concept is not None:
        return concept.ids
    return tuple(any_id.split(ID_SEPARATOR))


def concept_key(any_id: str, kb: Optional[KnowledgeBase]) -> str:
    """One string per concept (its primary ID), so that equivalent IDs compare equal."""
    return concept_ids(any_id, kb)[0]


def is_gold(predicted: str, gold: Iterable[str], kb: Optional[KnowledgeBase]) -> bool:
    """Whether the predicted concept carries one of the ``gold`` IDs (through ``kb``; as written without one)."""
    return not set(gold).isdisjoint(concept_ids(predicted, kb))


__all__ = ["concept_ids", "concept_key", "is_gold"]
