"""The ``sapbert_linker`` spaCy pipe: entity spans → :class:`~spacy_sapbert.linker.Linker`.

Found by spaCy through the ``spacy_factories`` entry point, so
``nlp.add_pipe("sapbert_linker", config={"kb": "kbs/medic.jsonl.gz"})`` needs no import.
The model and KB named in the config are loaded on first use (or by
``nlp.initialize()``), so adding the pipe is cheap; a pipeline saved with
``nlp.to_disk`` carries its own encoder, KB and index and never reads the configured
paths again::

    <pipeline>/<name>/cfg.json        settings and the KB's name
    <pipeline>/<name>/encoder/        HF model folder (safetensors) + sapbert.json
    <pipeline>/<name>/kb.jsonl.gz     the KB
    <pipeline>/<name>/index/          NameIndex files (see spacy_sapbert.index)

Each span gets ``span._.<extension>`` = ``[(concept_id, score), …]`` (scispaCy's
``kb_ents`` shape) and, when a concept passes the threshold, ``span.kb_id_``.
"""
from __future__ import annotations

import json
import logging
import numbers
import re
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span, SpanGroup
from spacy.util import minibatch

from .default import DEFAULT_MODEL, default_index_path, default_kb_name, default_kb_path
from .encoder import BACKENDS, DEFAULT_BATCH_SIZE, DTYPE_CHOICES, POOLINGS, Encoder, check_dtype
from .errors import InputError
from .index import INDEX_KINDS, NameIndex
from .kb import KnowledgeBase
from .linker import DEFAULT_CACHE_SIZE, DEFAULT_K, DEFAULT_MAX_ENTITIES, Candidates, Linker
from .threads import protect_forks

logger = logging.getLogger(__name__)

CFG_FILE = "cfg.json"
KB_FILE = "kb.jsonl.gz"
FORMAT_VERSION = 1
PACKAGE_REQUIREMENT = "spacy-sapbert>=0.1.0,<0.2.0"

DEFAULT_CONFIG: Dict[str, Any] = {
    "model": DEFAULT_MODEL,
    "kb": None,
    "index": None,
    "k": DEFAULT_K,
    "threshold": None,
    "max_entities_per_mention": DEFAULT_MAX_ENTITIES,
    "resolve_abbreviations": True,
    "spans_key": None,
    "extension": "kb_ents",
    "set_kb_id": True,
    "batch_size": DEFAULT_BATCH_SIZE,
    "device": "auto",
    "precision": "auto",
    "backend": "auto",
    "index_kind": "flat",
    "pooling": None,
    "max_length": None,
    "cache_size": DEFAULT_CACHE_SIZE,
}


class SettingError(InputError):
    """A pipe setting with a value it cannot take, reported as
    ``<pipe> setting 'k': expected an integer ≥ 1, got '25' (str)`` when the pipe is added,
    rather than as a TypeError (or a silently wrong link) on the first document."""

    def __init__(self, pipe_name: str, setting: str, expected: str, value: Any) -> None:
        problem = f"expected {expected}, got {value!r} ({type(value).__name__})"
        super().__init__(problem, field=setting)
        self.pipe_name = pipe_name
        self.args = (f"{pipe_name} setting {setting!r}: {problem}",)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _is_dtype(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        check_dtype(value, setting="precision")
    except InputError:
        return False
    return True


_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?", re.IGNORECASE)

SETTING_RULES: Dict[str, Tuple[str, Callable[[Any], bool]]] = {
    # setting: (what it accepts, in the words of the error message; the test)
    "model": ("a model folder or name (a non-empty string)", _is_text),
    "kb": ("null or a knowledge base file (a non-empty string)", lambda v: v is None or _is_text(v)),
    "index": ("null or an index folder (a non-empty string)", lambda v: v is None or _is_text(v)),
    "k": ("an integer ≥ 1", lambda v: _is_int(v) and v >= 1),
    # Scores are cosine similarities of unit vectors, so a threshold outside [-1, 1]
    # either keeps everything or nothing: almost certainly a typo (1.5 for 0.15, a percentage).
    "threshold": ("null (no threshold) or a number from -1 to 1 (scores are cosine similarities, in [-1, 1])",
                  lambda v: v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool) and -1 <= v <= 1)),
    "max_entities_per_mention": ("an integer ≥ 1", lambda v: _is_int(v) and v >= 1),
    "resolve_abbreviations": ("true or false", lambda v: isinstance(v, bool)),
    "spans_key": ("null (link doc.ents) or a span group name (a non-empty string)", lambda v: v is None or _is_text(v)),
    "extension": ("a Python identifier (the X of span._.X)", lambda v: isinstance(v, str) and v.isidentifier()),
    "set_kb_id": ("true or false", lambda v: isinstance(v, bool)),
    "batch_size": ("an integer ≥ 1", lambda v: _is_int(v) and v >= 1),
    "device": ("one of auto, cpu, cuda, cuda:N, mps", lambda v: isinstance(v, str) and bool(_DEVICE.fullmatch(v))),
    "precision": (f"one of {DTYPE_CHOICES}", _is_dtype),
    "backend": (f"one of {', '.join(BACKENDS)}", lambda v: isinstance(v, str) and v.lower() in BACKENDS),
    "index_kind": (f"one of {', '.join(INDEX_KINDS)}", lambda v: v in INDEX_KINDS),
    "pooling": (f"null (the model folder's setting) or one of {', '.join(POOLINGS)}",
                lambda v: v is None or (isinstance(v, str) and v.lower() in POOLINGS)),
    "max_length": ("null (the model folder's setting) or an integer ≥ 3 (tokens per mention, at most the "
                   "model's position limit)", lambda v: v is None or (_is_int(v) and v >= 3)),
    "cache_size": ("an integer ≥ 0 (0 turns the cache off)", lambda v: _is_int(v) and v >= 0),
}
"""Every setting of the ``sapbert_linker`` factory and what it accepts: the one place they are checked."""


def check_setting(setting: str, value: Any, pipe_name: str = "sapbert_linker") -> None:
    """Raise :class:`SettingError` unless ``value`` is allowed for ``setting``. Only the form is
    checked (no file is opened, no model loaded): paths and GPUs are checked when loaded."""
    expected, allowed = SETTING_RULES[setting]
    if not allowed(value):
        raise SettingError(pipe_name, setting, expected, value)


def check_settings(settings: Dict[str, Any], pipe_name: str = "sapbert_linker") -> None:
    """Check every setting in ``settings`` (see :data:`SETTING_RULES`); the first bad one raises."""
    for setting, value in settings.items():
        check_setting(setting, value, pipe_name)


@Language.factory(
    "sapbert_linker",
    default_config=DEFAULT_CONFIG,
    assigns=["span._.kb_ents", "token.ent_kb_id"],
)
def make_sapbert_linker(
    nlp: Language,
    name: str,
    model: str,
    kb: Optional[str],
    index: Optional[str],
    k: int,
    threshold: Optional[float],
    max_entities_per_mention: int,
    resolve_abbreviations: bool,
    spans_key: Optional[str],
    extension: str,
    set_kb_id: bool,
    batch_size: int,
    device: str,
    precision: str,
    backend: str,
    index_kind: str,
    pooling: Optional[str],
    max_length: Optional[int],
    cache_size: int,
) -> "SapBertLinker":
    """Settings (model, kb, index: paths or names; the rest: see README "Usage"), checked by
    :func:`check_settings` when the pipe is constructed."""
    pipe = SapBertLinker(
        nlp, name, model=model, kb=kb, index=index, k=k, threshold=threshold,
        max_entities_per_mention=max_entities_per_mention, resolve_abbreviations=resolve_abbreviations,
        spans_key=spans_key, extension=extension, set_kb_id=set_kb_id, batch_size=batch_size, device=device,
        precision=precision, backend=backend, index_kind=index_kind, pooling=pooling, max_length=max_length, cache_size=cache_size,
    )
    requirements = nlp.meta.setdefault("requirements", [])
    if not any(str(r).startswith("spacy-sapbert") for r in requirements):
        requirements.append(PACKAGE_REQUIREMENT)  # so that `spacy package` depends on us
    return pipe


class SapBertLinker(Pipe):
    """Links the spans of ``doc.ents`` (or ``doc.spans[spans_key]``) to KB concepts."""

    def __init__(
        self,
        nlp: Language,
        name: str = "sapbert_linker",
        *,
        model: str = DEFAULT_MODEL,
        kb: Optional[str] = None,
        index: Optional[str] = None,
        k: int = DEFAULT_K,
        threshold: Optional[float] = None,
        max_entities_per_mention: int = DEFAULT_MAX_ENTITIES,
        resolve_abbreviations: bool = True,
        spans_key: Optional[str] = None,
        extension: str = "kb_ents",
        set_kb_id: bool = True,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "auto",
        precision: str = "auto",
        backend: str = "auto",
        index_kind: str = "flat",
        pooling: Optional[str] = None,
        max_length: Optional[int] = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        # first, before anything is set or loaded: the arguments are exactly the settings
        check_settings({key: value for key, value in locals().items() if key in SETTING_RULES}, name)
        protect_forks()  # before any fork of nlp.pipe(n_process=N), whether or not the encoder ran yet
        self.name = name
        self._warned_missing_group = False
        self.vocab = nlp.vocab
        self._linker: Optional[Linker] = None
        self.model_name = model
        self.kb_path = kb
        self.index_path = index
        self.k = k
        self.threshold = threshold
        self.max_entities_per_mention = max_entities_per_mention
        self.resolve_abbreviations = resolve_abbreviations
        self.spans_key = spans_key
        self.extension = extension
        self.set_kb_id = set_kb_id
        self.batch_size = batch_size
        self.device = device
        self.precision = precision
        self.backend = backend
        self.index_kind = index_kind
        self.pooling = pooling
        self.max_length = max_length
        self.cache_size = cache_size
        _ensure_extension(extension)

    # -- settings that a built linker follows -------------------------------------------
    @property
    def k(self) -> int:
        return self._k

    @k.setter
    def k(self, value: int) -> None:
        check_setting("k", value, self.name)
        self._k = value
        if self._linker is not None:
            self._linker.k = value

    @property
    def threshold(self) -> Optional[float]:
        return self._threshold

    @threshold.setter
    def threshold(self, value: Optional[float]) -> None:
        check_setting("threshold", value, self.name)
        self._threshold = value
        if self._linker is not None:
            self._linker.threshold = value

    @property
    def max_entities_per_mention(self) -> int:
        return self._max_entities_per_mention

    @max_entities_per_mention.setter
    def max_entities_per_mention(self, value: int) -> None:
        check_setting("max_entities_per_mention", value, self.name)
        self._max_entities_per_mention = value
        if self._linker is not None:
            self._linker.max_entities_per_mention = value

    # -- the linker, built on first use ---------------------------------------------
    @property
    def linker(self) -> Linker:
        """The :class:`Linker`; built from the configured model and KB the first time it is needed."""
        if self._linker is None:
            self._linker = self._build()
        return self._linker

    @property
    def is_ready(self) -> bool:
        return self._linker is not None

    @property
    def kb(self) -> KnowledgeBase:
        return self.linker.kb

    @property
    def encoder(self) -> Encoder:
        return self.linker.encoder

    @property
    def index(self) -> NameIndex:
        return self.linker.index

    def _build(self) -> Linker:
        embedded = self.model_name == DEFAULT_MODEL and not self.kb_path
        if not self.kb_path and not embedded:
            raise InputError(f"{self.name}: no knowledge base configured for model {self.model_name!r}; add the pipe "
                             "with config={'kb': 'path/to/kb.jsonl.gz'} (the embedded default KB comes with the "
                             f"embedded default model {DEFAULT_MODEL!r} only)", field="kb")
        encoder = Encoder(self.model_name, pooling=self.pooling, max_length=self.max_length, device=self.device,
                          batch_size=self.batch_size, dtype=self.precision, backend=self.backend)
        kb = KnowledgeBase.from_jsonl(self.kb_path) if self.kb_path else \
            KnowledgeBase.from_jsonl(default_kb_path(), name=default_kb_name())
        index_path = self.index_path or (default_index_path() if embedded and self.index_kind == "flat" and
                                         self.pooling is None and self.max_length is None else None)
        if index_path:
            index = NameIndex.load(index_path, encoder=encoder, kb=kb)
        else:
            logger.info("%s: building the name index of KB %r (%d concepts) on first use; nlp.to_disk() saves it",
                        self.name, kb.name, len(kb))
            index = NameIndex.build(kb, encoder, kind=self.index_kind)
        return self._make_linker(encoder, kb, index)

    def use(self, encoder: Encoder, kb: KnowledgeBase, index: NameIndex) -> "SapBertLinker":
        """Link with an encoder, KB and index built elsewhere (the index is checked against both),
        instead of loading the configured ones; ``nlp.to_disk`` then saves these."""
        index.check(encoder, kb)
        self._linker = self._make_linker(encoder, kb, index)
        return self

    def _make_linker(self, encoder: Encoder, kb: KnowledgeBase, index: NameIndex) -> Linker:
        return Linker(encoder, kb, index, k=self.k, threshold=self.threshold,
                      max_entities_per_mention=self.max_entities_per_mention, cache_size=self.cache_size)

    def initialize(self, get_examples: Optional[Callable[[], Iterable[Any]]] = None, *,
                   nlp: Optional[Language] = None) -> None:
        """Load the model and KB and build the index now rather than on the first document.
        A linker that is already loaded (``spacy.load``) is left as it is."""
        _ = self.linker

    # -- processing -----------------------------------------------------------------
    def __call__(self, doc: Doc) -> Doc:
        self._process([doc])
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """Link the spans of ``batch_size`` documents at a time, so that mentions repeated
        across documents are encoded once and the encoder sees full batches."""
        error_handler = self.get_error_handler()
        for docs in minibatch(stream, size=batch_size):
            try:
                self._process(docs)
            except Exception as err:  # spaCy's contract: the error handler decides
                error_handler(self.name, self, docs, err)
                continue
            yield from docs

    def spans(self, doc: Doc) -> Sequence[Span]:
        """The spans this pipe links: ``doc.ents``, or ``doc.spans[spans_key]`` (none if absent:
        logged once, since a misspelt or unset group otherwise looks like "no entities")."""
        if self.spans_key is None:
            return doc.ents
        if self.spans_key in doc.spans:
            return doc.spans[self.spans_key]
        if not self._warned_missing_group:
            self._warned_missing_group = True
            groups = sorted(doc.spans)
            logger.warning("%s: spans_key %r names a span group that this doc does not have (%s), so none of its "
                           "spans are linked; set spans_key to the group your span pipe writes, or to null to link "
                           "doc.ents (warned once per pipe)", self.name, self.spans_key,
                           f"its groups: {groups}" if groups else "it has no span groups")
        return []

    def _process(self, docs: Sequence[Doc]) -> None:
        for doc, results in zip(docs, self.predict(docs)):
            self.set_annotations(doc, results)

    def predict(self, docs: Iterable[Doc]) -> List[List[Candidates]]:
        """Candidates per span per document, without touching the documents; the spans of
        all documents go to the linker together (one encoder pass for the batch)."""
        queries_per_doc = []
        for doc in docs:
            abbreviations = self._abbreviations(doc) if self.resolve_abbreviations else None
            queries_per_doc.append([_query_text(span, abbreviations) for span in self.spans(doc)])
        flat = [q for queries in queries_per_doc for q in queries]
        results = self.linker.link(flat) if flat else []
        out, offset = [], 0
        for queries in queries_per_doc:
            out.append(results[offset:offset + len(queries)])
            offset += len(queries)
        return out

    def set_annotations(self, doc: Doc, results: Sequence[Candidates]) -> None:
        """Write ``span._.<extension>`` and, for spans with a concept, ``span.kb_id_``."""
        spans = list(self.spans(doc))
        if len(spans) != len(results):
            raise ValueError(f"{len(results)} results for {len(spans)} spans")
        if self.set_kb_id and any(results):
            # doc.ents and span groups hand out copies: kb_id is written by replacing the spans.
            relabelled = [Span(doc, s.start, s.end, label=s.label, kb_id=r[0][0] if r else s.kb_id, span_id=s.id)
                          for s, r in zip(spans, results)]
            if self.spans_key is None:
                doc.set_ents(relabelled, default="unmodified")
                spans = list(doc.ents)
            else:
                group = doc.spans[self.spans_key]
                doc.spans[self.spans_key] = SpanGroup(doc, name=group.name, attrs=dict(group.attrs), spans=relabelled)
                spans = list(doc.spans[self.spans_key])
        for span, result in zip(spans, results):
            span._.set(self.extension, list(result))

    def _abbreviations(self, doc: Doc) -> Optional[Dict[Any, str]]:
        if not Doc.has_extension("abbreviations"):
            return None
        found: Dict[Any, str] = {}
        for abbr in doc._.abbreviations or []:
            if isinstance(abbr, Span):
                long_form = abbr._.long_form if Span.has_extension("long_form") else None
                long_text = long_form.text if isinstance(long_form, Span) else long_form
                short_text, where = abbr.text, (abbr.start_char, abbr.end_char)
            elif isinstance(abbr, dict):  # AbbreviationDetector(make_serializable=True)
                long_text, short_text = abbr.get("long_text"), abbr.get("short_text")
                start, end = abbr.get("short_start"), abbr.get("short_end")
                where = (doc[start].idx, doc[end - 1].idx + len(doc[end - 1])) if isinstance(start, int) and \
                    isinstance(end, int) and 0 <= start < end <= len(doc) else None
            else:
                continue
            if not isinstance(long_text, str) or not long_text.strip() or not short_text:
                continue
            if where is not None:
                found.setdefault(where, long_text)
            found.setdefault(short_text, long_text)
        return found

    # -- files ----------------------------------------------------------------------
    def to_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> None:
        path = Path(path)
        linker = self.linker
        path.mkdir(parents=True, exist_ok=True)
        linker.encoder.save(path / "encoder")
        linker.kb.to_jsonl(path / KB_FILE)
        linker.index.save(path / "index")
        cfg = {
            "format_version": FORMAT_VERSION,
            "kb_name": linker.kb.name,
            "model": self.model_name,
            "kb": self.kb_path,
            "index_kind": linker.index.kind,
            "encoder_settings": linker.encoder.settings,
            "model_fingerprint": linker.encoder.fingerprint,
            "kb_fingerprint": linker.kb.fingerprint(),
        }
        (path / CFG_FILE).write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    def from_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> "SapBertLinker":
        path = Path(path)
        cfg_path = path / CFG_FILE
        if not cfg_path.is_file():
            raise InputError(f"not a saved {self.name} component: no {CFG_FILE}", path)
        try:
            cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InputError(f"invalid JSON ({err})", cfg_path) from err
        if cfg.get("format_version") != FORMAT_VERSION:
            raise InputError(f"unsupported format {cfg.get('format_version')!r} (this version reads {FORMAT_VERSION})",
                             cfg_path, field="format_version")
        encoder = Encoder(path / "encoder", device=self.device, batch_size=self.batch_size, dtype=self.precision,
                          backend=self.backend)
        kb = KnowledgeBase.from_jsonl(path / KB_FILE, name=cfg.get("kb_name"))
        index = NameIndex.load(path / "index", encoder=encoder, kb=kb)
        self._linker = self._make_linker(encoder, kb, index)
        return self


def _ensure_extension(name: str) -> None:
    if not Span.has_extension(name):
        Span.set_extension(name, default=[])
        return
    default, method, getter, setter = Span.get_extension(name)
    if getter is not None and setter is None or method is not None:
        raise InputError(f"Span extension {name!r} exists and is not writable (a getter or method); "
                         "pick another `extension` name", field="extension")


def _query_text(span: Span, abbreviations: Optional[Dict[Any, str]]) -> str:
    """The text to link for ``span``: its abbreviation's long form when it is a short form."""
    if abbreviations:
        long_text = abbreviations.get((span.start_char, span.end_char)) or abbreviations.get(span.text)
        if long_text:
            return long_text
    return span.text


__all__: Tuple[str, ...] = ("SapBertLinker", "make_sapbert_linker", "DEFAULT_CONFIG", "SETTING_RULES", "SettingError",
                            "check_setting", "check_settings")
