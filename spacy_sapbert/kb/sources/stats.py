"""What a reader read, kept and skipped on purpose: the numbers a build prints.

The issue's rule is "nothing is silently dropped": every record a reader leaves out
on purpose (an obsolete term, a suppressed UMLS row, a non-English string, a term
outside the wanted branches) is counted here under a short reason, so the build log
shows how each KB came to be the size it is.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Optional


@dataclass
class ReadStats:
    """Counters of one reader run over one file."""

    source: str
    path: str = ""
    records: int = 0
    """Upstream records seen (lines, terms, nodes, XML records)."""
    concepts: int = 0
    """Concepts yielded."""
    names: int = 0
    """Names yielded (canonical name plus aliases, before normalisation)."""
    skipped: Counter = field(default_factory=Counter)
    """Reason → number of records (or names) left out on purpose."""
    unit: str = "concepts"
    """What ``concepts`` counts: "concepts" for vocabularies, "mappings" for mapping tables."""
    filled: Counter = field(default_factory=Counter)
    """Reason → records completed from a fallback source (a build checks how many)."""

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] += count

    def kept(self, n_names: int) -> None:
        self.concepts += 1
        self.names += n_names

    def as_dict(self) -> Dict[str, object]:
        return {
            "source": self.source,
            "path": self.path,
            "records": self.records,
            "concepts": self.concepts,
            "names": self.names,
            "unit": self.unit,
            "skipped": dict(sorted(self.skipped.items())),
            "filled": dict(sorted(self.filled.items())),
        }

    def summary(self) -> str:
        """One line for a log or a terminal."""
        skipped = ", ".join(f"{reason} {count:,}" for reason, count in sorted(self.skipped.items()))
        filled = ", ".join(f"{reason} {count:,}" for reason, count in sorted(self.filled.items()))
        return (f"{self.source}: {self.records:,} records -> {self.concepts:,} {self.unit}"
                + (f", {self.names:,} names" if self.unit == "concepts" else "")
                + (f"; skipped: {skipped}" if skipped else "")
                + (f"; filled in: {filled}" if filled else ""))


def ensure_stats(stats: Optional[ReadStats], source: str, path: object = "", unit: str = "concepts") -> ReadStats:
    """The caller's stats object, or a fresh one when the caller does not want the numbers."""
    if stats is None:
        stats = ReadStats(source)
    stats.unit = unit
    if not stats.path:
        stats.path = str(path)
    return stats
