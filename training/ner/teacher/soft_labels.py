"""The teacher's soft labels, read back for the student and for scoring the teacher.

``soft_labels.safetensors`` (written by :mod:`.fit`) holds, per part of the teacher's inputs, one
probability row per spaCy token (float16) and the documents' token offsets. The student reads the
rows of the documents it reads itself, from the same DocBin file; a document whose token count
differs is refused by name, so labels never slide onto the wrong tokens.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Sequence, Union

import numpy as np

from spacy_sapbert.errors import InputError

PathLike = Union[str, Path]


class SoftLabels:
    """Per part: the documents' probability rows (tokens × tags)."""

    def __init__(self, path: PathLike) -> None:
        from safetensors import safe_open
        from safetensors.numpy import load_file

        self.path = Path(path)
        if not self.path.is_file():
            raise InputError("soft labels not found (train the teacher with `sapbert ner-teacher-fit`)", self.path)
        try:
            with safe_open(str(self.path), framework="np") as handle:
                metadata = dict(handle.metadata() or {})
            self._arrays = load_file(str(self.path))
        except Exception as err:  # safetensors raises its own error types for a damaged file
            raise InputError(f"not a safetensors file ({err})", self.path) from err
        if metadata.get("format") != "1" or "tags" not in metadata or "parts" not in metadata:
            raise InputError("not a soft-labels file (metadata format/tags/parts missing)", self.path, field="format")
        self.tags: List[str] = json.loads(metadata["tags"])
        self.parts: List[dict] = json.loads(metadata["parts"])
        self.training: Dict = json.loads(metadata.get("training", "{}"))
        self.teacher: str = metadata.get("teacher", "")
        """The teacher model's folder name (all-mpnet-base-v2)."""
        self.data: str = metadata.get("data", "")
        """The digest of the corpus files the teacher's inputs were cut from."""

    def unlabelled(self) -> List[str]:
        """The parts whose text only the teacher labelled (``--teacher-text all``)."""
        return [p["name"] for p in self.parts if p["role"] == "unlabelled"]

    def provenance(self, text: Sequence[str]) -> Dict[str, object]:
        """What a student trained on these labels records of its teacher (model, seeds, and ``text``: the
        parts it read with the teacher's labels alone), so that a package built where the file is not
        still says what taught it."""
        return {"teacher_model": self.teacher, "teacher_seeds": self.training.get("seeds"), "teacher_text": list(text)}

    def part_for_file(self, file: PathLike) -> str:
        """The name of the part read from corpus file ``file`` (its name, as the inputs listed it; its
        bytes checked against the inputs' digest of it)."""
        for part in self.parts:
            if Path(part["file"]).name == Path(file).name:
                self.check_file(part["name"], file)
                return part["name"]
        raise InputError(f"no part was read from {Path(file).name} (parts: {[p['file'] for p in self.parts]})",
                         self.path, field="parts")

    def check_file(self, name: str, file: PathLike) -> bool:
        """True if ``file`` is the one part ``name`` was cut from (its sha256, where the inputs recorded it)."""
        import hashlib

        expected = next((p.get("sha256") for p in self.parts if p["name"] == name), None)
        if expected and hashlib.sha256(Path(file).read_bytes()).hexdigest() != expected:
            raise InputError(f"{file} differs from the file part {name!r} was labelled from (rebuilt corpus? "
                             "cut the teacher's inputs again)", self.path, field=name)
        return True

    def docs(self, name: str, docs: Sequence) -> List[np.ndarray]:
        """Probability rows of part ``name`` for ``docs`` (the part's documents, in order), float32."""
        if f"{name}/probs" not in self._arrays:
            raise InputError(f"no part {name!r}", self.path, field="parts")
        probs, offsets = self._arrays[f"{name}/probs"], self._arrays[f"{name}/doc_offsets"]
        if len(offsets) - 1 != len(docs):
            raise InputError(f"part {name!r} has {len(offsets) - 1} documents, the corpus file {len(docs)}",
                             self.path, field=name)
        out = []
        for d, doc in enumerate(docs):
            lo, hi = int(offsets[d]), int(offsets[d + 1])
            if hi - lo != len(doc):
                raise InputError(f"part {name!r} document {d}: {hi - lo} tokens, the corpus file's {len(doc)} "
                                 "(the teacher read another tokenisation)", self.path, field=name)
            out.append(probs[lo:hi].astype(np.float32))
        return out

    def part(self, name: str, n_tokens: int) -> np.ndarray:
        """Every probability row of part ``name`` (float32), which must have ``n_tokens`` tokens."""
        if f"{name}/probs" not in self._arrays:
            raise InputError(f"no part {name!r}", self.path, field="parts")
        probs = self._arrays[f"{name}/probs"]
        if len(probs) != n_tokens:
            raise InputError(f"part {name!r} has {len(probs)} tokens, expected {n_tokens}", self.path, field=name)
        return probs.astype(np.float32)

    def check_tags(self, tags: Sequence[str]) -> None:
        if list(tags) != self.tags:
            raise InputError(f"tags {self.tags} differ from the student's {list(tags)}: not its teacher's soft labels",
                             self.path, field="tags")


def score_teacher(path: PathLike, corpus: PathLike) -> Dict[str, Dict[str, float]]:
    """Strict span P/R/F1 of the teacher's labels on each ``dev`` part, decoded as the student
    decodes (Viterbi over log-probabilities, the same span rules) against the DocBin's gold."""
    import spacy

    from ..tagger.data import read_docbin, span_f1
    from spacy_sapbert.ner.tagging import Tagging
    from spacy_sapbert.ner.tags import TagScheme

    from .inputs import TOKENIZER_CONFIG

    labels = SoftLabels(path)
    decoder = Tagging(None, None, None, TagScheme.from_tags(labels.tags))  # the student's decoding, no model
    nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
    scores = {}
    for part in labels.parts:
        if part["role"] != "dev":
            continue
        docs = read_docbin(Path(corpus) / part["file"], nlp)
        logprobs = [np.log(np.clip(rows, 1e-8, 1.0)) for rows in labels.docs(part["name"], docs)]
        scores[part["name"]] = span_f1(docs, decoder.spans(docs, logprobs))
    return scores
