"""The settings every training loop shares: AMP modes, learning-rate schedules, the one validation rule
of a training config, and the rule that a resumed run keeps its recorded settings."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence, Tuple

from spacy_sapbert.errors import InputError

AMP_MODES = ("auto", "no", "bf16", "fp16")
SCHEDULES = ("constant", "linear")


def raise_first_failed(config: Any, checks: Sequence[Tuple[bool, str, str]]) -> None:
    """The first ``(ok, field, problem)`` of ``checks`` that failed, as an :class:`InputError` naming the
    field and its value: the one validation rule of every training config."""
    for ok, name, problem in checks:
        if not ok:
            raise InputError(f"{problem}, got {getattr(config, name, None)!r}", field=name)


def check_resumable(recorded: Dict[str, Any], current: Dict[str, Any], checkpoint: Path) -> None:
    """Refuse to continue a checkpoint whose run had other settings: the result would be neither run."""
    changed = sorted(k for k in set(recorded) | set(current) if recorded.get(k) != current.get(k))
    if changed:
        details = ", ".join(f"{k}: {recorded.get(k)!r} -> {current.get(k)!r}" for k in changed)
        raise InputError(f"cannot resume: settings differ from the checkpoint's ({details})", checkpoint)
