"""The page's error guard: every Gradio handler of :mod:`spacy_sapbert.demo.app` is wrapped by :func:`guarded`,
so that bad input becomes a sentence in the page and an unexpected error a short note, while
the traceback goes to the server log and never to the browser."""
from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Tuple

from .inputs import DemoInputError

logger = logging.getLogger(__name__)

Handler = Callable[..., Tuple[Any, ...]]


def warning(text: str) -> str:
    """A status line that reads as a warning in the page's Markdown."""
    return f"⚠️ {text}"


def guarded(empty: Callable[[], Tuple[Any, ...]]) -> Callable[[Handler], Handler]:
    """Wrap a handler whose first output is the status line: input errors are shown as they
    are, anything else is logged with its traceback and reported in one sentence; ``empty()``
    gives the handler's other outputs, cleared."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def run(*args: Any) -> Tuple[Any, ...]:
            try:
                return handler(*args)
            except DemoInputError as err:
                return (warning(err.problem),) + empty()
            except Exception as err:  # the page must never show a traceback
                logger.exception("demo handler %s failed", handler.__name__)
                return (warning(f"Something went wrong ({type(err).__name__}); the details are in the "
                                "server log."),) + empty()

        return run

    return wrap
