"""The embedded default pipeline: our NER → abbreviations → ``sapbert_linker`` (MeSH + MEDIC).

It ships inside the package (``spacy_sapbert/data/default``, an ``nlp.to_disk`` folder
written by ``spacy project run package``; its README.md is the model card), so that::

    import spacy_sapbert
    nlp = spacy_sapbert.load()            # or spacy.load(spacy_sapbert.DEFAULT_PIPELINE)

works offline on a fresh install, and ``nlp.add_pipe("sapbert_linker")`` with no config
uses the same encoder, KB and prebuilt index (``DEFAULT_MODEL`` names that encoder).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from spacy_sapbert.errors import InputError

LINKER_PIPE = "sapbert_linker"
"""The linker's factory name, and its pipe's name in the embedded default and in every pipeline the project builds."""
DEFAULT_PIPELINE = Path(__file__).resolve().parent / "data" / "default"
DEFAULT_LINKER = DEFAULT_PIPELINE / LINKER_PIPE
DEFAULT_MODEL = "sapbert-default"
"""Model name that stands for the embedded default's encoder (``<pipeline>/sapbert_linker/encoder``)."""


def _need(path: Path) -> Path:
    if not path.exists():
        raise InputError("the embedded default pipeline is not in this installation (build it with "
                         "`spacy project run package`, or install spacy-sapbert from its repository)", path)
    return path


def default_pipeline_path() -> Path:
    """The embedded pipeline's folder; an error that says how to get it when it is missing."""
    return _need(DEFAULT_PIPELINE)


def default_encoder_path() -> Path:
    return _need(DEFAULT_LINKER / "encoder")


def default_kb_path() -> Path:
    return _need(DEFAULT_LINKER / "kb.jsonl.gz")


def default_kb_name() -> str:
    """The embedded KB's name, as its pipeline recorded it (``mesh-medic``)."""
    import json

    cfg = json.loads(_need(DEFAULT_LINKER / "cfg.json").read_text(encoding="utf-8"))
    return str(cfg.get("kb_name") or "kb")


def default_index_path() -> Path:
    return _need(DEFAULT_LINKER / "index")


def load(**kwargs: Any) -> Any:
    """``spacy.load`` of the embedded default pipeline (keyword arguments go to spacy.load), with Python's
    cyclic collector paused meanwhile (:func:`~spacy_sapbert.util.gc_pause.gc_paused`: its full passes over
    what the load has built so far cost a quarter of a second to a second of it)."""
    import spacy

    from spacy_sapbert.util.gc_pause import gc_paused

    with gc_paused():
        return spacy.load(default_pipeline_path(), **kwargs)


__all__ = ["DEFAULT_PIPELINE", "DEFAULT_MODEL", "default_pipeline_path", "default_encoder_path", "default_kb_path", "default_kb_name", "default_index_path",
           "load"]
