"""Start the demo: load the resources, build the page, serve it. Shared by ``python -m demo``
and ``sapbert demo`` so both take the same options and behave the same."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Tuple

from .app import DEFAULT_HOST, build_app, launch
from .resources import load_resources

logger = logging.getLogger(__name__)


@dataclass
class DemoOptions:
    pipeline: Optional[str] = None
    model: Optional[str] = None
    kb: Optional[Path] = None
    index: Optional[Path] = None
    ner: Optional[Path] = None
    compare_model: Optional[str] = None
    compare_index: Optional[Path] = None
    host: str = DEFAULT_HOST
    port: Optional[int] = None
    share: bool = False
    device: str = "auto"


def serve(options: DemoOptions, block: bool = True) -> Tuple[Any, str, str]:
    """Load everything, then serve; returns Gradio's (app, local URL, share URL) once the
    server is up (``block=False``) or after it stops (``block=True``)."""
    resources = load_resources(pipeline=options.pipeline, model=options.model, kb=options.kb,
                               index=options.index, ner=options.ner, compare_model=options.compare_model,
                               compare_index=options.compare_index, device=options.device)
    app = build_app(resources)
    if options.host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving on %s: the demo is reachable from other machines", options.host)
    logger.info("starting the demo on http://%s:%s", options.host, options.port or "<first free port from 7860>")
    return launch(app, host=options.host, port=options.port, share=options.share, block=block)
