"""``sapbert corpus-select``: the mentions of chosen types of a PubTator corpus, as a file every command reads.

BioRED annotates genes, variants, species and cell lines beside chemicals and diseases, with their own
vocabularies' IDs; its types have other names (``DiseaseOrPhenotypicFeature``), and it shares documents
with BC5CDR dev and NCBI dev/test. The commands that take training PubTator files (``annotated-names``,
``kb-add-mentions``, ``pairs corpus``, ``ner-dictionary``) read every mention's IDs and know BC5CDR's type
names, so they could not take BioRED as it is. This command writes what they can: the mentions of the
types asked for, renamed (``DiseaseOrPhenotypicFeature=Disease``), their IDs parsed as the corpora's
are (:func:`~spacy_sapbert.training.corpora.read_pubtator`; BioRED's ``D1,D2`` is a mention of two
concepts), and no document whose PMID is in a file the figures are measured on.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import typer

from spacy_sapbert.errors import InputError, exit_on_input_error

from .corpora import Document, check_corpora_and_output, pmids, pubtator_text, read_pubtator

logger = logging.getLogger(__name__)


def parse_type_map(specs: Sequence[str]) -> Dict[str, str]:
    """``["DiseaseOrPhenotypicFeature=Disease", "Chemical"]`` → {source type: written type}; a bare type keeps its name."""
    types: Dict[str, str] = {}
    for spec in specs:
        source, _, target = spec.partition("=")
        source, target = source.strip(), (target.strip() if target else source.strip())
        if not source or not target or "\t" in spec:
            raise InputError(f"expected TYPE or TYPE=NEW_NAME, got {spec!r}", field="--type")
        if source in types:
            raise InputError(f"type {source!r} given twice", field="--type")
        types[source] = target
    return types


def select_mentions(corpora: Sequence[Path], types: Mapping[str, str], held_out: Sequence[Path]
                    ) -> Tuple[List[Document], Dict[str, Any]]:
    """The documents of ``corpora`` whose PMIDs are in none of the ``held_out`` files, each with its
    mentions of ``types`` only (renamed), and counts of what was kept and left out."""
    drop = pmids(held_out)
    kept: List[Document] = []
    report: Dict[str, Any] = {"documents_dropped_held_out": 0, "mentions_kept": Counter(),
                              "mentions_without_id": Counter(), "mentions_left_out": Counter()}
    seen = set()
    for path in corpora:
        for doc in read_pubtator(path, id_types=set(types)):
            if doc.pmid in drop:
                report["documents_dropped_held_out"] += 1
                continue
            if doc.pmid in seen:
                raise InputError(f"document {doc.pmid} comes a second time (each document once)", path)
            seen.add(doc.pmid)
            mentions = []
            for mention in doc.mentions:
                if mention.type not in types:
                    report["mentions_left_out"][mention.type] += 1
                    continue
                mentions.append(replace(mention, type=types[mention.type]))
                report["mentions_kept"][types[mention.type]] += 1
                report["mentions_without_id"][types[mention.type]] += not mention.ids
            kept.append(Document(doc.pmid, doc.title, doc.abstract, mentions))
    counts = {key: dict(sorted(report.pop(key).items()))
              for key in ("mentions_kept", "mentions_without_id", "mentions_left_out")}
    return kept, {"documents_kept": len(kept), **report, **counts}


def corpus_select(
    corpora: List[Path] = typer.Argument(..., help="PubTator files (BioRED's Train/Dev/Test.PubTator)."),
    output: Path = typer.Option(..., "--output", "-o", help="PubTator file to write (new unless --overwrite)."),
    type_: List[str] = typer.Option(..., "--type", help="A mention type to keep, as TYPE or TYPE=NEW_NAME "
                                    "(repeat; e.g. DiseaseOrPhenotypicFeature=Disease)."),
    drop_pmids_of: List[Path] = typer.Option([], "--drop-pmids-of", help="Leave out the documents whose PMIDs "
                                             "are in this PubTator file (repeat: every dev and test file you report)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists."),
) -> None:
    """Write the mentions of the chosen types of PubTator corpora, renamed, without held-out documents."""
    from spacy_sapbert.util.atomic import atomic_write_text

    with exit_on_input_error():
        check_corpora_and_output(list(corpora) + list(drop_pmids_of), output, overwrite)
        documents, report = select_mentions(corpora, parse_type_map(type_), drop_pmids_of)
        output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(output, pubtator_text(documents))
    report = {"output": str(output), "corpora": [str(p) for p in corpora],
              "held_out": [str(p) for p in drop_pmids_of], **report}
    logger.info("%s: %d documents, %s mentions", output, report["documents_kept"], report["mentions_kept"])
    typer.echo(json.dumps(report, indent=1))


def register(app: typer.Typer) -> None:
    app.command("corpus-select")(corpus_select)


__all__ = ["corpus_select", "parse_type_map", "register", "select_mentions"]
