"""``sapbert kb-add-mentions``: a knowledge base plus the annotated training mentions as names.

What the papers call the "test dictionary" (the KB plus every training mention as a name of
its gold concept) is worth 4–6 Acc@1 points on NCBI and BC5CDR (docs/evaluation.md), because
annotators' wordings ("hemorrhagic", "decreased renal function", "DCIS") are often not KB
synonyms. A linker that ships with those names gives the same gain to a user's own text in the
same domain. The names are made as the evaluation makes them
(:func:`~spacy_sapbert.training.evaluation.datasets.training_names`: abbreviations expanded,
normalised, composites only when the corpus aligns their parts); by default the ones that
compete with the KB's own senses are then left out (:func:`add_training_mentions`), and
``keep_kb_senses=False`` keeps every one, as the evaluation's dictionary has them. Give
training files only: the dev and test files it is scored on must stay out.
"""
from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import typer

from spacy_sapbert.errors import exit_on_input_error
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

from .corpora import check_corpora_and_output

if TYPE_CHECKING:
    from spacy_sapbert.linking.annotated_names import AnnotatedNames

logger = logging.getLogger(__name__)


def _training_names(corpora: Sequence[Path]) -> Tuple[list, List[Tuple[str, str, str]]]:
    """The corpora's queries (abbreviations expanded) and the (gold ID, normalised name, type) they
    contribute, as the evaluation's dictionary takes them: the one reading of training mentions
    that the KB names and the annotated-names table share."""
    from .evaluation.datasets import training_names
    from .evaluation.queries import AbbreviationExpander, load_queries

    expander = AbbreviationExpander()
    queries = [q for path in corpora for q in load_queries(path, expander=expander)]
    return queries, training_names(queries)


def add_training_mentions(kb: KnowledgeBase, corpora: Sequence[Path], keep_kb_senses: bool = True
                          ) -> Tuple[KnowledgeBase, Dict[str, Any]]:
    """``kb`` with the mentions of the PubTator ``corpora`` as names of their gold concepts, and counts.

    With ``keep_kb_senses`` (the default), a name the KB already gives to other concepts only is
    not added to the gold concept (annotators' conventions, such as BC5CDR's "renal failure" for
    Acute Kidney Injury or an older supplementary ID of a drug MeSH now has as a descriptor, would
    otherwise tie with the vocabulary's own sense and make the linker abstain on it), and a name
    new to the KB goes to the concept most of its mentions have (none on a tie)."""
    from .evaluation.datasets import add_names

    queries, names = _training_names(corpora)
    kept, skipped = (_keep_kb_senses(kb, names) if keep_kb_senses else (names, {}))
    extended = add_names(kb, kept, f"{kb.name}+train")
    report = {"kb": kb.name, "corpora": [str(p) for p in corpora], "mentions_with_ids": len(queries),
              "training_names": len(names), "distinct_training_names": len({(g, n) for g, n, _ in names}),
              "names_added": len(kept), "names_skipped": skipped, "keep_kb_senses": keep_kb_senses,
              "concepts_before": len(kb), "concepts_after": len(extended),
              "kb_stats_before": kb.stats().as_dict(), "kb_stats_after": extended.stats().as_dict()}
    return extended, report


def _keep_kb_senses(kb: KnowledgeBase, names: Sequence[Tuple[str, str, str]]
                    ) -> Tuple[List[Tuple[str, str, str]], Dict[str, int]]:
    """The training names that do not compete with the KB's senses (see :func:`add_training_mentions`)."""
    from spacy_sapbert.kb.normalize import normalize

    def concept_of(gid: str) -> str:
        found = kb.resolve(gid)
        return found.concept_id if found is not None else gid

    keyed = [(normalize(name), concept_of(gid)) for gid, name, _ in names]  # once per name, for both passes
    votes: Dict[str, Counter] = defaultdict(Counter)
    for key, concept in keyed:
        votes[key][concept] += 1
    skipped: Counter = Counter()
    kept = []
    for entry, (key, concept) in zip(names, keyed):
        senses = kb.alias_to_concepts.get(key)
        if senses and concept not in senses:
            skipped["kb_name_of_other_concepts"] += 1
            continue
        if not senses:
            ranked = votes[key].most_common(2)
            if ranked[0][0] != concept or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
                skipped["minority_or_tied_sense_in_training"] += 1
                continue
        kept.append(entry)
    return kept, dict(skipped)


def kb_add_mentions(
    kb_file: Path = typer.Argument(..., help="The knowledge base (JSONL or JSONL.gz, scispaCy's format)."),
    corpora: List[Path] = typer.Argument(..., help="PubTator training files whose mentions become names."),
    output: Path = typer.Option(..., "--output", "-o", help="KB file to write (new unless --overwrite)."),
    report: Path = typer.Option(None, "--report", help="Also write the counts here (JSON)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output and --report when they exist "
                                   "(never a file read)."),
    keep_kb_senses: bool = typer.Option(True, "--keep-kb-senses/--all-senses", help="Leave out a training name "
                                        "the KB gives to other concepts only, and the minority senses of a new name "
                                        "(--all-senses: every one, as the papers' test dictionary has them)."),
) -> None:
    """Write KB + the training mentions as names of their gold concepts (the papers' "test dictionary")."""
    with exit_on_input_error():
        check_corpora_and_output(corpora, output, overwrite, [kb_file])
        if report is not None:
            from spacy_sapbert.util.atomic import check_new_file

            check_new_file(report, overwrite, [*corpora, kb_file, output], option="--report")
        extended, counts = add_training_mentions(KnowledgeBase.from_jsonl(kb_file), corpora, keep_kb_senses)
        extended.to_jsonl(output)
        counts["output"] = str(output)
        text = json.dumps(counts, indent=1)
        if report is not None:
            from spacy_sapbert.util.atomic import atomic_write_text

            atomic_write_text(report, text + "\n")
        logger.info("%s: %d concepts (%d before), %d of %d training names added", output,
                    counts["concepts_after"], counts["concepts_before"], counts["names_added"],
                    counts["training_names"])  # occurrences, one per mention (part)
        typer.echo(text)


def annotated_names_from_corpora(corpora: Sequence[Path], kb: Optional[KnowledgeBase] = None) -> "AnnotatedNames":
    """What the training mentions of the PubTator ``corpora`` were linked to, wording by wording
    (made as :func:`add_training_mentions` makes its names: abbreviations expanded, normalised), and
    the whole wording of each coordinated mention with all its IDs; with ``kb``, also the crosswalk of
    the annotated IDs it lacks (``AnnotatedNames.crosswalk``)."""
    from spacy_sapbert.kb.normalize import normalize
    from spacy_sapbert.linking.annotated_names import AnnotatedNames

    queries, names = _training_names(corpora)
    # BC5CDR gives some coordinated mentions a part that is the whole wording ("angiosarcoma of the liver":
    # Angiosarcoma | Liver Neoplasms, parts "Angiosarcoma" and "Angiosarcoma of the liver"): the mention votes
    # once, for its set, not also for that part's concept (parts and names are normalised already)
    whole_parts = Counter((gid, part) for q in queries if q.is_composite and q.parts_aligned
                          for gid, part in zip(q.gold, q.parts) if part == normalize(q.expanded))
    singles = []
    for gid, name, _ in names:
        if whole_parts[(gid, name)]:
            whole_parts[(gid, name)] -= 1
        else:
            singles.append((gid, name))
    table = AnnotatedNames.from_pairs(singles, ((q.gold, q.expanded) for q in queries if q.is_composite))
    table.sources = [Path(path).name for path in corpora]
    if kb is not None:
        table.crosswalk(kb)
    return table


def annotated_names(
    corpora: List[Path] = typer.Argument(..., help="PubTator training files (never the files you evaluate on)."),
    output: Path = typer.Option(..., "--output", "-o", help="Table to write (JSON; a new file unless --overwrite)."),
    kb_file: Path = typer.Option(None, "--kb", help="The linker's KB: also record which annotated IDs it lacks "
                                 "are its concepts under a former ID (matched by name)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output when it exists."),
) -> None:
    """Write what each training mention's wording was linked to: the linker's ``annotated_names`` table."""
    with exit_on_input_error():
        check_corpora_and_output(corpora, output, overwrite, [kb_file])
        table = annotated_names_from_corpora(corpora, KnowledgeBase.from_jsonl(kb_file) if kb_file else None)
        table.to_disk(output)
        mentions = sum(sum(ids.values()) for ids in table.names.values())
        coordinated = sum(sum(found.values()) for found in table.composites.values())
        typer.echo(f"{output}: {len(table.names)} wordings from {mentions} training mentions (or their parts) and "
                   f"{len(table.composites)} from {coordinated} coordinated mentions; "
                   f"{len(table.former_ids)} former IDs matched to KB concepts")


def register(app: typer.Typer) -> None:
    app.command("kb-add-mentions")(kb_add_mentions)
    app.command("annotated-names")(annotated_names)


__all__ = ["add_training_mentions", "annotated_names", "annotated_names_from_corpora", "kb_add_mentions",
           "register"]
