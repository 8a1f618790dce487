"""Set linker settings of a packaged default (``sapbert package-settings``).

Some of the default's choices live in its ``config.cfg`` rather than in any part a ``package-*`` step
writes: ``split_composites``, the per-label thresholds (``label_thresholds``), ``head_fallback`` and
``skip_newer_mesh``, each chosen on the development sets (docs/ner.md). Written by hand they would be lost by a rebuild from the
project's steps; this step sets them, checked as the pipe checks any setting, and records them in the
build report, whose model card says what they are. Every component folder is copied byte for byte: only
``config.cfg``, ``build.json`` and the card are written again.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError

from .build import package_report, write_pipeline

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


def set_linker_settings(pipeline: PathLike, settings: Mapping[str, Any], output: PathLike,
                        label_reasons: Optional[Mapping[str, str]] = None, card_extra: str = "",
                        overwrite: bool = False) -> Dict[str, Any]:
    """Write ``pipeline`` to ``output`` (which may be ``pipeline`` itself) with its linker's ``settings`` changed
    (only those a loaded pipe follows: ``LIVE_SETTINGS``); ``label_reasons``: per label, what its
    ``label_thresholds`` value was chosen for (the model card says it). Returns the build report."""
    import spacy

    pipeline = Path(pipeline)
    report = package_report(pipeline)
    if not settings:
        raise InputError("no setting given: nothing to change", field="--set")
    nlp = spacy.load(pipeline)
    if LINKER_PIPE not in nlp.pipe_names:
        raise InputError(f"needs a {LINKER_PIPE} pipe", pipeline)
    linker = nlp.get_pipe(LINKER_PIPE)
    linker.configure(**settings)  # each value checked by the setting's own rule, named in the error
    label_thresholds = linker.settings.label_thresholds or {}
    unknown = sorted(set(label_reasons or {}) - set(label_thresholds))
    if unknown:
        raise InputError(f"a reason for {', '.join(unknown)}, which has no label threshold", field="--label-reason")
    if "label_thresholds" in settings or label_reasons:  # the card's threshold sentence reads them from the report
        chosen = dict(report.get("default_threshold") or {"value": linker.settings.threshold, "chosen_for": ""})
        earlier = chosen.pop("labels", None) or {}
        labels = {label: {"value": value, "chosen_for": (label_reasons or {}).get(
                      label, earlier.get(label, {}).get("chosen_for", ""))} for label, value in label_thresholds.items()}
        report["default_threshold"] = {**chosen, **({"labels": labels} if labels else {})}
    report["linker_settings"] = {**(report.get("linker_settings") or {}),
                                 **{key: getattr(linker.settings, key) for key in settings}}
    keep = [name for name in nlp.pipe_names if (pipeline / name).is_dir()]
    write_pipeline(nlp, report, output, card_extra, overwrite, keep_from=pipeline, keep=keep)
    logger.info("%s: linker settings %s", output, json.dumps({key: report["linker_settings"][key] for key in settings}))
    return report


__all__ = ["set_linker_settings"]
