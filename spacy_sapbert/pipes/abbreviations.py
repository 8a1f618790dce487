"""The ``abbreviation_entities`` pipe: an abbreviation gets the entity label of its long form.

A NER model without pretrained vectors misses many short forms it never saw in training
("RA", "BHA", "NTG") even when it found the long form they abbreviate in the same abstract
("retinoic acid (RA)"). After the NER pipe, this pipe runs scispaCy's abbreviation detector
(Schwartz & Hearst) and labels every occurrence of a short form like the entity that ends its
long form, replacing predictions that overlap it. It is the usual post-processing of BC5CDR
systems, and it lives in the runtime package so that a packaged NER pipeline that lists it
loads with only spacy-sapbert installed (``spacy_factories`` entry point). The other direction
holds too (``drop_unlabelled_short_forms``): where the abstract defines a short form by a long form
that is no entity ("bone mineral density (BMD)"), an entity on the short form is a NER's guess at
another sense ("BMD" as Becker muscular dystrophy) and is dropped.

:func:`abbreviation_pairs` is the one reader of what the detector leaves in
``doc._.abbreviations`` for the rest of the package (the linker, the annotate records, the demo).
:func:`short_form_entities`, :func:`with_short_forms` and :func:`without_unlabelled_short_forms` are the
labelling rule itself, shared with the demo's dictionary matcher, so a short form is labelled the same way
wherever it is found.
"""
from __future__ import annotations

import warnings
from typing import Any, Collection, Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import filter_spans


def abbreviation_pairs(doc: Doc) -> List[Tuple[Span, str]]:
    """(short form, long form text) for each abbreviation scispaCy's AbbreviationDetector found
    in ``doc``, in its order; ``[]`` when no detector ran.

    The detector leaves two shapes, and every reader needs both: spans whose
    ``span._.long_form`` is a span (or a string, once made serialisable), and the dicts of
    ``AbbreviationDetector(make_serializable=True)`` (token offsets; the short form is rebuilt
    as a span of ``doc``). Entries without a usable long form are left out.
    """
    if not Doc.has_extension("abbreviations"):
        return []
    pairs: List[Tuple[Span, str]] = []
    for found in doc._.abbreviations or []:
        if isinstance(found, Span):
            short: Optional[Span] = found
            long_form: Any = found._.long_form if Span.has_extension("long_form") else None
        elif isinstance(found, dict):
            short = _token_span(doc, found.get("short_start"), found.get("short_end"))
            long_form = found.get("long_text")
        else:
            continue
        long_text = long_form.text if isinstance(long_form, Span) else long_form
        if short is not None and isinstance(long_text, str) and long_text.strip() and short.text:
            pairs.append((short, long_text))
    return pairs


def _token_span(doc: Doc, start: Any, end: Any) -> Optional[Span]:
    valid = isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(doc)
    return doc[start:end] if valid else None


def long_form_label(long_form: Span, ents: Dict[Tuple[int, int], str],
                    labels: Optional[Collection[str]] = None) -> Optional[str]:
    """The label of the entity that ends where the long form ends and lies inside it, if any (one of
    ``labels`` when given): the head of a phrase is its last word, so "all-trans retinoic acid"
    takes the label of "retinoic acid", not that of an entity that only overlaps its start."""
    for (start, end), label in ents.items():
        if end == long_form.end and start >= long_form.start and (labels is None or label in labels):
            return label
    return None


def short_form_entities(doc: Doc, ents: Iterable[Span], labels: Optional[Collection[str]] = None) -> List[Span]:
    """A span for each short form (every occurrence) the detector left as a span in ``doc._.abbreviations``,
    labelled like its long form (:func:`long_form_label` over ``ents``), unless ``ents`` already
    label it so. Serialised results (dicts) are left out: the rule reads the long form's span."""
    if not Doc.has_extension("abbreviations"):
        return []
    labelled = {(e.start, e.end): e.label_ for e in ents}
    found: List[Span] = []
    for short in doc._.abbreviations or []:
        long_form = short._.long_form if isinstance(short, Span) else None
        if not isinstance(long_form, Span):
            continue
        label = long_form_label(long_form, labelled, labels)
        if label is not None and labelled.get((short.start, short.end)) != label:
            found.append(Span(doc, short.start, short.end, label=label))
    return found


def without_unlabelled_short_forms(doc: Doc, ents: Iterable[Span],
                                   labels: Optional[Collection[str]] = None) -> List[Span]:
    """``ents`` less each entity (of ``labels``, when given) that is exactly a short form whose long form
    overlaps none of ``ents``: the abstract says what the letters stand for, and that is no entity
    ("bone mineral density (BMD)", so "BMD" is not Becker muscular dystrophy there)."""
    ents = list(ents)
    if not Doc.has_extension("abbreviations"):
        return ents
    undefined = set()
    for short in doc._.abbreviations or []:
        long_form = short._.long_form if isinstance(short, Span) else None
        if isinstance(long_form, Span) and not any(e.start < long_form.end and long_form.start < e.end for e in ents):
            undefined.add((short.start, short.end))
    return [e for e in ents if (e.start, e.end) not in undefined or (labels is not None and e.label_ not in labels)]


def other_number(short: str) -> Optional[str]:
    """The short form in the other grammatical number: "VSDs" → "VSD", "NSAID" → "NSAIDs"; None when the
    form is no plural of capitals ("MS", "Hs", "Ca") nor a run of capitals that can take one."""
    if len(short) >= 3 and short.endswith("s") and short[-2].isupper() and short[:-1].isalnum():
        return short[:-1]
    if len(short) >= 2 and short[-1].isupper() and short.isalnum():
        return short + "s"
    return None


def add_number_variants(doc: Doc) -> None:
    """Add to ``doc._.abbreviations`` each token that is a detected short form in the other number
    ("ventricular septal defects (VSDs)", then "a VSD"), with the same long form. scispaCy's detector
    matches the defined form only; BC5CDR dev has 38 such uses (VSD, NSAID, SSRI, EM…)."""
    found = [short for short in doc._.abbreviations or [] if isinstance(short, Span)]
    if not found:
        return
    long_forms: Dict[str, Span] = {}
    for short in found:
        variant = other_number(short.text)
        if variant is not None and isinstance(short._.long_form, Span):
            long_forms.setdefault(variant, short._.long_form)
    if not long_forms:
        return
    known = {short.text for short in found}
    for token in doc:
        long_form = long_forms.get(token.text)
        # a token that is a detected short form keeps its own long form; one inside the long form is no use of it
        if long_form is None or token.text in known or long_form.start <= token.i < long_form.end:
            continue
        span = doc[token.i:token.i + 1]
        span._.long_form = long_form
        doc._.abbreviations.append(span)


def with_short_forms(ents: Iterable[Span], found: Sequence[Span]) -> List[Span]:
    """``ents`` with the short forms ``found`` in, each replacing the entities it overlaps: the
    detector's pairing in the same text is better evidence than a prediction over the short form."""
    found = filter_spans(found)
    kept = [e for e in ents if not any(e.start < f.end and f.start < e.end for f in found)]
    return filter_spans(kept + found)


@Language.factory("abbreviation_entities",
                  default_config={"labels": None, "serializable": True, "drop_unlabelled_short_forms": True},
                  requires=["doc.ents"], assigns=["doc.ents", "doc._.abbreviations"])
def make_abbreviation_entities(nlp: Language, name: str, labels: Optional[List[str]], serializable: bool,
                               drop_unlabelled_short_forms: bool) -> "AbbreviationEntities":
    return AbbreviationEntities(nlp, name, labels, serializable, drop_unlabelled_short_forms)


class AbbreviationEntities:
    """Give each abbreviation (every occurrence) the label of the entity that ends its long form.

    ``serializable`` (the default) leaves ``doc._.abbreviations`` in the form of scispaCy's
    ``AbbreviationDetector(make_serializable=True)``: dicts of offsets and texts, and
    ``span._.long_form`` a string. Spans there cannot be serialised, so ``nlp.pipe(n_process=2)``
    and ``Doc.to_bytes`` fail on any document with an abbreviation (spaCy's E871);
    :func:`abbreviation_pairs` reads both forms. ``drop_unlabelled_short_forms`` (the default) removes an
    entity on a short form whose long form is no entity (:func:`without_unlabelled_short_forms`).
    """

    def __init__(self, nlp: Language, name: str = "abbreviation_entities",
                 labels: Optional[Sequence[str]] = None, serializable: bool = True,
                 drop_unlabelled_short_forms: bool = True) -> None:
        # Imported here so that importing spacy_sapbert does not pull in scispaCy's detector.
        from scispacy.abbreviation import AbbreviationDetector

        self.name = name
        self.label_filter = set(labels) if labels else None
        self.serializable = bool(serializable)
        self.drop_unlabelled_short_forms = bool(drop_unlabelled_short_forms)
        self.detector = AbbreviationDetector(nlp)  # spans first: the labels are read off them below

    def __call__(self, doc: Doc) -> Doc:
        if not doc._.abbreviations:
            with warnings.catch_warnings():
                # scispaCy runs a matcher that is empty when no abbreviation is defined (W036).
                warnings.filterwarnings("ignore", message=r".*\[W036\]")
                self.detector(doc)
            add_number_variants(doc)
        found = short_form_entities(doc, doc.ents, self.label_filter)
        if found:
            doc.ents = with_short_forms(doc.ents, found)
        if self.drop_unlabelled_short_forms:
            kept = without_unlabelled_short_forms(doc, doc.ents, self.label_filter)
            if len(kept) < len(doc.ents):
                doc.ents = kept
        if self.serializable:
            doc._.abbreviations = [self.detector.make_short_form_serializable(short) if isinstance(short, Span)
                                   else short for short in doc._.abbreviations]
        return doc
