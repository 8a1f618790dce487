"""A trained ``sapbert_ner`` pipeline with its gazetteer rebuilt from other KB files.

The gazetteer feature of a token says only whether it begins or continues the longest KB name of
a label (:mod:`spacy_sapbert.ner.gazetteer`), so a gazetteer with more names of the same labels
(MeSH supplementary records, DrugBank synonyms) feeds the trained model the same kind of signal
for more tokens. The feature count must not change; it is checked, and the pipeline is written
to a new folder, never over the model it came from.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Sequence, Union

import spacy

from spacy_sapbert.errors import InputError
from spacy_sapbert.ner import model as tagger_model
from spacy_sapbert.ner.features import n_features
from spacy_sapbert.util.atomic import atomic_dir, check_replaceable

from .tagger.data import build_gazetteer

PathLike = Union[str, Path]
PIPE = "sapbert_ner"


def swap_gazetteer(ner_model: PathLike, kb_files: Sequence[PathLike], output: PathLike) -> int:
    """Write ``ner_model`` with a gazetteer of ``kb_files``' names to ``output``; returns its size."""
    ner_model, output = Path(ner_model), Path(output)
    folder = ner_model / PIPE
    if not (folder / tagger_model.SETTINGS_FILE).is_file():
        raise InputError(f"not a sapbert_ner pipeline ({PIPE}/{tagger_model.SETTINGS_FILE} missing)", ner_model)
    if output.resolve() == ner_model.resolve():
        raise InputError("write the new pipeline to another folder", output, field="--output")
    check_replaceable(output, lambda p: (p / PIPE / tagger_model.SETTINGS_FILE).is_file(),
                      "a sapbert_ner pipeline", "Choose a new or empty --output.")
    settings = tagger_model.read_settings(folder)
    nlp = spacy.load(ner_model, exclude=[PIPE])
    labels = settings.get("label_to_types") or (settings.get("training") or {}).get("label_to_types")
    if not labels:
        raise InputError("tagger.json records no label_to_types", folder / tagger_model.SETTINGS_FILE)
    gazetteer = build_gazetteer(kb_files, labels, nlp)
    expected = n_features(gazetteer, bool(settings.get("shapes")), len(settings.get("styles", ())))
    if expected != settings["n_features"]:
        raise InputError(f"the new gazetteer gives {expected} feature ids, the model reads {settings['n_features']}",
                         folder / tagger_model.SETTINGS_FILE)
    with atomic_dir(output) as tmp:
        for item in ner_model.iterdir():
            (shutil.copytree if item.is_dir() else shutil.copyfile)(item, tmp / item.name)
        gazetteer.to_disk(tmp / PIPE)
    return len(gazetteer)
