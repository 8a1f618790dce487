"""``sapbert annotate``: documents in, entities with concept IDs out (JSONL), streaming and
resumable (spacy_sapbert.annotate does the work; this is its command line)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from spacy_sapbert.cli.options import DeviceOption
from spacy_sapbert.errors import exit_on_input_error
from spacy_sapbert.pipes.loading import load_pipeline
from spacy_sapbert.util.output_lock import output_lock

SOURCE_HELP = ("Input: a text file (one document per line), a folder of .txt files, JSONL, or PubTator (gzip too); "
               "with --engine ray also a glob or a folder of such files.")
ENGINES = ("local", "ray")
PIPELINE_HELP = "'default' (the embedded pipeline), a saved pipeline folder or an installed spaCy package."


def annotate_command(  # a typer signature: one parameter per option, longer than the usual function
    source: Path = typer.Argument(..., help=SOURCE_HELP),
    output: Path = typer.Option(..., "--output", "-o", help="JSONL file to write (resumed if it exists); with "
                                "--engine ray a folder of parts."),
    pipeline: str = typer.Option("default", "--pipeline", "-p", help=PIPELINE_HELP),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto, text, jsonl, pubtator or pubmed (PubMed XML)."),
    text_field: str = typer.Option("text", "--text-field", help="JSONL: field holding the text."),
    id_field: str = typer.Option("id", "--id-field", help="JSONL: field holding the document ID ('' = line "
                                 "number)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Documents per nlp.pipe batch."),
    n_process: int = typer.Option(1, "--n-process", help="Worker processes for nlp.pipe."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first malformed record (default: skip it "
                                "and count it)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start OUTPUT afresh instead of resuming it."),
    show: bool = typer.Option(False, "--show", help="Also print each document's entities and concepts."),
    low_memory: bool = typer.Option(False, "--low-memory", help="Give freed memory back to the system at once "
                                    "(glibc's mmap threshold held at 128 KiB): a lower peak RSS for fewer documents/s "
                                    "(docs/annotate.md)."),
    device: DeviceOption = None,
    onnx: bool = typer.Option(False, "--onnx", help="Run the NER and the linker's encoder on ONNX Runtime in float32 "
                              "and never import torch: a lower peak RSS, for fewer documents/s on a CPU with AMX "
                              "(docs/annotate.md). Without torch installed this is what runs anyway."),
    engine: str = typer.Option("local", "--engine", help="local (this process, or --n-process forks) or ray (a Ray "
                               "cluster; pip install 'spacy-sapbert[ray]')."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray: 'auto' (the cluster `ray start` runs here), "
                                          "ray://host:10001, or none to start Ray on this machine."),
    num_actors: int = typer.Option(1, "--num-actors", help="Ray: actors, each with the pipeline loaded once."),
    num_cpus_per_actor: float = typer.Option(1.0, "--num-cpus-per-actor", help="Ray: CPUs (torch threads) per "
                                             "actor."),
    num_gpus_per_actor: float = typer.Option(0.0, "--num-gpus-per-actor", help="Ray: GPUs per actor (> 0: the "
                                             "encoder and NER run on cuda)."),
    shard_mb: float = typer.Option(4.0, "--shard-mb", help="Ray: input megabytes per shard (a gzip file is one)."),
) -> None:
    """Annotate documents with entities and concept IDs into JSONL: streaming, resumable, with a summary."""
    if onnx and engine == "local":  # before anything imports spaCy (and with it, torch)
        from spacy_sapbert.util.torch_free import block_torch

        block_torch()
    from spacy_sapbert.annotate import annotate, preflight
    from spacy_sapbert.annotate.output import check_paths
    from spacy_sapbert.util.heap import hold_mmap_threshold
    from spacy_sapbert.util.resident import drop_library_pages

    if engine not in ENGINES:
        typer.echo(f"error: --engine: expected one of {', '.join(ENGINES)}, got {engine!r}", err=True)
        raise typer.Exit(2)
    for flag, given in (("--low-memory", low_memory), ("--onnx", onnx)):
        if engine == "ray" and given:
            typer.echo(f"error: {flag}: applies to the local engine (a Ray actor is a process of Ray's)", err=True)
            raise typer.Exit(2)
    if engine == "ray":
        summary = _annotate_with_ray(source, output, pipeline, fmt, text_field, id_field, batch_size, n_process,
                                     strict, overwrite, device, address, num_actors, num_cpus_per_actor,
                                     num_gpus_per_actor, shard_mb)
        if show:
            for part in sorted(output.glob("part-*.jsonl")):
                show_annotations(part)
        for line in summary.lines():
            typer.echo(line)
        return
    if low_memory:  # this process is ours: freed activations go back to the system (spacy_sapbert.util.heap)
        hold_mmap_threshold()
    if n_process > 1:  # the workers fork from this process and share its cores: ONNX Runtime sessions made now
        # with one thread have no thread pool for a fork to leave behind (torch's are set to one thread in each
        # worker: spacy_sapbert.util.threads)
        os.environ["OMP_NUM_THREADS"] = "1"
    with exit_on_input_error():
        # everything that needs no pipeline is checked before one is loaded (seconds), and a second run on the
        # same output is refused then (annotate() takes the lock again: it is re-entrant)
        check_paths(source, output)
        with output_lock(output):
            preflight(source, output, resume=not overwrite, fmt=fmt, text_field=text_field,
                      id_field=id_field or None)
            # the library code that importing spaCy (and with it torch) ran once leaves the resident set: about -60 MB
            # of peak RSS over NCBI test (spacy_sapbert.util.resident); this process has one thread here
            import spacy  # noqa: F401  (what the pipes import while they load stays: far less)
            drop_library_pages()
            nlp = load_pipeline(pipeline, device, onnx=onnx)
            summary = annotate(nlp, source, output, fmt=fmt, text_field=text_field, id_field=id_field or None,
                               batch_size=batch_size, n_process=n_process, strict=strict, resume=not overwrite)
    if show:
        show_annotations(output)
    for line in summary.lines():
        typer.echo(line)


def _annotate_with_ray(source: Path, output: Path, pipeline: str, fmt: str, text_field: str, id_field: str,
                       batch_size: int, n_process: int, strict: bool, overwrite: bool, device: Optional[str],
                       address: Optional[str], num_actors: int, num_cpus_per_actor: float, num_gpus_per_actor: float,
                       shard_mb: float) -> Any:
    from spacy_sapbert.annotate.ray_engine import annotate_with_ray
    from spacy_sapbert.errors import InputError

    with exit_on_input_error():
        if n_process != 1:
            raise InputError("with --engine ray, parallelism is --num-actors (and --num-cpus-per-actor)",
                             field="--n-process")
        if shard_mb <= 0:
            raise InputError(f"expected a positive number, got {shard_mb}", field="--shard-mb")
        with output_lock(output):  # before Ray starts (seconds); run_sharded takes it again
            return annotate_with_ray(pipeline, source, output, address=address, num_actors=num_actors,
                                     num_cpus_per_actor=num_cpus_per_actor, num_gpus_per_actor=num_gpus_per_actor,
                                     device=device, fmt=fmt, text_field=text_field, id_field=id_field or None,
                                     batch_size=batch_size, strict=strict, overwrite=overwrite,
                                     shard_bytes=int(shard_mb * (1 << 20)))


def show_annotations(path: Path) -> None:
    """A readable listing of an output file: each document, then its entities with their concepts."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            text = record["text"]
            typer.echo(f"\n[{record['id']}] {text[:100]}{'…' if len(text) > 100 else ''}")
            for ent in record["entities"]:
                concept = f"{ent['concept_id']}  {ent['concept_name']}" if ent["concept_id"] else "(no concept)"
                score = f"{ent['score']:.3f}" if ent.get("score") is not None else "  -  "
                via = f"  (= {ent['long_form']})" if ent.get("long_form") else ""
                typer.echo(f"  {ent['label']:<9} {ent['text'][:40]:<40} {score}  {concept}{via}")
                for part in ent.get("parts", []):  # a coordinated span's concepts (split_composites)
                    named = f"{part['concept_id']}  {part['concept_name']}" if part["concept_id"] else "(no concept)"
                    value = f"{part['score']:.3f}" if part.get("score") is not None else "  -  "
                    typer.echo(f"  {'':<9} + {part['text'][:38]:<38} {value}  {named}")
    typer.echo("")
