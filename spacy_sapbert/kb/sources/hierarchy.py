"""``is_a`` closure shared by the OBO and OBO Graph readers (root filters, obsolete branches)."""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Dict, Iterable, List, Mapping, Set


def descendants(parents: Mapping[str, Iterable[str]], roots: Iterable[str]) -> Set[str]:
    """The roots and every node below them (breadth-first over child links; cycles are harmless)."""
    children: Dict[str, List[str]] = defaultdict(list)
    for child, ps in parents.items():
        for parent in ps:
            children[parent].append(child)
    seen: Set[str] = set()
    queue = deque(roots)
    while queue:
        node = queue.popleft()
        if node in seen:
            continue
        seen.add(node)
        queue.extend(children.get(node, ()))
    return seen
