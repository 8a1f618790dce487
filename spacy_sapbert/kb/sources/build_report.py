"""What a knowledge base build reports: per-source reader counts, the fallbacks' shares, the
merge and the final KB numbers (:class:`BuildReport`).

Two steps of the builds fill in from a second source what the first lacks. A first source
cut short at a line boundary reads without an error (every line is well-formed), and the
fallback would quietly make up the difference; so each fallback's share is reported
(:class:`FallbackCheck`) and the build fails above :data:`MAX_FALLBACK_SHARE`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KBStats
from spacy_sapbert.kb.sources.merge import MergeReport
from spacy_sapbert.kb.sources.stats import ReadStats

#: Largest share a fallback may fill in before the build fails. The pinned assets give 0.9%
#: (MEDIC: 104 of 12,018 concepts from CTD 2017) and 0.4% (MeSH: 112 of 30,764 descriptors
#: without a row in the tree table). 5% is five times that, so a complete file never comes
#: near it, while a MEDIC 2012 or tree table missing more than about 4-5% of its lines
#: (~500 of MEDIC's 11,915) fails; the reported cut (2,100 lines left) gives 82%.
MAX_FALLBACK_SHARE = 0.05


@dataclass
class FallbackCheck:
    """How much of a KB a second source filled in where the first lacked it."""

    name: str
    filled: int
    total: int
    limit: float = MAX_FALLBACK_SHARE

    @property
    def share(self) -> float:
        return self.filled / self.total if self.total else 0.0

    def line(self) -> str:
        return (f"{self.name}: {self.filled:,} of {self.total:,} ({self.share:.1%}; "
                f"the build fails above {self.limit:.0%})")

    def as_dict(self) -> Dict[str, object]:
        return {"name": self.name, "filled": self.filled, "total": self.total, "share": round(self.share, 4),
                "limit": self.limit}

    def enforce(self, problem: str, normal: str, path: Path) -> None:
        """Fail with ``problem`` (what the fallback would do) when the share is over the limit;
        ``normal`` says what the complete pinned file gives."""
        if self.share > self.limit:
            raise InputError(f"{problem} ({self.share:.1%}), more than the {self.limit:.0%} limit ({normal}): this "
                             "file looks truncated (cut at a line boundary, which no line check can see) or is "
                             "another file; fetch it again (`spacy project run assets`)", path)


@dataclass
class BuildReport:
    """Everything a build prints: per-source reader counts, the merge, the final KB numbers."""

    name: str
    sources: List[ReadStats] = field(default_factory=list)
    merge: Optional[MergeReport] = None
    kb: Optional[KBStats] = None
    seconds: float = 0.0
    notes: List[str] = field(default_factory=list)
    fallbacks: List[FallbackCheck] = field(default_factory=list)
    kb_merged_records: int = 0
    """Records the KB merged into an earlier record with the same concept_id (0 for the project's KBs)."""

    def lines(self) -> List[str]:
        out = [stats.summary() for stats in self.sources]
        out.extend(self.notes)
        out.extend(check.line() for check in self.fallbacks)
        if self.merge is not None:
            out.extend(self.merge.lines())
        if self.kb is not None:
            kb = self.kb
            out.append(f"{self.name}: {kb.concepts:,} concepts, {kb.names:,} names, {kb.concepts_with_synonyms:,} "
                       f"concepts with >=2 names, {kb.positive_pairs:,} positive pairs ({self.seconds:.1f}s)")
            out.append(f"{self.name}: {self.kb_merged_records:,} records merged into an earlier one with the "
                       "same concept_id")
        return out

    def as_dict(self) -> Dict[str, object]:
        return {"name": self.name, "sources": [s.as_dict() for s in self.sources],
                "merge": self.merge.as_dict() if self.merge else None,
                "kb": self.kb.as_dict() if self.kb else None, "seconds": round(self.seconds, 1), "notes": self.notes,
                "fallbacks": [check.as_dict() for check in self.fallbacks],
                "kb_merged_records": self.kb_merged_records}


__all__ = ["BuildReport", "FallbackCheck", "MAX_FALLBACK_SHARE"]
