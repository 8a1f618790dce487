"""``sapbert link``: link mentions given on the command line (or stdin) to KB concepts, either
bare (``--kb`` + ``--model``) or inside texts, through a NER + linker pipeline (``--pipeline``,
``--ner``), and print them as a table or JSON lines."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

import typer

from spacy_sapbert.cli.options import DeviceOption, IndexOption, KbOption, ModelOption
from spacy_sapbert.default import DEFAULT_MODEL, LINKER_PIPE
from spacy_sapbert.errors import exit_on_input_error
from spacy_sapbert.pipes.loading import load_pipeline

if TYPE_CHECKING:
    from spacy.language import Language

Candidates = List[Tuple[str, float]]
Row = Tuple[Optional[str], Optional[str], Candidates]
"""(text, mention, candidates): text is None for a bare mention, mention None for a text without entities."""
ConceptOf = Callable[[str], Any]
"""Concept ID → its concept (with ``canonical_name``), or None."""

PIPELINE_HELP = ("'default' (the embedded pipeline), a saved pipeline folder or an installed spaCy package with a "
                 "sapbert_linker (replaces --kb/--model/--index); arguments are texts.")
NER_HELP = ("spaCy pipeline (folder or package) that finds the entities, linked with --kb/--model/--index; "
            "arguments are texts.")
JSON_HELP = ("One JSON object per mention (with --pipeline/--ner, also one with \"mention\": null per text without "
             "entities).")


def link(  # a typer signature: one parameter per option, longer than the usual function
    mentions: List[str] = typer.Argument(..., help="Mentions to link (texts with --pipeline or --ner); '-' reads "
                                         "lines from stdin."),
    kb: KbOption = None,
    model: ModelOption = DEFAULT_MODEL,
    index: IndexOption = None,
    pipeline: Optional[str] = typer.Option(None, "--pipeline", help=PIPELINE_HELP),
    ner: Optional[str] = typer.Option(None, "--ner", help=NER_HELP),
    top: int = typer.Option(5, "--top", help="Concepts per mention."),
    k: int = typer.Option(25, "--k", help="Names retrieved per mention."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="Minimum cosine score."),
    device: DeviceOption = None,
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Link mentions (or the entities a NER pipeline finds in texts) to KB concepts."""
    texts = [line.rstrip("\n") for line in sys.stdin] if mentions == ["-"] else list(mentions)
    with exit_on_input_error():
        if pipeline or ner:
            # like `annotate`: 'default', a folder or a package; --device moves a pipeline's own linkers
            # (a --ner pipeline has none: the linker added to it gets --device)
            nlp = load_pipeline(pipeline, device) if pipeline else load_pipeline(str(ner), None)
            concept_of, rows = link_texts(texts, nlp, kb, model, index, top, k, threshold, device)
        else:
            if kb is None:
                raise typer.BadParameter("give --kb (or --pipeline)", param_hint="--kb")
            concept_of, rows = link_mentions(texts, kb, model, index, top, k, threshold, device or "auto")
    print_links(rows, concept_of, as_json)


def link_mentions(texts: Sequence[str], kb: Path, model: str, index: Optional[Path], top: int, k: int,
                  threshold: Optional[float], device: str) -> Tuple[ConceptOf, List[Row]]:
    """Each text is a mention: encode them and search the KB's names (the saved ``index``, else all encoded now)."""
    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.index.name_index import NameIndex
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.linking.linker import Linker

    knowledge_base = KnowledgeBase.from_jsonl(kb)
    encoder = Encoder(model, device=device)
    name_index = NameIndex.load(index, encoder, knowledge_base) if index else None
    linker = Linker(encoder, knowledge_base, name_index, k=k, threshold=threshold, max_entities_per_mention=top)
    return knowledge_base.get, [(None, text, result) for text, result in zip(texts, linker.link(texts))]


def link_texts(texts: Sequence[str], nlp: "Language", kb: Optional[Path], model: str, index: Optional[Path],
               top: int, k: int, threshold: Optional[float],
               device: Optional[str]) -> Tuple[ConceptOf, List[Row]]:
    """Run a loaded spaCy pipeline over texts (adding a sapbert_linker over --kb when it has none); a text
    without entities gets one ``(text, None, [])`` row, so the output says so instead of leaving it out."""
    from spacy_sapbert.pipes.linker import SapBertLinker

    linkers = [proc for _, proc in nlp.pipeline if isinstance(proc, SapBertLinker)]
    if not linkers:
        if kb is None:
            raise typer.BadParameter("the pipeline has no sapbert_linker: give --kb", param_hint="--kb")
        nlp.add_pipe(LINKER_PIPE, config={
            "kb": str(kb), "model": model, "index": str(index) if index else None, "k": k, "threshold": threshold,
            "max_entities_per_mention": top, "device": device or "auto"})
        linkers = [nlp.get_pipe(LINKER_PIPE)]
    linker = linkers[-1]
    rows: List[Row] = []
    for text, doc in zip(texts, nlp.pipe(texts)):
        spans = linker.spans(doc)
        for span in spans:
            rows.append((text, span.text, span._.get(linker.extension)[:top]))
        if not spans:
            rows.append((text, None, []))
    return linker.concept, rows


def print_links(rows: Sequence[Row], concept_of: ConceptOf, as_json: bool) -> None:
    """JSON lines, or a table that puts each text (when there is one) above its mentions; ``concept_of`` names each
    concept (the pipe's :meth:`~spacy_sapbert.pipes.linker.SapBertLinker.concept`: the KB's, or its exact-names
    table's)."""
    previous_text = None
    for text, mention, candidates in rows:
        named = [{"concept_id": cid, "score": round(score, 4),
                  "name": getattr(concept_of(cid), "canonical_name", None)} for cid, score in candidates]
        if as_json:
            record = {"mention": mention, "candidates": named}
            if text is not None:
                record = {"text": text, **record}
            typer.echo(json.dumps(record, ensure_ascii=False))
            continue
        indent = ""
        if text is not None:
            indent = "  "
            if text != previous_text:
                typer.echo(text)
            previous_text = text
            if mention is None:
                typer.echo(f"{indent}(no entities found)")
                continue
        typer.echo(f"{indent}{mention}")
        for rank, cand in enumerate(named, 1):
            typer.echo(f"{indent}  {rank}. {cand['concept_id']:<22} {cand['score']:.4f}  {cand['name']}")
        if not named:
            typer.echo(f"{indent}  (no concept)")
