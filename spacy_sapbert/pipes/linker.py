"""The ``sapbert_linker`` spaCy pipe: entity spans → :class:`~spacy_sapbert.linking.linker.Linker`.

Found by spaCy through the ``spacy_factories`` entry point, so
``nlp.add_pipe("sapbert_linker", config={"kb": "kbs/medic.jsonl.gz"})`` needs no import.
Its settings, their defaults and what each accepts are :class:`~spacy_sapbert.linking.settings.LinkerSettings`.
The model and KB named in the config are loaded on first use (or by ``nlp.initialize()``),
so adding the pipe is cheap; a pipeline saved with ``nlp.to_disk`` carries its own encoder,
KB and index (:mod:`spacy_sapbert.pipes.linker_parts`) and never reads the configured paths again.

The candidate stages are registered functions the config names (:mod:`spacy_sapbert.linking.stages`).
Each span gets ``span._.<extension>`` = ``[(concept_id, score), …]`` (scispaCy's
``kb_ents`` shape) and, when a concept passes the threshold, ``span.kb_id_``. A span's label
picks the KB types it may link to (``label_to_types``; by default a DISEASE span links to
diseases and phenotypes only), also when it is a short form linked through its long form.
With ``split_composites``, a coordinated span ("renal or hepatic toxicity") also links each
concept it names (:mod:`spacy_sapbert.linking.composite`): ``span._.<extension>_parts`` =
``[(part text, [(concept_id, score), …]), …]``, empty for other spans; a span whose wording the
annotated-names table links as one coordinated mention ("hemorrhagic cystitis") gets the table's concepts
as its parts, each under its preferred name.
"""
from __future__ import annotations

import logging
import weakref
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import spacy.util
from spacy.language import Language
from spacy.pipeline import Pipe
from spacy.tokens import Doc, Span

from spacy_sapbert.linking.calibration import Calibration
from spacy_sapbert.pipes.linker_parts import (cfg_calibration, configured_annotated_names, configured_encoder,
                                              configured_exact_names,
                                              configured_parts, configured_reranking, part_writers, read_parts)
from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.linking.linker import Candidates, Linker
from spacy_sapbert.linking.rerank.stage import ContextReranking
from spacy_sapbert.linking.stages import DEFAULT_STAGES, STAGE_CONFIG, check_stages
from spacy_sapbert.pipes.linker_predict import link_batch
from spacy_sapbert.pipes.linker_tables import LastStageTables
from spacy_sapbert.pipes.linker_spans import (parts_extension, pipeline_exclusions, span_queries, warn_missing_group,
                                              write_candidates)
from spacy_sapbert.pipes.linker_config import ensure_extension, record_in_config, setting_attributes, settings_signature
from spacy_sapbert.linking.settings import (DEFAULT_CONFIG, FACTORY_DEFAULT_CONFIG, LIVE_SETTINGS, SETTING_RULES, LinkerSettings,
                       SettingError, check_setting, check_settings)
from spacy_sapbert.util.threads import protect_forks

logger = logging.getLogger(__name__)

PACKAGE_REQUIREMENT = "spacy-sapbert>=0.1.0,<0.2.0"


@setting_attributes
class SapBertLinker(LastStageTables, Pipe):
    """Links the spans of ``doc.ents`` (or ``doc.spans[spans_key]``) to KB concepts.

    ``pipe.settings`` is the one :class:`LinkerSettings` the pipe and its linker follow; each
    setting but model, kb and index is also an attribute (``pipe.threshold``), and assigning
    one goes through :meth:`configure`.
    """

    def __init__(self, nlp: Language, name: str = LINKER_PIPE, **settings: Any) -> None:
        # first, before anything is set or loaded: a bad setting is reported as the pipe is added
        stages = {key: settings.pop(key, None) for key in DEFAULT_STAGES}
        check_stages({key: stage for key, stage in stages.items() if stage is not None}, name)
        self.stages: Mapping[str, Callable[..., Any]] = MappingProxyType(
            {key: DEFAULT_STAGES[key] if stage is None else stage for key, stage in stages.items()})
        """The config's candidate stages by key (read-only: a stage changes in the config, which ``to_disk`` saves)."""
        self._settings = LinkerSettings.from_config(settings, owner=name)
        protect_forks()  # before any fork of nlp.pipe(n_process=N), whether or not the encoder ran yet
        self.name = name
        self.vocab = nlp.vocab
        self._nlp = weakref.ref(nlp)
        """The pipeline whose config records this pipe's settings (:func:`record_in_config`)."""
        self._linker: Optional[Linker] = None
        self._encoder_alone: Optional[Encoder] = None  # :meth:`peek_encoder`'s, until the linker takes it
        self._reranking: Optional[ContextReranking] = None
        self._annotated: Any = None  # AnnotatedNames, None (not loaded yet) or False (switched off)
        self._exact: Any = None  # ExactNames, likewise
        self._warned_missing_group = False
        ensure_extension(self._settings.extension)
        ensure_extension(parts_extension(self._settings.extension))

    # -- settings -------------------------------------------------------------------
    @property
    def settings(self) -> LinkerSettings:
        """The linker's once it is loaded (so a change made through ``pipe.linker`` shows here), the pipe's before."""
        return self._linker.settings if self._linker is not None else self._settings

    def configure(self, **changes: Any) -> None:
        """Change settings, checked as when the pipe is added. Once the encoder, KB and index
        are loaded, only the settings the linker follows (``LIVE_SETTINGS``) may change: the
        others would be ignored, so they are refused."""
        before = self.settings
        settings = before.replace(self.name, **changes)
        fixed = [key for key in changes if key not in LIVE_SETTINGS and getattr(settings, key) != getattr(before, key)]
        if fixed and self._linker is not None:
            raise InputError(f"{self.name}: {', '.join(fixed)} cannot change once the encoder, KB and index are "
                             "loaded; set it in the config instead (spacy.load(..., config={...}))", field=fixed[0])
        if fixed:
            self._encoder_alone = None  # loaded with settings that no longer hold
        if settings.extension != before.extension:
            ensure_extension(settings.extension)
            ensure_extension(parts_extension(settings.extension))
        if settings.spans_key != before.spans_key:
            self._warned_missing_group = False
        self._settings = settings
        if self._reranking is not None:
            self._reranking.max_gap = settings.rerank_max_gap
        if self._linker is not None:
            self._linker.settings = settings  # recorded in the config through the linker's callback
            if settings.label_to_types != before.label_to_types:
                self._linker.label_types()  # a label whose types the KB lacks is warned about now
        else:
            self._record(settings)

    def _record(self, settings: LinkerSettings) -> None:
        """Keep the pipeline's config (what ``nlp.to_disk`` saves) equal to the settings in force."""
        record_in_config(self._nlp(), self, settings)

    # -- the linker, built on first use ---------------------------------------------
    @property
    def linker(self) -> Linker:
        """The :class:`Linker`; built from the configured model and KB the first time it is needed."""
        if self._linker is None:
            parts = configured_parts(self.settings, self.name, encoder=self._encoder_alone)
            self._encoder_alone = None
            return self._adopt(Linker(*parts, settings=self.settings))
        return self._linker

    def peek_encoder(self) -> Encoder:
        """The encoder, without loading the KB or building the index (which can take minutes): what
        a NER that shares its word-piece table checks before anything is encoded."""
        if self._linker is not None:
            return self._linker.encoder
        if self._encoder_alone is None:
            self._encoder_alone = configured_encoder(self.settings)
        return self._encoder_alone

    def _adopt(self, linker: Linker) -> Linker:
        """Link with ``linker``; a label whose types its KB lacks is reported now, at load."""
        linker.label_types()
        linker.on_settings_change = self._record
        self._linker = linker
        self._record(linker.settings)
        return linker

    @property
    def reranking(self) -> Optional[ContextReranking]:
        """The second stage (:mod:`spacy_sapbert.linking.rerank.stage`): the context re-ranker the ``rerank``
        setting names (loaded on first use, saved with the pipe), or None."""
        if self._reranking is None and self.settings.rerank is not None:
            self._reranking = configured_reranking(self.settings, self.linker.kb)
        return self._reranking

    @property
    def calibration(self) -> Optional[Calibration]:
        """What turns scores into probabilities (:mod:`spacy_sapbert.linking.calibration`); saved with the
        pipe. With one, ``kb_ents`` scores and ``threshold`` are probabilities of being right."""
        return self.linker.calibration

    @calibration.setter
    def calibration(self, calibration: Optional[Calibration]) -> None:
        self.linker.calibration = calibration

    is_ready = property(lambda self: self._linker is not None, doc="Whether the encoder, KB and index are loaded.")
    kb = property(lambda self: self.linker.kb, doc="The linker's KnowledgeBase (loaded on first use).")
    encoder = property(lambda self: self.linker.encoder, doc="The linker's Encoder.")
    index = property(lambda self: self.linker.index, doc="The linker's NameIndex.")

    def use(self, encoder: Encoder, kb: KnowledgeBase, index: NameIndex) -> "SapBertLinker":
        """Link with an encoder, KB and index built elsewhere (the index is checked against both),
        instead of loading the configured ones; ``nlp.to_disk`` then saves these."""
        self._adopt(Linker(encoder, kb, index, settings=self.settings))
        return self

    def initialize(self, get_examples: Optional[Callable[[], Iterable[Any]]] = None, *,
                   nlp: Optional[Language] = None) -> None:
        """Load the model and KB and build the index now rather than on the first document.
        A linker that is already loaded (``spacy.load``) is left as it is."""
        _ = self.reranking, self.linker, self.annotated_table, self.exact_table

    # -- processing: spaCy's predict / set_annotations contract ------------------------
    def __call__(self, doc: Doc) -> Doc:
        self.set_annotations([doc], self.predict([doc]))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """Link the spans of ``batch_size`` documents at a time, so that mentions repeated
        across documents are encoded once and the encoder sees full batches."""
        error_handler = self.get_error_handler()
        for docs in spacy.util.minibatch(stream, size=batch_size):
            try:
                self.set_annotations(docs, self.predict(docs))
            except Exception as err:  # spaCy's contract: the error handler decides
                error_handler(self.name, self, docs, err)
                continue
            yield from docs

    def predict(self, docs: Iterable[Doc]) -> List[List[Candidates]]:
        """Candidates per span per document, without touching the documents. The spans of all
        documents go through the stages together (one encoder pass for the batch), each span
        restricted to the KB types of its label (``label_to_types``): ``get_candidates`` →
        ``rerank_candidates`` → calibration, threshold and cut-off → ``prefer_annotated``
        (:mod:`spacy_sapbert.linking.stages`). With ``split_composites`` the parts of coordinated
        spans go through with them, and each span's result carries its parts' (``.parts``)."""
        queries_per_doc = [self._queries(doc) for doc in docs]
        spans = [span for spans_of_doc, _, _ in queries_per_doc for span in spans_of_doc]
        texts = [query for _, queries, _ in queries_per_doc for query in queries]
        labels = [label for _, _, labels_of_doc in queries_per_doc for label in labels_of_doc]
        linked = link_batch(spans, texts, labels, stages=self.stages, linker=self.linker, reranking=self.reranking,
                            table=self.annotated_table, exact=self.exact_table, settings=self.settings,
                            exclusions=lambda: pipeline_exclusions(self._nlp())) if texts else []  # none: nothing loaded
        out, offset = [], 0
        for _, queries, _ in queries_per_doc:
            out.append(linked[offset:offset + len(queries)])
            offset += len(queries)
        return out

    def set_annotations(self, docs: Iterable[Doc], predictions: Sequence[Sequence[Candidates]]) -> None:
        """Write what :meth:`predict` returned for ``docs``: ``span._.<extension>`` and, for
        spans with a concept, ``span.kb_id_``."""
        docs = list(docs)
        if len(docs) != len(predictions):
            raise ValueError(f"{len(predictions)} predictions for {len(docs)} documents")
        for doc, results in zip(docs, predictions):
            self._annotate(doc, results)

    def spans(self, doc: Doc) -> Sequence[Span]:
        """The spans this pipe links: ``doc.ents``, or ``doc.spans[spans_key]`` (none if absent:
        logged once, since a misspelt or unset group otherwise looks like "no entities")."""
        spans_key = self.settings.spans_key
        if spans_key is None:
            return doc.ents
        if spans_key in doc.spans:
            return doc.spans[spans_key]
        if not self._warned_missing_group:
            self._warned_missing_group = True
            warn_missing_group(self.name, spans_key, doc)
        return []

    def _queries(self, doc: Doc) -> Tuple[List[Span], List[str], List[str]]:
        return span_queries(list(self.spans(doc)), self.settings.resolve_abbreviations)

    def _annotate(self, doc: Doc, results: Sequence[Candidates]) -> None:
        write_candidates(doc, list(self.spans(doc)), results, self.settings)

    # -- files (the other settings are in the pipeline's config.cfg) -------------------
    def to_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> None:
        """Save the encoder, KB, index, re-ranker and annotated names (the parts; see
        :mod:`.linker_parts`) but those in ``exclude``."""
        writers = part_writers(self.linker, self.reranking, self.annotated_table, self.exact_table)
        Path(path).mkdir(parents=True, exist_ok=True)
        spacy.util.to_disk(path, writers, exclude)

    def from_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> "SapBertLinker":
        """Load the saved parts but those in ``exclude``, which are kept from the loaded linker
        or, without one, come from the settings as on first use. The index is checked against
        the model and KB it is used with."""
        read = read_parts(path, self.settings, self.name, exclude)
        parts = {part: read[part] if part in read else getattr(self._linker, part, None)
                 for part in ("encoder", "kb", "index")}
        calibration = (cfg_calibration(read["cfg"], read["calibration_file"]) if "cfg" in read
                       else getattr(self._linker, "calibration", None))
        linker = self._adopt(Linker(*configured_parts(self.settings, self.name, **parts), settings=self.settings,
                                    calibration=calibration))
        if read.get("reranker"):
            self._reranking = configured_reranking(self.settings, linker.kb, read["reranker"])
        if read.get("annotated"):
            self._annotated = configured_annotated_names(self.settings, linker.kb, read["annotated"])
        if read.get("exact"):
            self._exact = configured_exact_names(self.settings, read["exact"])
        return self


@Language.factory(LINKER_PIPE, default_config={**FACTORY_DEFAULT_CONFIG, **STAGE_CONFIG},
                  assigns=["span._.kb_ents", "span._.kb_ents_parts", "token.ent_kb_id"])
@settings_signature(SapBertLinker)
def make_sapbert_linker(nlp: Language, name: str, **settings: Any) -> SapBertLinker:
    """The pipe, with the settings of :class:`LinkerSettings` (docs/pipe.md, "Settings"), checked now."""
    pipe = SapBertLinker(nlp, name, **settings)
    requirements = nlp.meta.setdefault("requirements", [])
    if not any(str(r).startswith("spacy-sapbert") for r in requirements):
        requirements.append(PACKAGE_REQUIREMENT)  # so that `spacy package` depends on us
    return pipe


__all__: Tuple[str, ...] = ("SapBertLinker", "make_sapbert_linker", "LinkerSettings", "DEFAULT_CONFIG",
                            "SETTING_RULES", "SettingError", "check_setting", "check_settings")
