"""``genbioel_linker``: the generative linker as a spaCy pipe, writing what ``sapbert_linker`` writes.

For each entity (``doc.ents``) the pipe normalises the mention as training did
(:func:`spacy_sapbert.kb.normalize.normalize`), takes up to ``context_chars`` characters of the
document on each side, and runs constrained beam search over a trie of every normalised name
of the KB: ``span._.kb_ents`` gets ``[(concept_id, score), …]`` (scispaCy's shape, best
first, ``top`` concepts) with score the exponential of the beam's mean token log-probability,
and ``ent.kb_id_`` the best concept when its score reaches ``threshold``.

The model and the KB load on first use (a pipeline loads in seconds; the trie over a large
KB takes longer). ``to_disk`` writes ``cfg.json``, the model folder and the KB file, so the
saved pipeline needs neither the paths it was built from nor a network.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

from spacy_sapbert.errors import InputError
from spacy_sapbert.generative import CONTEXT_CHARS

KB_FILE = "kb.jsonl.gz"
DEFAULTS: Dict[str, Any] = {"model": None, "kb": None, "beams": 5, "top": 5, "threshold": 0.0,
                            "context_chars": CONTEXT_CHARS, "extension": "kb_ents", "device": "cpu"}
Links = List[Tuple[str, float]]


class GenerativeLinkerPipe:
    """The pipe (see the module's docstring); ``predict``/``set_annotations`` as spaCy's Pipe has them."""

    def __init__(self, nlp: Language, name: str, **settings: Any) -> None:
        self.name = name
        self.cfg = {**DEFAULTS, **settings}
        if int(self.cfg["beams"]) < 1 or int(self.cfg["top"]) < 1:
            raise InputError("beams and top must be >= 1", field="beams")
        if not Span.has_extension(self.cfg["extension"]):
            Span.set_extension(self.cfg["extension"], default=[])
        self._model: Any = None
        self._trie: Any = None

    def _load(self) -> None:
        if self._model is not None:
            return
        from spacy_sapbert.generative.seq2seq import GenerativeModel
        from spacy_sapbert.generative.kb_names import kb_name_trie
        from spacy_sapbert.kb.knowledge_base import KnowledgeBase

        for key in ("model", "kb"):
            if not self.cfg[key]:
                raise InputError(f"the genbioel_linker pipe needs its {key!r} setting (a path)", field=key)
        self._model = GenerativeModel.load(self.cfg["model"], device=self.cfg["device"])
        self._trie = kb_name_trie(self._model, KnowledgeBase.from_jsonl(self.cfg["kb"]))

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], batch_size: int = 32) -> Iterator[Doc]:
        for doc in stream:
            yield self(doc)

    def predict(self, docs: Sequence[Doc]) -> List[List[Links]]:
        """Per document, per entity, the ranked concepts."""
        from spacy_sapbert.generative.kb_names import generated_concepts

        self._load()
        options = {"beams": int(self.cfg["beams"]), "top": int(self.cfg["top"]),
                   "context_chars": int(self.cfg["context_chars"])}
        return [[generated_concepts(self._model, self._trie, doc.text, ent.start_char, ent.end_char, ent.text,
                                    **options) for ent in doc.ents] for doc in docs]

    def set_annotations(self, docs: Sequence[Doc], predictions: Sequence[List[Links]]) -> None:
        extension, threshold = self.cfg["extension"], float(self.cfg["threshold"])
        for doc, links in zip(docs, predictions):
            linked = [(ent, ranked, ranked[0][0] if ranked and ranked[0][1] >= threshold else "")
                      for ent, ranked in zip(doc.ents, links)]
            doc.ents = [Span(doc, ent.start, ent.end, label=ent.label_, kb_id=best) for ent, _, best in linked]
            for ent, (_, ranked, _) in zip(doc.ents, linked):  # after: an extension's value is keyed by kb_id
                ent._.set(extension, ranked)

    def to_disk(self, path: Any, *, exclude: Sequence[str] = ()) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        cfg = dict(self.cfg)
        if "model" not in exclude and cfg["model"]:
            target = path / "model"
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(cfg["model"], target)
        if "kb" not in exclude and cfg["kb"]:
            shutil.copyfile(cfg["kb"], path / KB_FILE)
        cfg.pop("model"), cfg.pop("kb")
        (path / "cfg.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")

    def from_disk(self, path: Any, *, exclude: Sequence[str] = ()) -> "GenerativeLinkerPipe":
        path = Path(path)
        if (path / "cfg.json").is_file() and "cfg" not in exclude:
            self.cfg.update(json.loads((path / "cfg.json").read_text(encoding="utf-8")))
        if (path / "model").is_dir() and "model" not in exclude:
            self.cfg["model"] = str(path / "model")
        if (path / KB_FILE).is_file() and "kb" not in exclude:
            self.cfg["kb"] = str(path / KB_FILE)
        self._model = self._trie = None
        return self


@Language.factory("genbioel_linker", default_config=DEFAULTS, assigns=["span._.kb_ents", "token.ent_kb_id"])
def make_genbioel_linker(nlp: Language, name: str, model: Optional[str], kb: Optional[str], beams: int, top: int,
                         threshold: float, context_chars: int, extension: str, device: str) -> GenerativeLinkerPipe:
    """The generative linker pipe; ``model``: a folder from ``sapbert generative train``, ``kb``: a KB JSONL."""
    return GenerativeLinkerPipe(nlp, name, model=model, kb=kb, beams=beams, top=top, threshold=threshold,
                                context_chars=context_chars, extension=extension, device=device)


__all__ = ["GenerativeLinkerPipe", "make_genbioel_linker"]
