"""``reranker.json``, the settings file of a re-ranker folder (:class:`RerankerSettings`): how the
(mention in context, candidate) pairs are built, and how the model's scores become decisions
(temperature, first-stage weight, margin), with the checks a file read from disk must pass.

Apart from :mod:`spacy_sapbert.linking.rerank.model` because the file is read and written without
the model: the trainer fills one in before there is a model, and the checks need neither torch nor
the weights.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.util.jsonfile import read_json_object

PathLike = Union[str, Path]
SETTINGS_FILE = "reranker.json"
FORMAT_VERSION = 1


@dataclass
class RerankerSettings:
    """``reranker.json``: how pairs are built and how scores become decisions."""

    max_length: int = 64
    """Tokens of a whole pair, ``[CLS] context [SEP] candidate [SEP]``."""
    max_candidate_length: int = 24
    """Tokens a candidate text is cut to; the context gets what the longest candidate leaves."""
    marker_start: str = "«"
    marker_end: str = "»"
    separator: str = " ; "
    """Between a candidate's best-matching name and its canonical name
    (:func:`~spacy_sapbert.linking.rerank.inputs.candidate_text`)."""
    k: int = 8
    """Candidates per mention the model was trained (and calibrated) on: re-rank the first stage's top k."""
    temperature: float = 1.0
    """``probabilities = softmax(scores / temperature)``; fitted on dev by minimising the NLL."""
    first_stage_weight: float = 0.0
    """A candidate's decision score is the model's score plus this times its first-stage cosine (the
    model was trained on that sum, so it learned a correction of the first stage rather than a ranking
    from scratch); 0: the model's score alone. See
    :meth:`~spacy_sapbert.linking.rerank.model.Reranker.score`."""
    margin: float = 0.0
    """The re-ranker's best candidate replaces the first stage's top one only when its probability is higher
    by more than this (tuned on dev; 0: the re-ranker's order as it is). See
    :meth:`~spacy_sapbert.linking.rerank.model.Reranker.choose`."""
    format_version: int = FORMAT_VERSION
    training: Dict[str, Any] = field(default_factory=dict)
    """How the model was made (read by nobody at inference)."""

    def validate(self, where: Optional[PathLike] = None) -> "RerankerSettings":
        checks = [(self.format_version == FORMAT_VERSION, "format_version", f"must be {FORMAT_VERSION}"),
                  (self.max_length >= 16, "max_length", "must be >= 16"),
                  (1 <= self.max_candidate_length < self.max_length, "max_candidate_length", "must be 1..max_length"),
                  (bool(self.marker_start.strip() and self.marker_end.strip()), "marker_start", "markers must be text"),
                  (self.k >= 1, "k", "must be >= 1"),
                  (self.temperature > 0, "temperature", "must be > 0"),
                  (self.first_stage_weight >= 0, "first_stage_weight", "must be >= 0"),
                  (0.0 <= self.margin < 1.0, "margin", "must be in [0, 1)")]
        for ok, name, problem in checks:
            if not ok:
                raise InputError(f"{problem}, got {getattr(self, name)!r}", where, field=name)
        return self

    @classmethod
    def read(cls, path: PathLike) -> "RerankerSettings":
        data = read_json_object(path, FORMAT_VERSION, "re-ranker")
        known = {f for f in cls.__dataclass_fields__}
        try:
            return cls(**{k: v for k, v in data.items() if k in known}).validate(path)
        except TypeError as err:
            raise InputError(f"bad settings ({err})", path) from err

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False, default=str) + "\n"


__all__ = ["FORMAT_VERSION", "RerankerSettings", "SETTINGS_FILE"]
