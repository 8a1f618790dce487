"""``sapbert kb build`` and ``sapbert kb stats``: make a knowledge base from the upstream
vocabularies (spacy_sapbert.kb.sources) and say what is in one."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from spacy_sapbert.errors import exit_on_input_error


def kb_build(
    name: str = typer.Argument(..., help="Which KB: medic, mesh, mesh-medic (the default pipeline's) or open-biomed."),
    assets: Path = typer.Option(Path("assets"), "--assets", help="Folder laid out like the data mirror (vocab/...)."),
    output: Path = typer.Option(..., "--output", "-o", help="KB file to write (.jsonl or .jsonl.gz)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the build's statistics as JSON here."),
) -> None:
    """Build a knowledge base from the upstream vocabulary files and print what went in."""
    from spacy_sapbert.kb.sources.build import KB_BUILDERS, build_kb
    from spacy_sapbert.util.atomic import atomic_write_text

    if name not in KB_BUILDERS:
        raise typer.BadParameter(f"choose one of {', '.join(sorted(KB_BUILDERS))}", param_hint="NAME")
    with exit_on_input_error():
        kb, build_report = build_kb(name, assets)
    kb.to_jsonl(output)
    for line in build_report.lines():
        typer.echo(line)
    typer.echo(f"wrote {output}")
    if report is not None:
        atomic_write_text(report, json.dumps(build_report.as_dict(), indent=2) + "\n")


def kb_stats(
    kb_path: Path = typer.Argument(..., metavar="KB", help="A KB file (scispaCy JSONL, plain or .gz, or a JSON list)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Concepts, names, concepts with >=2 names, and the positive pairs the trainer would take."""
    from spacy_sapbert.kb.knowledge_base import MAX_PAIRS_PER_CONCEPT, KnowledgeBase

    with exit_on_input_error():
        stats = KnowledgeBase.from_jsonl(kb_path).stats()
    if as_json:
        typer.echo(json.dumps({"kb": str(kb_path), **stats.as_dict()}))
        return
    typer.echo(f"{kb_path}")
    typer.echo(f"  concepts                   {stats.concepts:>10,}")
    typer.echo(f"  names (normalised)         {stats.names:>10,}")
    typer.echo(f"  concepts with >=2 names    {stats.concepts_with_synonyms:>10,}")
    typer.echo(f"  positive pairs (<={MAX_PAIRS_PER_CONCEPT}/concept) {stats.positive_pairs:>10,}")
