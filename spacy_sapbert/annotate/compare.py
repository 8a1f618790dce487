"""Whether two annotation outputs hold the same documents with the same entities.

The distributed engine must write what the local engine writes; this is the check
(``benchmarks/annotate_ray.py`` and the tests run it). Documents are matched by
``(id, ordinal)``: each must be in both outputs exactly once, with the same text and
the same entities (offsets, label, concept). Scores may differ in their last bits, since
a mention's vector depends a little on which other mentions shared its encoder batch, and
shard boundaries change the batches: they are compared to ``score_tolerance``.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Tuple, Union

PathLike = Union[str, Path]
Key = Tuple[str, int]


@dataclass
class Comparison:
    """Documents of each output, and what differs (empty lists: the outputs agree)."""

    reference: int = 0
    other: int = 0
    missing: List[Key] = field(default_factory=list)
    extra: List[Key] = field(default_factory=list)
    duplicated: List[Key] = field(default_factory=list)
    different: List[Key] = field(default_factory=list)
    max_score_difference: float = 0.0

    @property
    def same(self) -> bool:
        return not (self.missing or self.extra or self.duplicated or self.different)

    def line(self) -> str:
        verdict = "same documents and entities" if self.same else "DIFFERENT"
        return (f"{verdict}: {self.reference} vs {self.other} documents, {len(self.missing)} missing, "
                f"{len(self.extra)} extra, {len(self.duplicated)} duplicated, {len(self.different)} with other "
                f"entities; largest score difference {self.max_score_difference:.2e}")


def output_lines(path: PathLike) -> Iterable[Dict[str, Any]]:
    """The records of an output: a JSONL file, or a folder of parts read in part order."""
    path = Path(path)
    files = sorted(path.glob("part-*.jsonl")) if path.is_dir() else [path]
    for file in files:
        with file.open(encoding="utf-8") as handle:
            for line in handle:
                yield json.loads(line)


def _entities(record: Dict[str, Any]) -> List[Tuple[Any, ...]]:
    return [(e["start"], e["end"], e["label"], e["concept_id"]) for e in record["entities"]]


def compare_outputs(reference: PathLike, other: PathLike, score_tolerance: float = 1e-3) -> Comparison:
    """Compare ``other`` with ``reference`` (see the module's docstring)."""
    result = Comparison()
    expected: Dict[Key, Dict[str, Any]] = {}
    for record in output_lines(reference):
        expected[(record["id"], record["ordinal"])] = record
        result.reference += 1
    seen: Counter = Counter()
    for record in output_lines(other):
        key = (record["id"], record["ordinal"])
        seen[key] += 1
        result.other += 1
        if seen[key] > 1:
            result.duplicated.append(key)
            continue
        want = expected.get(key)
        if want is None:
            result.extra.append(key)
            continue
        scores = [abs((a.get("score") or 0.0) - (b.get("score") or 0.0))
                  for a, b in zip(want["entities"], record["entities"])]
        result.max_score_difference = max([result.max_score_difference, *scores])
        if (want["text"] != record["text"] or want.get("meta") != record.get("meta")
                or want.get("abbreviations") != record.get("abbreviations") or _entities(want) != _entities(record)
                or any(d > score_tolerance for d in scores)):
            result.different.append(key)
    result.missing = [key for key in expected if key not in seen]
    return result


__all__ = ["Comparison", "compare_outputs", "output_lines"]
