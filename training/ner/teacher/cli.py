"""``sapbert ner-teacher-inputs`` / ``ner-teacher-fit`` / ``ner-teacher-score``: a larger NER teacher for the student.

The student (``ner-train --teacher``) learns the teacher's probabilities; docs/ner.md says what it gained.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import List, Optional

import typer

from spacy_sapbert.errors import exit_on_input_error

DEV_FILES = {"bc5cdr_dev": "dev.spacy", "ncbi_dev": "ncbi_dev.spacy", "ncbi_test": "ncbi_test.spacy"}
"""The held-out files ``ner-data`` writes, labelled by the teacher and scored (never trained on)."""
IN_TRAIN = ("bc5cdr", "ncbi")
"""``parts.json`` entries already in ``train.spacy``."""


def default_parts(corpus: Path) -> List[str]:
    """train.spacy to learn from, every extra part of parts.json as unlabelled text, the dev files to score."""
    from ..corpus import PARTS_FILE, read_parts

    parts = ["train:train=train.spacy"]
    if (corpus / PARTS_FILE).is_file():
        parts += [f"unlabelled:{p['name']}={p['file']}" for p in read_parts(corpus) if p.get("name") not in IN_TRAIN]
    parts += [f"dev:{name}={file}" for name, file in DEV_FILES.items() if (corpus / file).is_file()]
    return parts


def ner_teacher_inputs(
    corpus: Path = typer.Argument(..., help="Folder from `sapbert ner-data` (train.spacy, dev.spacy, parts.json)."),
    teacher: Path = typer.Option(..., help="The teacher's model folder (its tokenizer.json cuts the windows)."),
    kb: List[Path] = typer.Option(..., "--kb", help="KB file(s) of the gazetteer features (the student's)."),
    output: Path = typer.Option(..., "--output", "-o", help="inputs.safetensors to write (never overwritten)."),
    part: List[str] = typer.Option(
        [], "--part", help="ROLE:NAME=FILE (role train, unlabelled or dev); default: train.spacy, every extra part "
                           "of parts.json as unlabelled text, and the dev/test files."),
    max_pieces: int = typer.Option(256, help="Word pieces per window."),
    overlap: int = typer.Option(64, help="Word pieces two windows share (less than half of --max-pieces)."),
) -> None:
    """Cut the NER corpus into the teacher's word-piece windows: one file, for a machine without spaCy."""
    from .inputs import write_teacher_inputs

    with exit_on_input_error():
        result = write_teacher_inputs(corpus, part or default_parts(corpus), teacher, kb, output, max_pieces,
                                      overlap)
    typer.echo(json.dumps(result, indent=2))


def ner_teacher_fit(
    model: Path = typer.Option(..., help="Teacher encoder folder (transformers AutoModel; all-mpnet-base-v2)."),
    inputs: Path = typer.Option(..., help="inputs.safetensors from `sapbert ner-teacher-inputs`."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for soft_labels.safetensors."),
    epochs: int = typer.Option(6),
    seeds: int = typer.Option(3, help="Teachers trained; the soft labels average their probabilities."),
    batch_size: int = typer.Option(16),
    lr: float = typer.Option(3e-5),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
    time_limit: float = typer.Option(0.0, help="Seconds; start no seed likely to end past it (0: none)."),
) -> None:
    """Train the teacher (several seeds) and write its soft labels (the same code runs as training/ner/teacher/fit.py)."""
    from .fit import fit, parser

    args: argparse.Namespace = parser().parse_args(
        ["--model", str(model), "--inputs", str(inputs), "--output", str(output), "--epochs", str(epochs),
         "--seeds", str(seeds), "--batch-size", str(batch_size), "--lr", str(lr), "--device", device,
         "--time-limit", str(time_limit)])
    record = fit(args)
    typer.echo(json.dumps(record["ensemble_dev"], indent=2))


def ner_teacher_score(
    soft_labels: Path = typer.Argument(..., help="soft_labels.safetensors from `sapbert ner-teacher-fit`."),
    corpus: Path = typer.Argument(..., help="The `sapbert ner-data` folder the inputs were cut from."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON here."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """Strict span F1 of the teacher on the dev parts, decoded as the student decodes."""
    from spacy_sapbert.util.atomic import atomic_write_text

    from ..scores import check_report_path
    from .soft_labels import score_teacher

    with exit_on_input_error():
        # the corpus folder is not read whole (a report may lie beside its files), only the dev files named
        check_report_path(output, overwrite, [soft_labels, *_dev_files(soft_labels, corpus)])
        scores = score_teacher(soft_labels, corpus)
    text = json.dumps(scores, indent=2)
    if output is not None:
        atomic_write_text(output, text + "\n")
    typer.echo(text)


def _dev_files(soft_labels: Path, corpus: Path) -> List[Path]:
    """The corpus files ``ner-teacher-score`` reads, from the soft labels' metadata alone (none where it is
    unreadable: the scoring then says what is wrong with the file)."""
    try:
        from safetensors import safe_open

        with safe_open(str(soft_labels), framework="np") as handle:
            parts = json.loads((handle.metadata() or {}).get("parts", "[]"))
        return [corpus / part["file"] for part in parts if part.get("role") == "dev"]
    except Exception:  # noqa: BLE001  (safetensors raises its own error types; SoftLabels reports them)
        return []


def ner_student_export(
    model: Path = typer.Argument(..., help="The model folder distil.py wrote (DIR/model)."),
    kb: List[Path] = typer.Option(..., "--kb", help="The KB file(s) the inputs' gazetteer was built from."),
    output: Path = typer.Option(..., "--output", "-o", help="Pipeline folder to write (as ner-train's output)."),
    encoder: str = typer.Option("default", help="The encoder whose word-piece table the student shares."),
    soft_labels: Optional[Path] = typer.Option(
        None, help="The teacher's soft labels on this machine, for a student trained where they lay elsewhere: "
                   "their teacher, seeds and text go into the pipeline's training record (tags checked)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output even when it holds something other "
                                   "than an NER pipeline (an earlier one is replaced without it; never MODEL)."),
) -> None:
    """Turn a GPU-distilled student (training/ner/teacher/distil.py) into the pipeline folder ner-train writes."""
    import spacy

    from spacy_sapbert.errors import InputError
    from spacy_sapbert.linking.settings import DEFAULT_LABEL_TO_TYPES
    from spacy_sapbert.ner import model as tagger_model

    from ..tagger.data import build_gazetteer
    from ..tagger.output import TOKENIZER_CONFIG, base_encoder_folder, is_ner_output, write_pipeline

    from spacy_sapbert.util.atomic import check_replaceable

    with exit_on_input_error():
        check_replaceable(output, is_ner_output, "an NER pipeline (no sapbert_ner/tagger.json, or it holds more pipes "
                          "than the NER: a whole pipeline)", "Choose a new or empty --output, or --overwrite.",
                          overwrite=overwrite, reads={"MODEL": model})
        table = tagger_model.read_word_embeddings(base_encoder_folder(encoder))
        net, _, settings = tagger_model.load(model, word_embeddings=table)
        label_to_types = {k: list(v) for k, v in DEFAULT_LABEL_TO_TYPES.items()}
        gazetteer = build_gazetteer(kb, label_to_types, spacy.blank("en", config=TOKENIZER_CONFIG))
        expected = settings.get("training", {}).get("gazetteer_names")
        if gazetteer.n_features != settings["n_features"] or expected and int(expected) != len(gazetteer):
            raise InputError(f"the KB files give a gazetteer of {len(gazetteer)} names and {gazetteer.n_features} "
                             f"features; the student learnt {expected} and {settings['n_features']}: pass the KB "
                             "files its inputs were cut with", model / tagger_model.SETTINGS_FILE, field="kb")
        extra = {k: v for k, v in settings.items() if k not in ("format", "tags", "n_features", tagger_model.SHARED_KEY)}
        if soft_labels is not None:
            from .soft_labels import SoftLabels

            labels = SoftLabels(soft_labels)
            labels.check_tags(settings["tags"])
            training = extra.get("training", {})
            text = training.get("teacher_text", ["all"])
            extra["training"] = {**training, "teacher": str(soft_labels),
                                 **labels.provenance(labels.unlabelled() if "all" in text else text)}
        write_pipeline(net, model, settings["tags"], gazetteer, output, extra)
    typer.echo(json.dumps({"output": str(output), "best": settings.get("training", {}).get("best")}, indent=2))


def register(app: typer.Typer) -> None:
    app.command("ner-teacher-inputs")(ner_teacher_inputs)
    app.command("ner-teacher-fit")(ner_teacher_fit)
    app.command("ner-teacher-score")(ner_teacher_score)
    app.command("ner-student-export")(ner_student_export)
