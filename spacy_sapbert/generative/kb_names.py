"""Generative linking against a knowledge base: the one way both generative pipes generate.

The ``genbioel_linker`` pipe and the ``sapbert_linker`` stage ``sapbert.GenerativeCandidates.v1``
(:mod:`spacy_sapbert.linking.generative_stage`) decode each mention into one of the KB's names:
the mention normalised as training normalised it and cut with its context as training cut it,
the trie over every normalised name of the KB. Scores are the exponential of a beam's mean
token log-probability, in (0, 1].
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, List, Tuple

from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize

if TYPE_CHECKING:  # torch and transformers load with the model, not with the pipe
    from spacy_sapbert.generative.seq2seq import GenerativeModel
    from spacy_sapbert.generative.trie import NameTrie


def kb_name_trie(model: "GenerativeModel", kb: KnowledgeBase) -> "NameTrie":
    """The trie of every normalised name of ``kb`` (what the model was trained to write)."""
    pairs = {(normalize(name), concept.concept_id) for concept in kb for name in concept.names}
    return model.build_trie(sorted(pair for pair in pairs if pair[0]))


def generated_concepts(model: "GenerativeModel", trie: "NameTrie", document: str, start: int, end: int,
                       text: str, *, beams: int, top: int, context_chars: int) -> List[Tuple[str, float]]:
    """The best ``top`` concepts for the mention ``document[start:end]`` searched as ``text``:
    (concept ID, exp of the beam's mean token log-probability), best first; [] for a text that
    normalises to nothing."""
    from spacy_sapbert.generative.seq2seq import Mention

    query = normalize(text)
    if not query:
        return []
    mention = Mention.around(document, start, end, query, context_chars)
    return [(cid, round(math.exp(score), 6)) for cid, score in model.generate(mention, trie, beams=beams, top=top)]


__all__ = ["generated_concepts", "kb_name_trie"]
