"""The ``sapbert_ner`` pipe: CHEMICAL/DISEASE spans from a fine-tuned MiniLM with KB-name features.

spaCy's transition-based NER on a hash-embedding tok2vec knows only the words of its training
abstracts; this pipe reads each token in context with the project's transformer and with a flag
saying whether it starts or continues a KB name (:mod:`.gazetteer`). Its surface is spaCy's
(``__call__``, ``pipe``, ``predict``/``set_annotations``, ``to_disk``/``from_disk`` with
``exclude``); entities already on the doc (an ``entity_ruler`` placed before it) are kept and
the pipe's spans that overlap them are dropped.

The pipe folder holds the model files of :mod:`.model` and ``gazetteer.tsv.gz``; the settings
(batch size, windows, precision…) live in the pipeline's config, as the factory's arguments.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc
from spacy.util import minibatch

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError
from spacy_sapbert.ner import model_files
from spacy_sapbert.ner.model_files import as_backend, word_table
from spacy_sapbert.ner.features import n_features
from spacy_sapbert.ner.gazetteer import FILE_NAME as GAZETTEER_FILE
from spacy_sapbert.ner.gazetteer import Gazetteer
from spacy_sapbert.ner.tagging import Tagging
from spacy_sapbert.ner.tags import TagScheme

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
MODEL_FILES = ("model.safetensors", "config.json", "tokenizer.json", model_files.SETTINGS_FILE)


@Language.factory(
    "sapbert_ner",
    default_config={"model": None, "batch_size": 16, "max_pieces": 256, "overlap": 64, "style": None,
                    "drop_gene_symbols": False, "device": "cpu", "precision": "auto", "backend": "auto"},
)
def make_sapbert_ner(nlp: Language, name: str, model: Optional[str], batch_size: int, max_pieces: int,
                     overlap: int, style: Optional[str], drop_gene_symbols: bool, device: str,
                     precision: str, backend: str) -> "TransformerNER":
    """``model``: a folder written by ``sapbert ner-train`` (``…/model-best/sapbert_ner``); ``None``
    when the pipe is loaded from a saved pipeline (``from_disk`` reads it). ``backend``: ``torch``, ``onnx``
    (ONNX Runtime, float32 on the CPU, no torch import) or ``auto`` (torch where it imports, else onnx)."""
    return TransformerNER(nlp, name, model=model, batch_size=batch_size, max_pieces=max_pieces, overlap=overlap,
                          style=style, drop_gene_symbols=drop_gene_symbols, device=device, precision=precision,
                          backend=backend)


class TransformerNER(Pipe):
    """Token tagging with a transformer; see the module docstring."""

    def __init__(self, nlp: Language, name: str = "sapbert_ner", model: Optional[PathLike] = None,
                 batch_size: int = 16, max_pieces: int = 256, overlap: int = 64, style: Optional[str] = None,
                 drop_gene_symbols: bool = False, device: str = "cpu", precision: str = "auto",
                 backend: str = "auto") -> None:
        self.vocab = nlp.vocab
        self.nlp = nlp
        self.name = name
        self.shared_from: Optional[str] = None
        """The pipe whose encoder holds this model's word-piece table, when it is saved without it."""
        self.cfg: Dict[str, Any] = {"batch_size": batch_size, "max_pieces": max_pieces, "overlap": overlap,
                                    "style": style, "drop_gene_symbols": drop_gene_symbols, "device": device,
                                    "precision": precision, "backend": backend}
        self.tagging: Optional[Tagging] = None
        self.folder: Optional[Path] = Path(model) if model is not None else None
        """Where the model files are; read on first use, so that ``spacy.load`` of a saved pipeline
        (whose config may still name the folder the pipe was created from) reads only its own copy."""

    def _load(self, folder: Path) -> None:
        for name in MODEL_FILES + (GAZETTEER_FILE,):
            if not (folder / name).is_file():
                raise InputError(f"not a sapbert_ner model folder: {name} is missing", folder)
        settings = model_files.read_settings(folder)
        shared = settings.get(model_files.SHARED_KEY)
        backend = _pick_backend(self.cfg["backend"], self.cfg["device"])
        table = self._shared_table(shared["from"], folder, shared["sha256"]) if shared else None
        self.shared_from = shared["from"] if shared else None
        if backend == "onnx":
            from spacy_sapbert.encoding.backends import onnx_precision
            from spacy_sapbert.ner import onnx_tagger

            dtype = onnx_precision(self.cfg["precision"], self.name)
            model, tokenizer, settings = onnx_tagger.load(folder, as_backend(table, "onnx") if shared else None,
                                                          table_checked=True)
            self._set_tagging(folder, model, tokenizer, settings, "cpu", dtype, backend)
            return
        from spacy_sapbert.encoding.int8 import INT8, quantize_linears
        from spacy_sapbert.ner import model as tagger_model
        from spacy_sapbert.util.devices import auto_precision, check_dtype, resolve_device

        device = resolve_device(self.cfg["device"])
        dtype = check_dtype(self.cfg["precision"], "precision", int8=True)
        if dtype == "auto":  # not int8: faster on AVX2-only CPUs, but it costs NER F1 (int8.py)
            dtype = auto_precision(device)
        if dtype == INT8 and device != "cpu":
            logger.warning("%s: int8 runs on CPU only; tagging in float32 on %s", self.name, device)
            dtype = "float32"
        # the linear layers in the precision autocast computes them in (half_weights.half_linear_weights)
        model, tokenizer, settings = tagger_model.load(folder, as_backend(table, "torch") if shared else None,
                                                       table_checked=True,  # checked just above
                                                       linear_dtype=dtype)
        model = quantize_linears(model) if dtype == INT8 else model
        self._set_tagging(folder, model.to(device), tokenizer, settings, device, dtype, backend)

    def _set_tagging(self, folder: Path, model: Any, tokenizer: Any, settings: Dict[str, Any], device: str, dtype: str,
                     backend: str) -> None:
        """The :class:`Tagging` of a loaded model, its gazetteer read and checked against the model's features."""
        gazetteer = Gazetteer.from_disk(folder)
        shapes, styles = bool(settings.get("shapes", False)), tuple(settings.get("styles", ()))
        expected = n_features(gazetteer, shapes, len(styles))
        if expected != settings["n_features"]:
            raise InputError(f"gazetteer, shapes and styles give {expected} feature ids, the model has "
                             f"{settings['n_features']}", folder / GAZETTEER_FILE)
        self.tagging = Tagging(model, tokenizer, gazetteer, TagScheme.from_tags(settings["tags"]),
                               max_pieces=self.cfg["max_pieces"], overlap=self.cfg["overlap"],
                               batch_size=self.cfg["batch_size"], device=device, dtype=dtype, backend=backend,
                               shapes=shapes, styles=styles, style=self.cfg["style"],
                               drop_gene_symbols=self.cfg["drop_gene_symbols"])
        self.tagging.style_index()  # an unknown style is an error now, not at the first document
        self.folder = folder

    def _shared_table(self, source: str, folder: Optional[Path] = None, digest: Optional[str] = None) -> Any:
        """The word-piece table of pipe ``source``'s encoder, or, when the pipeline has no such pipe
        (excluded, renamed) or its encoder is another model, the table in the saved pipeline's
        ``<source>/encoder`` folder beside this pipe's: the NER works alone and a linker added
        later never changes what it tags. ``digest`` (from ``tagger.json``) must match."""
        table = None
        pipe = self.nlp.get_pipe(source) if source in self.nlp.component_names else None
        if pipe is not None and getattr(pipe, "is_ready", False):  # loaded already: share its tensor
            table = word_table(pipe.encoder.model)
            if digest is None or model_files.table_digest(table) == digest:
                return table
        saved = folder.parent / source / "encoder" if folder is not None else None
        if saved is not None and (saved / "model.safetensors").is_file():
            # next: reading one tensor of the saved pipeline never loads (or waits for) a linker
            table = model_files.read_table(saved)
            if digest is None or model_files.table_digest(table) == digest:
                return table
        if pipe is not None:
            # the encoder alone (not its KB and index) when the pipe can give it: a mismatch is found
            # before a whole KB is encoded
            encoder = pipe.peek_encoder() if hasattr(pipe, "peek_encoder") else getattr(pipe, "encoder", None)
            table = word_table(encoder.model) if encoder is not None else None
            if digest is None or table is not None and model_files.table_digest(table) == digest:
                return table
        where = (folder or Path(".")) / model_files.SETTINGS_FILE
        lacks = "differs" if table is not None else "cannot be found"
        raise InputError(f"this NER takes its word-piece table from the {source!r} pipe's encoder, and that table "
                         f"{lacks} (pipes: {self.nlp.component_names}; saved encoder looked for in {saved})", where)

    def share_word_embeddings(self, source: str = LINKER_PIPE) -> bool:
        """Save this model without its word-piece table when pipe ``source``'s encoder has the same one
        (a NER trained with frozen embeddings from the linker's encoder); True if it does."""
        own = word_table(self._ready().model)
        table = self._shared_table(source)
        if tuple(own.shape) != tuple(table.shape) or \
                model_files.table_digest(own) != model_files.table_digest(table):
            return False
        self.shared_from = source
        return True

    @property
    def labels(self) -> Sequence[str]:
        """The labels of the model: read from its settings file when it is not loaded yet (a
        pipeline saved before its NER ran, as ``sapbert calibrate --output`` does, must still
        list them in ``meta.json``); empty when there is no model folder to read."""
        if self.tagging is not None:
            return self.tagging.scheme.labels
        settings = self.folder / model_files.SETTINGS_FILE if self.folder is not None else None
        if settings is None or not settings.is_file():
            return ()
        try:
            return TagScheme.from_tags(model_files.read_settings(self.folder)["tags"]).labels
        except (InputError, ValueError, KeyError):
            return ()  # a broken folder is reported when the model loads, not while spaCy reads labels

    def _ready(self) -> Tagging:
        if self.tagging is None:
            if self.folder is None:
                raise ValueError(f"{self.name}: no model: create the pipe with config {{'model': FOLDER}} or load "
                                 "a saved pipeline")
            self._load(self.folder)
        assert self.tagging is not None
        return self.tagging

    def predict(self, docs: Iterable[Doc]) -> List[np.ndarray]:
        """Per doc, log-probabilities of each tag for each token (tokens × tags)."""
        return self._ready().scores(list(docs))

    def set_annotations(self, docs: Iterable[Doc], scores: Sequence[np.ndarray]) -> None:
        docs = list(docs)
        for doc, spans in zip(docs, self._ready().spans(docs, scores)):
            taken = {i for ent in doc.ents for i in range(ent.start, ent.end)}
            kept = [s for s in spans if not any(i in taken for i in range(s.start, s.end))]
            doc.ents = sorted(list(doc.ents) + kept, key=lambda s: s.start)

    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        for docs in minibatch(stream, size=batch_size):
            self.set_annotations(docs, self.predict(docs))
            yield from docs

    def to_disk(self, path: PathLike, *, exclude: Sequence[str] = tuple()) -> None:
        """Copy the model files; rewrite them (float16) where the word-piece table is to be left out
        (:meth:`share_word_embeddings`) or put back (its source pipe was removed from the pipeline)."""
        tagging = self._ready()
        assert self.folder is not None
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if "model" in exclude:
            return
        settings = model_files.read_settings(self.folder)
        shared = self.shared_from if self.shared_from in self.nlp.pipe_names else None
        if shared == (settings.get(model_files.SHARED_KEY) or {}).get("from"):
            if self.folder.resolve() != path.resolve():
                for name in MODEL_FILES + (GAZETTEER_FILE,):
                    shutil.copyfile(self.folder / name, path / name)
            return
        if tagging.backend == "onnx":
            raise InputError(f"{self.name}: rewriting the model files (to leave out or put back the word-piece table) "
                             "needs the torch backend; this pipe runs on onnx", path)
        import torch

        from spacy_sapbert.encoding.half_weights import has_half_linears
        from spacy_sapbert.encoding.int8 import is_quantized
        from spacy_sapbert.ner import model as tagger_model

        skip = ("format", "tags", "n_features", model_files.SHARED_KEY)
        extra = {k: v for k, v in settings.items() if k not in skip}
        model = tagging.model
        if is_quantized(model) or has_half_linears(model):  # no float weights in use: the files have them
            table = word_table(model)  # left as it was: the one in use
            model = tagger_model.load(self.folder, table, table_checked=True)[0]
        tagger_model.save(model, self.folder, tagging.scheme.tags, path, dtype=torch.float16, extra=extra,
                          shared_from=shared)
        if self.folder.resolve() != path.resolve():
            shutil.copyfile(self.folder / GAZETTEER_FILE, path / GAZETTEER_FILE)

    def from_disk(self, path: PathLike, *, exclude: Sequence[str] = tuple()) -> "TransformerNER":
        path = Path(path)
        if "model" not in exclude:  # read on first use: the pipe whose word-piece table it may share loads later
            self.folder, self.tagging = path, None
        return self


NER_BACKENDS = ("auto", "torch", "onnx")


def _pick_backend(backend: str, device: str) -> str:
    """``auto``: torch where it imports, else onnx (:mod:`spacy_sapbert.ner.onnx_tagger`); onnx runs on the CPU
    (the encoder's rule: :func:`~spacy_sapbert.encoding.backends.wants_onnx`)."""
    from spacy_sapbert.encoding.backends import onnx_device, wants_onnx

    backend = str(backend or "auto").lower()
    if backend not in NER_BACKENDS:
        raise InputError(f"unknown backend {backend!r}: use one of {NER_BACKENDS}", field="backend")
    if not wants_onnx(backend):
        return "torch"
    onnx_device(device)
    return "onnx"
