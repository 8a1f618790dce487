"""The NER's output folder: the spaCy pipeline ``ner-train`` and ``ner-student-export`` write, and where they start.

A folder of tokenizer → ``sapbert_ner`` → ``abbreviation_entities`` holding the model in float16 with its
gazetteer, which ``package-ner`` puts into a whole pipeline. Apart from the trainer so that the student's export,
which trains nothing, writes the same folder the same way.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Dict, Sequence

import spacy
import torch

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.encoding.modelfiles import resolve_model_path
from spacy_sapbert.errors import InputError
from spacy_sapbert.ner import model as tagger_model

from .config import DEFAULT_BASE

TOKENIZER_CONFIG = {"nlp": {"tokenizer": {"@tokenizers": "sapbert.ScispacyTokenizer.v1", "split_hyphens": True}}}
"""The tokenizer of ``configs/ner.cfg`` and of ``ner-data``'s DocBins."""


def base_encoder_folder(base_model: str) -> Path:
    """``default`` → the encoder folder of the embedded default pipeline; else a folder or installed model."""
    if base_model == DEFAULT_BASE:
        from spacy_sapbert.default import DEFAULT_PIPELINE

        return Path(DEFAULT_PIPELINE) / LINKER_PIPE / "encoder"
    resolved = resolve_model_path(base_model)
    if not isinstance(resolved, Path):
        raise InputError(f"{base_model!r} is not a local BERT folder (the NER trainer reads safetensors folders)",
                         field="base_model")
    return resolved


def is_ner_output(folder: Path) -> bool:
    """A folder that :func:`write_pipeline` wrote: the NER's files and no other pipe's (a whole pipeline, the
    embedded default say, also holds ``sapbert_ner/tagger.json`` but is no earlier output to replace)."""
    return (folder / "sapbert_ner" / tagger_model.SETTINGS_FILE).is_file() and not (folder / LINKER_PIPE).exists()


def write_pipeline(model: torch.nn.Module, tokenizer_folder: Path, tags: Sequence[str], gazetteer, output: Path,
                   settings: Dict[str, Any]) -> Path:
    """A spaCy pipeline folder (tokenizer → ``sapbert_ner`` → ``abbreviation_entities``) holding
    ``model`` in float16 with its gazetteer; ``settings`` go into ``tagger.json``."""
    from spacy_sapbert.util.atomic import atomic_dir

    with atomic_dir(output) as tmp:
        folder = tmp / "_model"
        tagger_model.save(model, tokenizer_folder, tags, folder, dtype=torch.float16, extra=settings)
        gazetteer.to_disk(folder)
        nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
        nlp.add_pipe("sapbert_ner").from_disk(folder)  # config keeps model = null: the files travel
        nlp.add_pipe("abbreviation_entities")
        nlp.to_disk(tmp / "pipeline")
        for item in (tmp / "pipeline").iterdir():
            shutil.move(str(item), str(tmp / item.name))
        shutil.rmtree(tmp / "pipeline")
        shutil.rmtree(folder)
    return output


__all__ = ["TOKENIZER_CONFIG", "base_encoder_folder", "is_ner_output", "write_pipeline"]
