"""What the demo accepts from the page (and from API calls, which skip the page's own limits):
each check returns the cleaned value or raises :class:`DemoInputError` with a sentence that tells
the user what to change, which the page shows as is."""
from __future__ import annotations

from typing import Optional

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.normalize import normalize

MAX_TEXT_CHARS = 5000
MAX_QUERY_CHARS = 200
MAX_K = 20


class DemoInputError(InputError):
    """Input the demo refuses (empty, too long, k out of range); shown to the user as is."""

    def __init__(self, problem: str, field: Optional[str] = None) -> None:
        super().__init__(problem, field=field)


def check_text(text: Optional[str], max_chars: int = MAX_TEXT_CHARS) -> str:
    """The text to link, or a :class:`DemoInputError` that tells the user what to change."""
    text = (text or "").strip()
    if not text:
        raise DemoInputError("Please enter some text to link (or pick one of the examples).", "text")
    if len(text) > max_chars:
        raise DemoInputError(
            f"The text has {len(text):,} characters; the demo links at most {max_chars:,}. "
            "Please shorten it (one abstract at a time works best).", "text")
    return text


def check_query(query: Optional[str], max_chars: int = MAX_QUERY_CHARS) -> str:
    """A name to look up: non-empty after normalisation and at most ``max_chars`` long."""
    query = (query or "").strip()
    if not query:
        raise DemoInputError("Please type a name to look up, e.g. “heart attack”.", "query")
    if len(query) > max_chars:
        raise DemoInputError(
            f"The name has {len(query)} characters; names up to {max_chars} are looked up. "
            "To link a whole text, use the “Link text” tab.", "query")
    if not normalize(query):
        raise DemoInputError("The name has no letters or digits left after removing punctuation.", "query")
    return query


def check_k(k: object, max_k: int = MAX_K) -> int:
    """``k`` as an int in 1..max_k (sliders bound it in the page; API calls are checked here)."""
    try:
        value = int(k)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DemoInputError(f"k must be a whole number between 1 and {max_k}.", "k") from None
    if not 1 <= value <= max_k:
        raise DemoInputError(f"k must be between 1 and {max_k} (got {value}).", "k")
    return value


def check_threshold(threshold: object) -> float:
    """A threshold in [0, 1] (the slider's value, or an API caller's): a cosine, or a probability
    where the pipeline is calibrated (the embedded default is)."""
    try:
        value = float(threshold)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DemoInputError("The threshold must be a number between 0 and 1.", "threshold") from None
    if not 0.0 <= value <= 1.0:
        raise DemoInputError(f"The threshold must be between 0 and 1 (got {value}).", "threshold")
    return value
