"""Generative linking as the ``sapbert_linker`` pipe's first stage (``get_candidates``).

``sapbert.GenerativeCandidates.v1`` puts GenBioEL's constrained decoding where the dense search
would be (:mod:`spacy_sapbert.linking.stages`): each mention is decoded into one of the names of
the KB the pipe links to (:mod:`spacy_sapbert.generative.kb_names`, as the ``genbioel_linker``
pipe decodes), so a KB swap needs no other change; the concepts of the best beams are its
candidates. Their scores, ``exp(mean token log-probability)`` in (0, 1], are taken as
probabilities: the dense calibration is not applied and ``threshold`` compares them as they are.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Tuple

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
                 device: str = "cpu") -> None:
        from spacy_sapbert.errors import InputError

        if not model:
            raise InputError("sapbert.GenerativeCandidates.v1 needs its 'model' (a folder from "
                             "`sapbert generative train`)", field="model")
        for key, value in (("beams", beams), ("top", top)):
            if value < 1:
                raise InputError(f"sapbert.GenerativeCandidates.v1: {key} must be >= 1, got {value}", field=key)
        self.model_path, self.beams, self.top, self.context_chars, self.device = model, beams, top, context_chars, device
        self._model: Any = None
        self._tries: Dict[int, Tuple[KnowledgeBase, "NameTrie"]] = {}

    @property
    def model(self) -> "GenerativeModel":
        if self._model is None:
            from spacy_sapbert.generative.seq2seq import GenerativeModel

            self._model = GenerativeModel.load(self.model_path, device=self.device)
        return self._model

    def trie(self, kb: KnowledgeBase) -> "NameTrie":
        """The trie over ``kb``'s names, built once per KB (the KB is kept, so its id is never reused)."""
        if id(kb) not in self._tries:
            self._tries[id(kb)] = (kb, kb_name_trie(self.model, kb))
        return self._tries[id(kb)][1]

    def __call__(self, linker: "Linker", mentions: Mentions) -> List[Ranked]:
        trie, kb = self.trie(linker.kb), linker.kb
        out = []
        for i, (span, text) in enumerate(zip(mentions.spans, mentions.texts)):
            allowed = mentions.types[i] if mentions.types is not None else None
            found = [(cid, score) for cid, score in generated_concepts(
                self.model, trie, span.doc.text, span.start_char, span.end_char, text, beams=self.beams,
                top=self.top, context_chars=self.context_chars)
                if allowed is None or set(kb[cid].types) & allowed]
            out.append(Ranked(found, True, tuple(kb[cid].canonical_name for cid, _ in found)))
        return out

    def __repr__(self) -> str:
        return f"GenerativeCandidates({self.model_path!r}, beams={self.beams}, top={self.top})"


@registry.misc("sapbert.GenerativeCandidates.v1")
def make_generative_candidates(model: str, beams: int = 5, top: int = 5, context_chars: int = CONTEXT_CHARS,
                               device: str = "cpu") -> GenerativeCandidates:
    """``get_candidates`` = generative linking (see the module); ``model``: a ``sapbert generative train`` folder.
    Candidates of a type the span's label does not allow are dropped."""
    return GenerativeCandidates(model, beams, top, context_chars, device)


__all__ = ["GenerativeCandidates", "generated_concepts", "kb_name_trie", "make_generative_candidates"]
