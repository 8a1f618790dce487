"""Start the demo: load the resources, build the page, serve it. Shared by ``python -m spacy_sapbert.demo``
and ``sapbert demo`` (both run :func:`spacy_sapbert.demo.cli.demo_command`) and by Python callers."""
from __future__ import annotations

import logging
from typing import Any, Tuple

from .app import build_app, launch
from .options import DemoOptions
from .resources import load_resources

logger = logging.getLogger(__name__)

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def serve(options: DemoOptions, block: bool = True) -> Tuple[Any, str, str]:
    """Load everything, then serve; returns Gradio's (app, local URL, share URL) once the
    server is up (``block=False``) or after it stops (``block=True``)."""
    resources = load_resources(pipeline=options.pipeline, model=options.model, kb=options.kb,
                               index=options.index, ner=options.ner, compare_model=options.compare_model,
                               compare_index=options.compare_index, device=options.device)
    app = build_app(resources)
    if options.host not in LOCAL_HOSTS:
        logger.warning("serving on %s: the demo is reachable from other machines", options.host)
    logger.info("starting the demo on http://%s:%s", options.host, options.port or "<first free port from 7860>")
    return launch(app, host=options.host, port=options.port, share=options.share, block=block)
