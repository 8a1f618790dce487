"""Loading a spaCy pipeline by name: ``link --pipeline/--ner``, ``annotate --pipeline``, the Ray
engine's actors and ``calibrate`` go through this one loader, so 'default', a folder and a package
mean the same everywhere."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from spacy_sapbert.errors import InputError

if TYPE_CHECKING:
    from spacy.language import Language


DEVICE_FACTORIES = ("sapbert_linker", "sapbert_ner", "genbioel_linker")
"""The factories whose pipes run a transformer, and so take ``--device``."""
ONNX_FACTORIES = ("sapbert_linker", "sapbert_ner")
"""The factories whose transformers also run on ONNX Runtime (a ``backend`` setting of ``onnx``)."""


def pipeline_location(pipeline: str) -> Path:
    """The folder of ``pipeline``: the embedded default, a saved folder, or an installed package's data."""
    import spacy

    from spacy_sapbert.default import default_pipeline_path

    if pipeline == "default":
        return Path(default_pipeline_path())
    if Path(pipeline).is_dir():
        return Path(pipeline)
    if spacy.util.is_package(pipeline):
        package = spacy.util.get_package_path(pipeline)
        meta = spacy.util.load_meta(package / "meta.json")
        return package / f"{meta['lang']}_{meta['name']}-{meta['version']}"
    raise InputError("no such pipeline: not a folder written by nlp.to_disk, nor an installed spaCy package "
                     "('default' is the embedded one)", pipeline, field="--pipeline")


def load_pipeline(pipeline: str, device: Optional[str], onnx: bool = False) -> "Language":
    """``spacy.load`` of ``pipeline`` ('default', a folder or a package), its linkers on ``device``.

    A name that is neither is an :class:`InputError` (one line on the command line) rather than
    spaCy's E050. ``device`` None keeps each pipe's own setting; otherwise every pipe made by
    one of :data:`DEVICE_FACTORIES` is loaded onto ``device`` (through spaCy's config overrides, so the
    encoder is never built on the wrong device first). ``onnx``: every pipe of :data:`ONNX_FACTORIES` runs
    on ONNX Runtime, in a process that never imports torch (:func:`~spacy_sapbert.util.torch_free.block_torch`,
    which must come before spaCy is imported: the command line's case); a pipe that needs torch is an error.
    """
    if onnx:
        from spacy_sapbert.util.torch_free import block_torch

        block_torch()
    import spacy
    from spacy.util import load_config

    location = pipeline_location(pipeline)
    target = pipeline if spacy.util.is_package(pipeline) and not Path(pipeline).is_dir() else location
    if not device and not onnx:
        return spacy.load(target)
    config_file = Path(location) / "config.cfg"
    components = load_config(config_file).get("components", {}) if config_file.is_file() else {}
    overrides = {}
    if device:
        names = [name for name, cfg in components.items() if cfg.get("factory") in DEVICE_FACTORIES]
        overrides.update({f"components.{name}.device": device for name in names or ["sapbert_linker"]})
    if onnx:
        others = [name for name, cfg in components.items()
                  if cfg.get("factory") in DEVICE_FACTORIES and cfg.get("factory") not in ONNX_FACTORIES]
        if others:
            raise InputError(f"--onnx: the pipes {others} run on torch only", str(location), field="--onnx")
        names = [name for name, cfg in components.items() if cfg.get("factory") in ONNX_FACTORIES]
        overrides.update({f"components.{name}.backend": "onnx" for name in names})
    return spacy.load(target, config=overrides)
