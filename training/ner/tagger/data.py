"""Training data for the transformer NER: DocBin docs → word-piece windows with a gold tag per scored token.

The DocBin files are those ``sapbert ner-data`` writes for spaCy's NER (BC5CDR + NCBI train,
BC5CDR dev), so both NER models learn from exactly the same annotation, missing marks included
(:mod:`spacy_sapbert.ner.tags`). The gazetteer is built here from the KB files, with the
pipeline's tokenizer, and saved beside the model.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from spacy.language import Language
from spacy.tokens import Doc, DocBin

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.files import read_concepts
from spacy_sapbert.ner.gazetteer import Gazetteer, kb_label_names
from spacy_sapbert.ner.tagging import Tagging
from spacy_sapbert.ner.tags import IGNORE, TagScheme
from spacy_sapbert.ner.windows import Window

from ..objective import PARTIAL_O

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


def read_docbin(path: PathLike, nlp: Language) -> List[Doc]:
    path = Path(path)
    if not path.is_file():
        raise InputError("DocBin file not found (build it with `spacy project run ner-data`)", path)
    try:
        return list(DocBin().from_disk(path).get_docs(nlp.vocab))
    except (ValueError, KeyError) as err:
        raise InputError(f"not a spaCy DocBin file ({err})", path) from err


def build_gazetteer(kb_files: Sequence[PathLike], label_to_types: Mapping[str, Sequence[str]],
                    nlp: Language) -> Gazetteer:
    """Names of every concept of ``kb_files`` whose types map to a label, cut by ``nlp``'s tokenizer."""
    def concepts():
        for kb_file in kb_files:
            for _, concept in read_concepts(Path(kb_file)):
                yield concept

    gazetteer = Gazetteer.from_names(kb_label_names(concepts(), label_to_types), nlp.tokenizer)
    missing = [label for label in label_to_types if label not in gazetteer.labels]
    if missing:
        raise InputError(f"no KB name has a type mapped to {missing} (label_to_types {dict(label_to_types)})",
                         field="label_to_types")
    return gazetteer


@dataclass
class Example:
    window: Window
    gold: List[int]
    open_tags: Tuple[int, ...] = ()
    """The tags a :data:`PARTIAL_O` token may have (``O`` and the unknown labels' ``B-``/``I-``)."""
    soft: Optional[np.ndarray] = None
    """The teacher's probabilities of the scored tokens (tokens × tags), when a teacher is used."""


def open_tags(scheme: TagScheme, known: Optional[Sequence[str]]) -> Tuple[int, ...]:
    """Tags an unlabelled token of a corpus that annotates only ``known`` may have (empty: all labels known)."""
    unknown = [label for label in scheme.labels if known is not None and label not in known]
    if not unknown:
        return ()
    return (0,) + tuple(t for label in unknown for t in (scheme.begin(label), scheme.begin(label) + 1))


def doc_gold(doc: Doc, scheme: TagScheme, opened: Sequence[int] = ()) -> List[int]:
    """The gold tag of each token of ``doc``; with ``opened`` (:func:`open_tags`: the corpus does not
    annotate every label) a token outside every entity is :data:`PARTIAL_O`, while a token of an
    entity whose label is not the scheme's (extra_corpora's ``NEG``: genes) stays a certain ``O``."""
    gold = scheme.gold(doc)
    if opened:
        gold = [PARTIAL_O if tag == 0 and token.ent_iob == 2 else tag for tag, token in zip(gold, doc)]
    return gold


def examples(docs: Sequence[Doc], tagging: Tagging, style: Optional[str] = None,
             known: Optional[Sequence[str]] = None, soft: Optional[Sequence[np.ndarray]] = None,
             unlabelled: bool = False) -> Tuple[List[Example], Dict[str, int]]:
    """Every window of every doc (read in ``style``) with the gold tags of its scored tokens, and counts for the log.

    ``known``: the labels the docs annotate completely (None: all). A token outside every entity
    is then :data:`PARTIAL_O`; a token of an entity whose label is not the scheme's (extra_corpora's
    ``NEG``: genes) is a certain ``O``. ``soft``: per doc, a teacher's probabilities (tokens × tags);
    ``unlabelled``: the docs' own annotation is not read (every gold tag :data:`IGNORE`), so only
    the teacher teaches there.
    """
    out: List[Example] = []
    opened = open_tags(tagging.scheme, known)
    stats = {"docs": len(docs), "windows": 0, "tokens": 0, "ignored": 0, "partial": 0, "entities": 0}
    for d, doc in enumerate(docs):
        gold = [IGNORE] * len(doc) if unlabelled else doc_gold(doc, tagging.scheme, opened)
        stats["entities"] += 0 if unlabelled else sum(1 for e in doc.ents if e.label_ in tagging.scheme.labels)
        for window in tagging.windows(doc, style):
            tags = [gold[i] for i in window.tokens]
            out.append(Example(window, tags, opened, None if soft is None else soft[d][window.tokens]))
            stats["windows"] += 1
            stats["tokens"] += len(tags)
            stats["ignored"] += sum(t == IGNORE for t in tags)
            stats["partial"] += sum(t == PARTIAL_O for t in tags)
    return out, stats


def span_f1(docs: Sequence[Doc], predicted: Sequence[Sequence]) -> Dict[str, float]:
    """Strict (start, end, label) precision/recall/F1 against the docs' gold entities, in percent."""
    gold = {(d, e.start, e.end, e.label_) for d, doc in enumerate(docs) for e in doc.ents}
    pred = {(d, s.start, s.end, s.label_) for d, spans in enumerate(predicted) for s in spans}
    tp = len(gold & pred)
    p = tp / len(pred) if pred else 0.0
    r = tp / len(gold) if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"p": round(100 * p, 2), "r": round(100 * r, 2), "f": round(100 * f, 2)}


def fingerprint(paths: Sequence[PathLike], gazetteer: Gazetteer) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    digest.update(str(len(gazetteer)).encode())
    return digest.hexdigest()[:16]


def scheme_for(labels: Sequence[str]) -> TagScheme:
    return TagScheme(sorted(labels))
