"""A prefix tree over the token ids of all KB names: what constrained decoding may write next.

Each name is tokenized once (without special tokens) and ended with the end-of-sequence id,
so a path from the root to an end is exactly one name and nothing else: decoding that only
ever takes a child of the current node can only write KB names. Several concepts may share a
name (N-to-1 names → concepts, and N concepts for an ambiguous name): the end of a path keeps
the concept IDs of its name. Nodes are plain dicts of ``token id → node``; the name's
concepts hang under the key :data:`CONCEPTS` of its end node.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

CONCEPTS = -1
"""Key under which an end node keeps its name's concept IDs (token ids are never negative)."""


class NameTrie:
    """Token-id sequences of names (each ended by ``eos_id``) → concept IDs."""

    def __init__(self, eos_id: int) -> None:
        self.eos_id = eos_id
        self.root: Dict[int, dict] = {}
        self.names = 0

    @classmethod
    def build(cls, named_ids: Iterable[Tuple[Sequence[int], str]], eos_id: int) -> "NameTrie":
        """The trie of ``(token ids of a name, concept ID)`` pairs."""
        trie = cls(eos_id)
        for ids, concept in named_ids:
            trie.add(ids, concept)
        return trie

    def add(self, ids: Sequence[int], concept: str) -> None:
        if not ids:
            return
        node = self.root
        for token in [*ids, self.eos_id]:
            node = node.setdefault(int(token), {})
        concepts: List[str] = node.setdefault(CONCEPTS, [])
        if not concepts:
            self.names += 1
        if concept not in concepts:
            concepts.append(concept)

    def _node(self, prefix: Sequence[int]) -> Optional[dict]:
        node = self.root
        for token in prefix:
            node = node.get(int(token))
            if node is None:
                return None
        return node

    def allowed(self, prefix: Sequence[int]) -> List[int]:
        """Token ids that may follow ``prefix`` (a name's first tokens); [] past a name's end or off the tree."""
        node = self._node(prefix)
        if node is None or CONCEPTS in node:
            return []
        return [token for token in node if token != CONCEPTS]

    def concepts(self, ids: Sequence[int]) -> List[str]:
        """Concept IDs of the name ``ids`` (with or without its end id); [] if it is not a name."""
        ids = list(ids)
        if not ids or ids[-1] != self.eos_id:
            ids.append(self.eos_id)
        node = self._node(ids)
        return list(node.get(CONCEPTS, [])) if node is not None else []


__all__ = ["CONCEPTS", "NameTrie"]
