"""Replace the NER of a built default pipeline, keeping its linker (encoder, KB, index) as it is.

A new NER model changes one component; rebuilding the whole default would encode the KB's
134,822 names again (about ten minutes here) and rewrite the index files for nothing. This
loads the earlier package, swaps its NER components for those of a trained NER pipeline, lets
a transformer NER that was trained with the linker encoder's frozen word-piece table take that
table from the linker instead of storing a copy, and writes the package again (atomically, with
the model card), its build report carried over with the NER's part updated.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError

from .build import NER_PIPES, package_report, set_default_threshold, write_pipeline

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
NER_COMPONENTS = ("tok2vec",) + NER_PIPES
"""Components that belong to a NER model (the tok2vec feeds spaCy's ``ner``)."""


def training_record(settings_file: Path) -> Dict[str, Any]:
    """The ``training`` record of a transformer NER's ``tagger.json`` ({} when there is none)."""
    if not settings_file.is_file():
        return {}
    return json.loads(settings_file.read_text(encoding="utf-8")).get("training", {})


def ner_teacher(settings_file: Path, training: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Any]]:
    """The teacher a transformer NER was distilled from, as its ``tagger.json`` training record says (None: none);
    ``training``: that record, when the caller has read it already."""
    training = training_record(settings_file) if training is None else training
    if not training.get("teacher"):
        return None
    found = {"soft_labels": training["teacher"], "distil_weight": training.get("distil_weight", 0.5),
             "text": list(training.get("teacher_text", [])), "model": "a larger encoder"}
    recorded = training if training.get("teacher_model") else None  # SoftLabels.provenance, at training time
    if recorded is None and Path(training["teacher"]).is_file():  # a student trained before that was recorded
        from spacy_sapbert.training.ner.teacher.soft_labels import SoftLabels

        labels = SoftLabels(training["teacher"])
        recorded = labels.provenance(labels.unlabelled() if "all" in found["text"] else found["text"])
    if recorded is not None:
        seeds = recorded.get("teacher_seeds")
        found["model"] = (recorded.get("teacher_model") or "a larger encoder") + (f", {seeds} seeds" if seeds else "")
        found["text"] = list(recorded.get("teacher_text", []))
    return found


RUN_SETTINGS = ("batch_size", "device", "precision")
"""How a packaged NER runs (not what it learnt): a swap keeps the pipeline's own (b3c26af chose 4 windows a batch)."""


def kept_settings(nlp: Any, ner: PathLike) -> Dict[str, Any]:
    """Config overrides that give the NER from ``ner`` the run settings its namesake in ``nlp`` has."""
    import spacy

    incoming = spacy.util.load_config(Path(ner) / "config.cfg")["components"]
    overrides: Dict[str, Any] = {}
    for name in nlp.pipe_names:
        if name not in NER_PIPES or name not in incoming:
            continue
        own = nlp.config["components"][name]
        kept = {key: own[key] for key in RUN_SETTINGS if key in own and key in incoming[name]}
        overrides.update({f"components.{name}.{key}": value for key, value in kept.items()})
    return overrides


def replace_ner(pipeline: PathLike, ner: PathLike, output: PathLike, card_extra: str = "",
                overwrite: bool = False, threshold: Optional[float] = None,
                threshold_reason: str = "") -> Dict[str, Any]:
    """Write ``pipeline`` with the NER of ``ner`` to ``output`` (which may be ``pipeline`` itself).

    ``threshold``: the linker's new default threshold (the NER decides which spans there are to link,
    so the best end-to-end threshold moves with it), recorded with ``threshold_reason`` in the build
    report and the model card beside the calibration's high-precision one."""
    import spacy

    started = time.perf_counter()
    pipeline = Path(pipeline)
    report = package_report(pipeline)
    nlp = spacy.load(pipeline)
    source = spacy.load(ner, config=kept_settings(nlp, ner))
    new = [name for name in source.pipe_names if name in NER_COMPONENTS]
    if not any(name in NER_PIPES for name in new):
        raise InputError(f"not a NER pipeline (no {' or '.join(repr(n) for n in NER_PIPES)} component)", ner)
    for name in [n for n in nlp.pipe_names if n in NER_COMPONENTS]:
        nlp.remove_pipe(name)
    previous = None
    for name in new:
        nlp.add_pipe(name, source=source, **({"first": True} if previous is None else {"after": previous}))
        previous = name
    report.update({"ner_pipe": next(n for n in new if n in NER_PIPES), "ner": str(ner)})
    for key in ("ner_layers", "ner_shares_word_embeddings", "ner_teacher", "ner_trained_on_dev"):  # the earlier NER's
        report.pop(key, None)
    if "sapbert_ner" in new:
        pipe = nlp.get_pipe("sapbert_ner")
        report["ner_layers"] = len(pipe._ready().model.encoder.encoder.layer)
        pipe.nlp = nlp  # it came from `source`: the table it may share is this pipeline's linker's
        report["ner_shares_word_embeddings"] = pipe.share_word_embeddings(LINKER_PIPE)
        settings_file = Path(ner) / "sapbert_ner" / "tagger.json"
        training = training_record(settings_file)  # read once for both
        report["ner_teacher"] = ner_teacher(settings_file, training)
        report["ner_trained_on_dev"] = list(training.get("trained_on_dev", []))
    set_default_threshold(nlp, report, threshold, threshold_reason)
    report["ner_swap_seconds"] = round(time.perf_counter() - started, 1)
    write_pipeline(nlp, report, output, card_extra, overwrite, keep_from=pipeline,
                   keep=[n for n in nlp.pipe_names if n not in NER_COMPONENTS and (pipeline / n).is_dir()])
    logger.info("NER of %s replaced by %s's: %s", output, ner, json.dumps(report.get("components_mb")))
    return report
