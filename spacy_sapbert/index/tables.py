"""The rows of a :class:`~spacy_sapbert.index.name_index.NameIndex` as three compact tables: the
distinct normalised names, the distinct concept IDs, and per FAISS row the pair (name number,
concept number), which is what an index folder stores (``names.json.gz``, ``concepts.json.gz``,
``rows.npy``; :mod:`spacy_sapbert.index.files`).

Apart from the index because they are plain bookkeeping over a KB's (name, concept) pairs,
with neither FAISS nor an encoder: a name shared by several concepts is one name (encoded once)
and one row per concept.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

Tables = Tuple[List[str], List[str], np.ndarray]
"""(distinct names, distinct concept IDs, rows): row ``i`` is (name number, concept number)."""


def kb_tables(kb: KnowledgeBase) -> Tables:
    """The rows to index: every (normalised name, concept) pair of ``kb``, names and concepts numbered."""
    pairs = [(name, cid) for name, cid in kb.name_concept_pairs() if name]
    if not pairs:
        raise InputError(f"knowledge base {kb.name!r} has no names to index ({len(kb)} concepts; every name is "
                         "empty after normalisation)" if len(kb) else
                         f"knowledge base {kb.name!r} is empty: no concepts, no names to index")
    return tables_of([name for name, _ in pairs], [cid for _, cid in pairs])


def tables_of(names: List[str], concept_ids: List[str]) -> Tables:
    """The tables of rows whose name and concept are ``names[i]`` and ``concept_ids[i]``."""
    unique_names = list(dict.fromkeys(names))
    concepts = list(dict.fromkeys(concept_ids))
    name_number = {n: i for i, n in enumerate(unique_names)}
    concept_number = {c: i for i, c in enumerate(concepts)}
    rows = np.array([(name_number[n], concept_number[c]) for n, c in zip(names, concept_ids)],
                    dtype=np.int32).reshape(-1, 2)
    return unique_names, concepts, rows


__all__ = ["Tables", "kb_tables", "tables_of"]
