"""Systems that read each mention in its abstract: the generative linker, alone or re-scoring the
dense top k, and the cross-encoder re-ranker over the dense top k.

The dense linker and the baselines see only the normalised query strings; these systems see
the same strings *and* the abstract around the mention (``Query.document``, offsets
``start``/``end``), because their models were trained on mentions in context. A composite
query's parts each get the whole mention's context. Everything else is the suite's: the same
dictionary, the same queries, the same scoring, so their rows sit beside the dense linker's.

Specs (``sapbert evaluate -m``):

- ``generative:MODEL``: constrained beam search over a trie of every dictionary name;
- ``DENSE+generative:MODEL``: the dense top ``k`` (8) re-ordered by ``cosine + weight × mean
  token log-probability`` of each candidate's best-matching name (``--generative-weight``);
- ``DENSE+rerank:MODEL``: the dense top ``k`` (the re-ranker's own) re-ordered by the cross-encoder
  (:meth:`spacy_sapbert.linking.rerank.model.Reranker.rerank`: its calibrated margin decides when it may
  override the first stage).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from tqdm import tqdm

from spacy_sapbert.errors import InputError
from spacy_sapbert.generative.seq2seq import CONTEXT_CHARS, Mention
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

from .biosyn import unit_rows
from .dense import DenseLinker
from .queries import Query
from .systems import LinkingSystem, Ranked, RankedParts

RESCORE_K = 8
DEFAULT_GENERATIVE_WEIGHT = 0.02
"""The weight of the generative score picked on NCBI dev for models/generative-ft (metrics/generative)."""
SECOND_STAGES = ("generative", "rerank")

Candidate = Tuple[str, float, str]
"""(concept ID, dense score, the concept's dictionary name nearest to the mention)."""


def parse_spec(spec: str) -> Optional[Tuple[Optional[str], str, str]]:
    """``generative:M`` → (None, "generative", M); ``D+generative:M`` / ``D+rerank:M`` → (D, stage, M);
    anything else → None (a dense model or a baseline)."""
    head, plus, tail = spec.rpartition("+")
    stage, colon, model = (tail if plus else spec).partition(":")
    if not colon or stage.strip().lower() not in SECOND_STAGES:
        return None
    stage, model, dense = stage.strip().lower(), model.strip(), head.strip() if plus else None
    if not model or (plus and not dense):
        raise InputError(f"{spec!r}: expected generative:MODEL, DENSE+generative:MODEL or DENSE+rerank:MODEL",
                         field="model")
    if stage == "rerank" and dense is None:
        raise InputError(f"{spec!r}: the re-ranker re-orders a dense linker's candidates: DENSE+rerank:MODEL",
                         field="model")
    return dense, stage, model


def spec_models(spec: str) -> List[str]:
    """The model folders/names a spec needs (one for a plain spec)."""
    parsed = parse_spec(spec)
    if parsed is None:
        return [spec]
    return [m for m in (parsed[0], parsed[2]) if m]


def make_context_system(spec: str, pooling: Optional[str] = None, device: str = "auto", batch_size: int = 256,
                        label: Optional[str] = None, precision: str = "float32",
                        generative_weight: float = DEFAULT_GENERATIVE_WEIGHT) -> Optional[LinkingSystem]:
    """The system of a ``generative:`` / ``+generative:`` / ``+rerank:`` spec, or None for any other spec."""
    parsed = parse_spec(spec)
    if parsed is None:
        return None
    dense_model, stage, model = parsed
    if dense_model is None:
        if pooling is not None:
            raise InputError("--pooling applies to dense models, not to a generative one", field="pooling")
        return GenerativeSystem(model, device=device, label=label)
    if stage == "generative":
        dense = DenseLinker(dense_model, pooling=pooling, device=device, batch_size=batch_size,
                            max_k=RESCORE_K, precision=precision)
        return DenseRescored(dense, model, weight=generative_weight, device=device, label=label)
    from spacy_sapbert.linking.rerank.model import Reranker

    reranker = Reranker.load(model, device=device, dtype="auto")
    dense = DenseLinker(dense_model, pooling=pooling, device=device, batch_size=batch_size,
                        max_k=max(reranker.settings.k, 5), precision=precision)
    return DenseReranked(dense, reranker, model, label=label)


def mention_context(query: Optional[Query], part: str) -> Tuple[str, int, int]:
    """(text, start, end) of the mention: the abstract and its offsets, or the part alone without one."""
    if query is None or not query.document:
        return part, 0, len(part)
    return query.document, query.start, query.end


def _load_generative(model: str, device: str) -> Any:
    from spacy_sapbert.util.devices import resolve_device
    from spacy_sapbert.generative.seq2seq import GenerativeModel

    return GenerativeModel.load(model, device=resolve_device(device))


def _generative_mention(query: Optional[Query], part: str) -> Mention:
    return Mention.around(*mention_context(query, part), part)


class _InContext(LinkingSystem):
    """Ranks (query, part) pairs one by one; ``rank`` on bare strings uses no context."""

    def _rank(self, queries: List[str], k: int) -> Ranked:
        return [self._rank_one(None, text, k) for text in queries]

    def rank_queries(self, queries: Sequence[Query], k: int) -> List[RankedParts]:
        self._check(k)
        pairs = [(q, p) for q in queries for p in q.parts]
        flat = [self._rank_one(q, p, k) for q, p in tqdm(pairs, desc=self.name, unit="mention")]
        out, at = [], 0
        for query in queries:
            out.append(flat[at:at + len(query.parts)])
            at += len(query.parts)
        return out

    def _rank_one(self, query: Optional[Query], part: str, k: int) -> List[str]:  # pragma: no cover - abstract
        raise NotImplementedError


class GenerativeSystem(_InContext):
    """The generative linker alone: beam search held to the dictionary's names, names → concepts."""

    kind = "generative"

    def __init__(self, model: str, device: str = "auto", beams: int = 5, label: Optional[str] = None) -> None:
        super().__init__()
        self.model_path, self.beams = str(model), beams
        self.model = _load_generative(self.model_path, device)
        self.name = label or f"{Path(self.model_path).name} (generative)"

    def _fit(self, dictionary: KnowledgeBase) -> None:
        self._trie = self.model.build_trie(sorted(set(dictionary.name_concept_pairs())))

    def _rank_one(self, query: Optional[Query], part: str, k: int) -> List[str]:
        found = self.model.generate(_generative_mention(query, part), self._trie, beams=max(self.beams, k), top=k)
        return [cid for cid, _ in found]

    def describe(self) -> Dict[str, Any]:
        return dict(super().describe(), model=self.model_path, beams=self.beams, context_chars=CONTEXT_CHARS,
                    trie_names=self._trie.names if hasattr(self, "_trie") else None)


class _SecondStage(_InContext):
    """The dense linker's top ``k`` (with each concept's nearest dictionary name), re-ordered by :meth:`_order`."""

    def __init__(self, dense: DenseLinker, k: int) -> None:
        super().__init__()
        self.dense, self.k = dense, k

    def _fit(self, dictionary: KnowledgeBase) -> None:
        self.dense.prepare(dictionary)
        self._dictionary = dictionary
        self._names: Dict[str, List[str]] = {}

    def candidates(self, part: str) -> List[Candidate]:
        found = self.dense.linker.link([part])[0][: self.k]
        if not found:
            return []
        encoder = self.dense.encoder
        query = unit_rows(encoder.encode([part]))[0]
        out = []
        for cid, score in found:
            names = self._names.get(cid)
            if names is None:
                names = self._names[cid] = KnowledgeBase.normalized_names(self._dictionary[cid]) or [cid]
            best = int(np.argmax(unit_rows(encoder.encode(names)) @ query))
            out.append((cid, score, names[best]))
        return out

    def _rank_one(self, query: Optional[Query], part: str, k: int) -> List[str]:
        found = self.candidates(part)
        order = self._order(query, part, found) if len(found) > 1 else list(range(len(found)))
        return [found[i][0] for i in order][:k]

    def _order(self, query: Optional[Query], part: str, found: List[Candidate]) -> List[int]:  # pragma: no cover
        raise NotImplementedError


class DenseRescored(_SecondStage):
    """Dense top ``k`` by ``cosine + weight × generative mean token log-probability`` of its nearest name."""

    kind = "dense+generative"

    def __init__(self, dense: DenseLinker, model: str, weight: float = DEFAULT_GENERATIVE_WEIGHT,
                 device: str = "auto", k: int = RESCORE_K, label: Optional[str] = None) -> None:
        if not np.isfinite(weight) or weight < 0:
            raise InputError(f"the generative weight must be finite and >= 0, got {weight}", field="generative_weight")
        super().__init__(dense, k)
        self.model_path, self.weight = str(model), float(weight)
        self.model = _load_generative(self.model_path, device)
        self.name = label or f"{dense.name} + {Path(self.model_path).name} (generative re-scoring, w={weight:g})"

    def _order(self, query: Optional[Query], part: str, found: List[Candidate]) -> List[int]:
        generative = self.model.score_names(_generative_mention(query, part), [name for _, _, name in found])
        total = [score + self.weight * g for (_, score, _), g in zip(found, generative)]
        return sorted(range(len(found)), key=lambda i: -total[i])

    def describe(self) -> Dict[str, Any]:
        return dict(super().describe(), dense=self.dense.describe(), model=self.model_path, k=self.k,
                    weight=self.weight, context_chars=CONTEXT_CHARS)


class DenseReranked(_SecondStage):
    """Dense top ``k`` re-ordered by the cross-encoder re-ranker (its calibrated choice first)."""

    kind = "dense+rerank"

    def __init__(self, dense: DenseLinker, reranker: Any, model: str, label: Optional[str] = None) -> None:
        super().__init__(dense, int(reranker.settings.k))
        self.reranker, self.model_path = reranker, str(model)
        self.name = label or f"{dense.name} + {Path(self.model_path).name} (cross-encoder re-ranker)"

    def _order(self, query: Optional[Query], part: str, found: List[Candidate]) -> List[int]:
        from spacy_sapbert.linking.rerank.inputs import MentionContext, candidate_text

        text, start, end = mention_context(query, part)
        separator = self.reranker.settings.separator
        texts = [candidate_text(name, self._dictionary[cid].canonical_name, separator) for cid, _, name in found]
        return self.reranker.rerank([MentionContext(text, start, end, part)], [texts],
                                    first_stage=[[score for _, score, _ in found]])[0]

    def describe(self) -> Dict[str, Any]:
        return dict(super().describe(), dense=self.dense.describe(), model=self.model_path, k=self.k,
                    temperature=self.reranker.settings.temperature, margin=self.reranker.settings.margin,
                    first_stage_weight=self.reranker.settings.first_stage_weight)


__all__ = ["DEFAULT_GENERATIVE_WEIGHT", "DenseRescored", "DenseReranked", "GenerativeSystem",
           "make_context_system", "mention_context", "parse_spec", "spec_models"]
