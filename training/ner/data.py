"""PubTator documents → tokenised spaCy ``Doc`` objects with entities, for the project's CHEMICAL/DISEASE NER
model (:mod:`spacy_sapbert.training.ner.corpus` writes them as DocBin files).

The text is cut by scispaCy's tokenizer (see :mod:`spacy_sapbert.pipes.tokenizer`) so that the
trained model's spans sit on the same token boundaries as scispaCy's pipelines. PubTator gold
spans are character offsets; a mention that does not start and end on a token boundary
("cocaine" inside the single scispaCy token "cocaine-induced") cannot be an entity of this
tokenisation. Such mentions are counted, per label, and never dropped silently. By default the
tokens under them are marked *missing* (spaCy's "unknown" IOB value), so the model is taught
neither that "cocaine-induced" is a CHEMICAL (``expand``) nor that it is not one (dropping it
would label it ``O``); ``expand`` and ``contract`` are available too, with the same counts.

Labels follow scispaCy's ``en_ner_bc5cdr_md``: CHEMICAL and DISEASE. The NCBI disease corpus
annotates diseases only, so the chemicals in its text are unannotated; adding it to the
training data as it is would teach the model that they are not entities. Optionally
(:func:`mask_unannotated`), the tokens of NCBI text that match a chemical name seen in BC5CDR train are
marked missing instead of ``O``.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from spacy.language import Language
from spacy.matcher import PhraseMatcher
from spacy.pipeline import Sentencizer
from spacy.tokens import Doc, Span
from spacy.util import filter_spans
from tqdm import tqdm

from ..corpora import Document, Mention

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
CHEMICAL = "CHEMICAL"
DISEASE = "DISEASE"
LABELS: Tuple[str, ...] = (CHEMICAL, DISEASE)
BC5CDR_LABELS: Dict[str, str] = {"Chemical": CHEMICAL, "Disease": DISEASE}
NCBI_LABELS: Dict[str, str] = {
    "SpecificDisease": DISEASE,
    "DiseaseClass": DISEASE,
    "Modifier": DISEASE,
    "CompositeMention": DISEASE,
}
ALIGNMENT_MODES = ("missing", "expand", "contract")
MAX_EXAMPLES = 20
"""Misaligned mentions quoted in the conversion stats."""


@dataclass
class ConversionStats:
    """What a conversion did to the gold mentions: the numbers the conversion log reports."""

    documents: int = 0
    sentences: int = 0
    tokens: int = 0
    mentions: Counter = field(default_factory=Counter)
    """Gold mentions per label."""
    entities: Counter = field(default_factory=Counter)
    """Mentions that became entities of the DocBin, per label."""
    misaligned: Counter = field(default_factory=Counter)
    """Mentions whose start or end falls inside a token, per label."""
    expand_possible: int = 0
    """Misaligned mentions for which ``alignment_mode="expand"`` gives a span."""
    contract_possible: int = 0
    """Misaligned mentions for which ``alignment_mode="contract"`` gives a non-empty span."""
    overlapping: Counter = field(default_factory=Counter)
    """Mentions dropped because they overlap a longer one (spaCy entities cannot nest)."""
    unlabelled: Counter = field(default_factory=Counter)
    """Mentions whose type has no label in the label map (kept out, counted by type)."""
    masked_spans: int = 0
    """Spans of unannotated text marked missing by the chemical lexicon."""
    misaligned_examples: List[str] = field(default_factory=list)

    def add(self, other: "ConversionStats") -> None:
        for name in ("documents", "sentences", "tokens", "expand_possible", "contract_possible", "masked_spans"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("mentions", "entities", "misaligned", "overlapping", "unlabelled"):
            getattr(self, name).update(getattr(other, name))
        room = max(0, MAX_EXAMPLES - len(self.misaligned_examples))
        self.misaligned_examples.extend(other.misaligned_examples[:room])

    def to_dict(self) -> dict:
        data = asdict(self)
        for name in ("mentions", "entities", "misaligned", "overlapping", "unlabelled"):
            data[name] = dict(sorted(getattr(self, name).items()))
        return data

    def summary(self) -> str:
        total = sum(self.mentions.values())
        bad = sum(self.misaligned.values())
        share = 100.0 * bad / total if total else 0.0
        return (f"{self.documents} documents, {self.sentences} sentences, {self.tokens} tokens; "
                f"{total} mentions {dict(self.mentions)} -> {sum(self.entities.values())} entities; "
                f"misaligned {bad} ({share:.2f}%) {dict(self.misaligned)} "
                f"[expand would give {self.expand_possible}, contract {self.contract_possible}]; "
                f"overlapping dropped {dict(self.overlapping)}; unlabelled {dict(self.unlabelled)}; "
                f"masked spans {self.masked_spans}")


def _sentence_starts(doc: Doc, sentencizer: Sentencizer, protected: Sequence[Tuple[int, int]]) -> None:
    """Rule-based sentence starts that never cut through a gold mention (token ranges)."""
    sentencizer(doc)
    for start, end in protected:
        for i in range(start + 1, end):
            doc[i].is_sent_start = False


def document_to_doc(
    nlp: Language,
    document: Document,
    label_map: Mapping[str, str],
    misaligned: str = "missing",
    sentencizer: Optional[Sentencizer] = None,
    stats: Optional[ConversionStats] = None,
    source: str = "",
) -> Doc:
    """One PubTator document as a tokenised ``Doc`` with its mentions as entities.

    ``misaligned`` chooses what happens to a mention that is not on token boundaries:
    ``missing`` marks its tokens unknown, ``expand``/``contract`` snap it outward/inward
    (falling back to ``missing`` where that gives no span). Every such mention is counted in
    ``stats`` whatever the choice.
    """
    if misaligned not in ALIGNMENT_MODES:
        raise ValueError(f"misaligned must be one of {ALIGNMENT_MODES}, got {misaligned!r}")
    stats = stats if stats is not None else ConversionStats()
    doc = nlp.make_doc(document.text)
    entities: List[Span] = []
    missing_tokens: Set[int] = set()
    for mention in document.mentions:
        label = label_map.get(mention.type)
        if label is None:
            stats.unlabelled[mention.type] += 1
            continue
        stats.mentions[label] += 1
        span = _mention_span(doc, mention, label, misaligned, stats, missing_tokens, f"{source}{document.pmid}")
        if span is not None:
            entities.append(span)
    kept, missing = _set_entities(doc, entities, missing_tokens, stats)
    if sentencizer is not None:
        protected = [(s.start, s.end) for s in kept] + [(s.start, s.end) for s in missing]
        _sentence_starts(doc, sentencizer, protected)
        stats.sentences += sum(1 for _ in doc.sents)
    stats.documents += 1
    stats.tokens += len(doc)
    return doc


def _mention_span(doc: Doc, mention: Mention, label: str, misaligned: str, stats: ConversionStats,
                  missing_tokens: Set[int], where: str) -> Optional[Span]:
    """The mention's entity span, or None. A mention off token boundaries is counted (with what
    ``expand``/``contract`` would give), then snapped as ``misaligned`` says or, failing that,
    its tokens are added to ``missing_tokens``."""
    span = doc.char_span(mention.start, mention.end, label=label)
    if span is not None:
        return span
    stats.misaligned[label] += 1
    expanded = doc.char_span(mention.start, mention.end, label=label, alignment_mode="expand")
    contracted = doc.char_span(mention.start, mention.end, label=label, alignment_mode="contract")
    contracted = contracted if contracted is not None and len(contracted) else None
    stats.expand_possible += expanded is not None
    stats.contract_possible += contracted is not None
    if len(stats.misaligned_examples) < MAX_EXAMPLES:
        around = expanded.text if expanded is not None else "?"
        stats.misaligned_examples.append(
            f"{where} {mention.start}-{mention.end} {label} {mention.text!r} in {around!r}")
    span = {"expand": expanded, "contract": contracted}.get(misaligned)
    if span is None and expanded is not None:
        missing_tokens.update(range(expanded.start, expanded.end))
    return span


def _set_entities(doc: Doc, entities: List[Span], missing_tokens: Set[int], stats: ConversionStats
                  ) -> Tuple[List[Span], List[Span]]:
    """Set ``doc``'s entities (overlaps resolved by length and counted) and missing tokens;
    returns the entities and missing spans kept."""
    kept = filter_spans(entities)
    if len(kept) < len(entities):
        kept_set = {(s.start, s.end, s.label_) for s in kept}
        for span in entities:
            if (span.start, span.end, span.label_) not in kept_set:
                stats.overlapping[span.label_] += 1
    # One span per (start, end): a mention annotated twice with one label is one entity.
    kept = list({(s.start, s.end): s for s in kept}.values())
    covered = {i for span in kept for i in range(span.start, span.end)}
    missing = [doc[i:i + 1] for i in sorted(missing_tokens - covered)]
    doc.set_ents(kept, missing=missing, default="outside")
    for span in kept:
        stats.entities[span.label_] += 1
    return kept, missing


def convert_documents(
    nlp: Language,
    documents: Iterable[Document],
    label_map: Mapping[str, str],
    misaligned: str = "missing",
    sentences: bool = True,
    source: str = "",
) -> Tuple[List[Doc], ConversionStats]:
    """Convert PubTator documents; returns the docs and the counts of what was done."""
    stats = ConversionStats()
    sentencizer = Sentencizer() if sentences else None
    docs = [document_to_doc(nlp, d, label_map, misaligned, sentencizer, stats, source)
            for d in tqdm(documents, desc=f"tokenising {source or 'documents'}", unit="doc", leave=False)]
    return docs, stats


def chemical_lexicon(docs: Iterable[Doc], label: str = CHEMICAL, min_chars: int = 3) -> Set[str]:
    """Lower-cased texts of the ``label`` entities of ``docs`` (names shorter than min_chars skipped)."""
    return {ent.text.lower() for doc in docs for ent in doc.ents if ent.label_ == label and len(ent.text) >= min_chars}


def mask_unannotated(nlp: Language, docs: Sequence[Doc], lexicon: Iterable[str]) -> int:
    """Mark spans of ``docs`` that match ``lexicon`` and are not entities as missing annotation.

    For a corpus that annotates one type only (NCBI: diseases), the other type's mentions are
    labelled ``O`` by omission; masking the ones a lexicon recognises keeps the model from
    learning that they are not entities. Returns the number of spans masked.
    """
    matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
    patterns = [nlp.make_doc(text) for text in sorted(set(lexicon))]
    matcher.add("LEXICON", patterns)
    masked = 0
    for doc in docs:
        spans = filter_spans([doc[start:end] for _, start, end in matcher(doc)])
        tokens = {i for span in spans for i in range(span.start, span.end)
                  if all(doc[j].ent_iob_ == "O" for j in range(span.start, span.end))}
        if not tokens:
            continue
        masked += sum(1 for span in spans if span.start in tokens)
        entities = list(doc.ents)
        missing = [doc[i:i + 1] for i in sorted(tokens)] + [doc[i:i + 1] for i in range(len(doc)) if doc[i].ent_iob == 0]
        sent_starts = [t.is_sent_start for t in doc]
        doc.set_ents(entities, missing=missing, default="outside")
        for token, start in zip(doc, sent_starts):
            token.is_sent_start = start
    return masked


def split_sentences(docs: Iterable[Doc]) -> List[Doc]:
    """One ``Doc`` per sentence (entities and missing marks carried over)."""
    return [sent.as_doc() for doc in docs for sent in doc.sents]
