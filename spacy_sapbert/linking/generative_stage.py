"""Generative linking as the ``sapbert_linker`` pipe's first stage (``get_candidates``).

``sapbert.GenerativeCandidates.v1`` puts GenBioEL's constrained decoding where the dense search
would be (:mod:`spacy_sapbert.linking.stages`): each mention is decoded into one of the names of
the KB the pipe links to (:mod:`spacy_sapbert.generative.kb_names`, as the ``genbioel_linker``
pipe decodes), so a KB swap needs no other change; the concepts of the best beams are its
candidates. Their scores, ``exp(mean token log-probability)`` in (0, 1], are taken as
probabilities: the dense calibration is not applied and ``threshold`` compares them as they are
(the context re-ranker, which reads cosines, refuses them).

The stage is configuration, not a part of the pipe: ``nlp.to_disk`` saves the encoder, KB and index
but not the generative model, which the saved config names by its path (an absolute one travels
best); the pipe still builds or loads its dense index, which this stage does not search (give the
pipe an ``index`` to skip building one).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from spacy.util import registry

from spacy_sapbert.generative import CONTEXT_CHARS
from spacy_sapbert.generative.kb_names import generated_concepts, kb_name_trie
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.linking.stages import Mentions, Ranked

if TYPE_CHECKING:  # torch and transformers load with the model, not with the pipe
    from spacy_sapbert.generative.seq2seq import GenerativeModel
    from spacy_sapbert.generative.trie import NameTrie
    from spacy_sapbert.linking.linker import Linker


class GenerativeCandidates:
    """The stage: a :data:`~spacy_sapbert.linking.stages.CandidateStage` that loads its model on first use."""

    def __init__(self, model: str, beams: int = 5, top: int = 5, context_chars: int = CONTEXT_CHARS,
                 device: Optional[str] = None) -> None:
        from spacy_sapbert.errors import InputError

        if not model:
            raise InputError("sapbert.GenerativeCandidates.v1 needs its 'model' (a folder from "
                             "`sapbert generative train`)", field="model")
        for key, value in (("beams", beams), ("top", top)):
            if value < 1:
                raise InputError(f"sapbert.GenerativeCandidates.v1: {key} must be >= 1, got {value}", field=key)
        self.model_path, self.beams, self.top, self.context_chars, self.device = model, beams, top, context_chars, device
        self._model: Any = None
        self._trie: Optional[Tuple[KnowledgeBase, "NameTrie"]] = None

    def load(self, device: str) -> "GenerativeModel":
        """The model, loaded on first use onto ``self.device`` or, without one, ``device`` (the pipe's encoder's:
        ``sapbert annotate --device cuda`` moves both)."""
        if self._model is None:
            from spacy_sapbert.generative.seq2seq import GenerativeModel

            self._model = GenerativeModel.load(self.model_path, device=self.device or device)
        return self._model

    def trie(self, kb: KnowledgeBase) -> "NameTrie":
        """The trie over ``kb``'s names, built when the pipe's KB is first seen (a KB swapped in replaces it)."""
        if self._trie is None or self._trie[0] is not kb:
            self._trie = (kb, kb_name_trie(self._model, kb))
        return self._trie[1]

    def __call__(self, linker: "Linker", mentions: Mentions) -> List[Ranked]:
        model, kb = self.load(linker.encoder.device), linker.kb
        trie = self.trie(kb)
        out = []
        for i, (span, text) in enumerate(zip(mentions.spans, mentions.texts)):
            allowed = mentions.types[i] if mentions.types is not None else None
            found = [(cid, score) for cid, score in generated_concepts(
                model, trie, span.doc.text, span.start_char, span.end_char, text, beams=self.beams,
                top=self.top, context_chars=self.context_chars)
                if allowed is None or set(kb[cid].types) & allowed]
            # the concept's canonical name stands for the name generated (generate() keeps concepts only)
            out.append(Ranked(found, True, tuple(kb[cid].canonical_name for cid, _ in found)))
        return out

    def __repr__(self) -> str:
        return f"GenerativeCandidates({self.model_path!r}, beams={self.beams}, top={self.top})"


@registry.misc("sapbert.GenerativeCandidates.v1")
def make_generative_candidates(model: str, beams: int = 5, top: int = 5, context_chars: int = CONTEXT_CHARS,
                               device: Optional[str] = None) -> GenerativeCandidates:
    """``get_candidates`` = generative linking (see the module); ``model``: a ``sapbert generative train`` folder;
    ``device``: null for the pipe's. Of the ``top`` concepts generated, those of a type the span's label does
    not allow are dropped (so a span can get none where the dense stage would search within its types)."""
    return GenerativeCandidates(model, beams, top, context_chars, device)


__all__ = ["GenerativeCandidates", "generated_concepts", "kb_name_trie", "make_generative_candidates"]
