"""Loading the spaCy pipeline a command names: ``link --pipeline/--ner`` and ``annotate --pipeline``
go through this one loader, so 'default', a folder and a package mean the same everywhere."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..errors import InputError

if TYPE_CHECKING:
    from spacy.language import Language


def load_pipeline(pipeline: str, device: Optional[str]) -> "Language":
    """``spacy.load`` of ``pipeline`` ('default', a folder or a package), its linkers on ``device``.

    A name that is neither is an :class:`InputError` (one line on the command line) rather than
    spaCy's E050. ``device`` None keeps each ``sapbert_linker``'s own setting; otherwise every
    pipe made by that factory is loaded onto ``device`` (through spaCy's config overrides, so the
    encoder is never built on the wrong device first).
    """
    import spacy
    from spacy.util import load_config

    from ..default import default_pipeline_path

    location = default_pipeline_path() if pipeline == "default" else pipeline
    if pipeline != "default" and not Path(pipeline).is_dir() and not spacy.util.is_package(pipeline):
        raise InputError("no such pipeline: not a folder written by nlp.to_disk, nor an installed spaCy package "
                         "('default' is the embedded one)", pipeline, field="--pipeline")
    if not device:
        return spacy.load(location)
    config_file = Path(location) / "config.cfg"
    names = ["sapbert_linker"]
    if config_file.is_file():
        components = load_config(config_file).get("components", {})
        names = [name for name, cfg in components.items() if cfg.get("factory") == "sapbert_linker"]
    return spacy.load(location, config={f"components.{name}.device": device for name in names})
