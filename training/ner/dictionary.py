"""``sapbert ner-dictionary``: the wordings annotators tag nearly every time they occur, as
patterns for the ``dictionary_entities`` pipe after the NER (spaCy's ``entity_ruler`` reads them too).

The transformer NER misses common entities it has seen annotated many times ("oxygen",
"glutamate", "tranylcypromine" on BC5CDR dev). A wording's *annotation rate* in the training
corpora, the share of its free occurrences that annotators tagged, says how safe tagging it
everywhere is: "haloperidol" is tagged at nearly every occurrence, "lead" or "deaths" at few.
A wording becomes a pattern when it was tagged at least ``min_count`` times with one label,
at a rate of at least ``min_rate``. Occurrences are counted on the pipeline's own tokens
(``LOWER``, as the ruler's token patterns match), only in corpora that annotate the label (NCBI annotates no
chemicals, so its chemicals do not count as untagged), and an occurrence inside a longer or
overlapping annotated mention counts neither way (the ruler never overrides the NER's spans,
so it cannot tag there either).
"""
from __future__ import annotations

import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from spacy.language import Language
from tqdm import tqdm

from spacy_sapbert.default import LINKER_PIPE

from ..corpora import read_pubtator
from .data import BC5CDR_LABELS, NCBI_LABELS

logger = logging.getLogger(__name__)

LABEL_OF_TYPE: Dict[str, str] = {**BC5CDR_LABELS, **NCBI_LABELS}
MIN_CHARACTERS = 3
"""Shorter wordings ("K", "Ca", "PD") are abbreviations whose sense depends on the document."""


Annotated = Tuple[list, Dict[Tuple[str, ...], Counter]]
"""What :func:`annotated` returns: the tokenised corpora with their gold spans, and label counts per wording."""


def annotated(nlp: Language, corpora: Sequence[Path]) -> Annotated:
    """(doc, labels its corpus annotates, gold token spans -> their labels) per document, and label counts
    per wording (its tokens' lower-case forms)."""
    docs, counts = [], defaultdict(Counter)
    for path in corpora:
        documents = list(read_pubtator(path))
        labels = {LABEL_OF_TYPE[m.type] for d in documents for m in d.mentions if m.type in LABEL_OF_TYPE}
        for document in documents:
            doc = nlp.make_doc(document.text)
            gold: Dict[Tuple[int, int], str] = {}
            for m in document.mentions:
                span = doc.char_span(m.start, m.end) if m.type in LABEL_OF_TYPE else None
                if span is not None:
                    gold[span.start, span.end] = LABEL_OF_TYPE[m.type]
                    if not any(t.is_space for t in span):
                        counts[tuple(t.lower_ for t in span)][LABEL_OF_TYPE[m.type]] += 1
            docs.append((doc, labels, gold))
    return docs, counts


def annotation_rates(docs: Sequence[Tuple[Any, Any, Dict[Tuple[int, int], str]]],
                     wordings: Dict[str, Tuple[str, Tuple[str, ...]]]) -> Dict[str, Tuple[int, int]]:
    """wording → (occurrences that are a gold mention, occurrences) in ``docs`` (the first part of
    :func:`annotated`), for ``wordings`` given as wording → (label, its tokens' lower-case forms): the module's
    annotation rate, counted in the documents of corpora that annotate the wording's label; an occurrence inside
    or across a gold mention it is not counts neither way. Every occurrence of a token sequence is found (what a
    token ``Matcher`` of ``LOWER`` patterns finds) by looking each document's sequences up in a table of the
    wordings': the 69,390 chemical names of :mod:`.branch_exclusions` over BC5CDR and NCBI train in 8.4 s, where a
    ``Matcher`` of them had not finished matching after 14 minutes (2026-12-06, 2 CPU cores)."""
    by_tokens: Dict[Tuple[str, ...], List[str]] = defaultdict(list)
    for wording, (_, tokens) in wordings.items():
        if tokens:
            by_tokens[tuple(tokens)].append(wording)
    longest = max(map(len, by_tokens), default=0)
    tagged: Counter = Counter()
    free: Counter = Counter()
    for doc, labels, gold in docs:
        exact = set(gold)
        lower = [t.lower_ for t in doc]
        for start in range(len(lower)):
            for end in range(start + 1, min(start + longest, len(lower)) + 1):
                for wording in by_tokens.get(tuple(lower[start:end]), ()):
                    if wordings[wording][0] not in labels:
                        continue
                    if (start, end) in exact:
                        tagged[wording] += 1
                    elif not any(s < end and start < e for s, e in gold):
                        free[wording] += 1
    return {wording: (tagged[wording], tagged[wording] + free[wording]) for wording in wordings}


def dictionary_patterns(nlp: Language, corpora: Sequence[Path], min_rate: float = 0.5, min_count: int = 1,
                        read: Optional[Annotated] = None) -> Tuple[List[Dict[str, Any]], Dict[str, object]]:
    """The patterns and the counts behind them. Token patterns
    (``{"label", "pattern": [{"LOWER": …}, …]}``), not phrase patterns: spaCy's ruler runs the
    pipes before it over every phrase pattern when it loads, which here is the transformer NER. ``read``:
    :func:`annotated` of the same corpora, when the caller has it already."""
    docs, counts = read or annotated(nlp, corpora)
    candidates: Dict[str, Tuple[str, Tuple[str, ...]]] = {}
    for tokens, labels in counts.items():
        label, count = labels.most_common(1)[0]
        wording = " ".join(tokens)
        if count >= min_count and count * 2 > sum(labels.values()) and len("".join(tokens)) >= MIN_CHARACTERS \
                and any(ch.isalpha() for ch in wording):
            candidates[wording] = (label, tokens)
    rates = annotation_rates(docs, candidates)
    patterns = []
    for wording, (label, tokens) in sorted(candidates.items()):
        tagged, seen = rates[wording]
        if seen and tagged / seen >= min_rate:
            patterns.append({"label": label, "pattern": [{"LOWER": token} for token in tokens]})
    report = {"corpora": [str(p) for p in corpora], "min_rate": min_rate, "min_count": min_count,
              "wordings_tagged_often_enough": len(candidates), "patterns": len(patterns),
              "per_label": dict(Counter(p["label"] for p in patterns))}
    return patterns, report


def annotator_exclusions(nlp: Language, corpora: Sequence[Path], max_rate: float = 0.1, min_seen: int = 3,
                         max_tokens: int = 3, read: Optional[Annotated] = None
                         ) -> Tuple[List[Tuple[str, str]], Dict[str, object]]:
    """The wordings annotators seldom tag with a label although they occur often: every token sequence of
    up to ``max_tokens`` tokens seen at least ``min_seen`` times (tagged or free, counted as the patterns
    are) and tagged with the label at under ``max_rate`` of them, in corpora that annotate the label.
    Sequences no NER would tag are left out: shorter than :data:`MIN_CHARACTERS` (document-dependent
    abbreviations), without a letter, or starting or ending with a stop word or punctuation. Returns
    (label, wording) pairs, the wording's tokens joined by spaces, as the pipe's exclusions file holds them;
    ``read``: :func:`annotated` of the same corpora, when the caller has it already."""
    docs, _ = read or annotated(nlp, corpora)
    stop = nlp.Defaults.stop_words
    tagged: Counter = Counter()
    seen: Counter = Counter()
    for doc, labels, gold in tqdm(docs, desc="exclusions", unit="doc", leave=False):
        lower = [t.lower_ for t in doc]
        covered = {i for start, end in gold for i in range(start, end)}
        for start in range(len(lower)):
            for end in range(start + 1, min(start + max_tokens, len(lower)) + 1):
                if doc[end - 1].is_space:
                    break
                wording = tuple(lower[start:end])
                inside = any(i in covered for i in range(start, end))
                for label in labels:
                    if gold.get((start, end)) == label:
                        tagged[wording, label] += 1
                        seen[wording, label] += 1
                    elif not inside:
                        seen[wording, label] += 1

    def plausible(tokens: Tuple[str, ...]) -> bool:
        text = "".join(tokens)
        return len(text) >= MIN_CHARACTERS and any(ch.isalpha() for ch in text) and not any(
            t in stop or not any(ch.isalnum() for ch in t) for t in (tokens[0], tokens[-1]))

    excluded = sorted((label, tokens) for (tokens, label), n in seen.items()
                      if n >= min_seen and tagged[tokens, label] < max_rate * n and plausible(tokens))
    patterns = [(label, " ".join(tokens)) for label, tokens in excluded]
    report = {"corpora": [str(p) for p in corpora], "max_rate": max_rate, "min_seen": min_seen,
              "max_tokens": max_tokens, "exclusions": len(patterns),
              "per_label": dict(Counter(label for label, _ in patterns))}
    return patterns, report


def write_patterns(path: Path, patterns: Sequence[Dict[str, Any]]) -> None:
    from spacy_sapbert.pipes.dictionary import patterns_jsonl
    from spacy_sapbert.util.atomic import atomic_write_text

    atomic_write_text(path, patterns_jsonl(patterns))


def write_exclusions(path: Path, exclusions: Sequence[Tuple[str, str]]) -> None:
    from spacy_sapbert.pipes.dictionary import exclusions_tsv
    from spacy_sapbert.util.atomic import atomic_write_text

    atomic_write_text(path, exclusions_tsv(exclusions))


def linker_label_types(pipeline: Path, labels: Sequence[str], flag: str = "--grow-label") -> Dict[str, Sequence[str]]:
    """The KB types of each of ``labels`` in ``pipeline``'s linker settings (``label_to_types``, the
    factory's default where the config or the pipeline has none); an :class:`InputError` naming the config
    and the option ``flag`` when a label has no types (``label_to_types = null`` gives none)."""
    from spacy.util import load_config

    from spacy_sapbert.errors import InputError

    from spacy_sapbert.linking.settings import DEFAULT_LABEL_TO_TYPES

    config = load_config(pipeline / "config.cfg")
    linker = next((c for c in config["components"].values() if c.get("factory") == LINKER_PIPE), {})
    label_to_types = dict(linker.get("label_to_types", DEFAULT_LABEL_TO_TYPES) or {})  # absent: the factory's
    for label in labels:
        if label not in label_to_types:
            raise InputError(f"no KB types for {label!r} in the linker's label_to_types ({sorted(label_to_types)})",
                             pipeline / "config.cfg", field=flag)
    return {label: label_to_types[label] for label in labels}


def write_kb_grow_names(path: Path, kb_file: Path, label_types: Dict[str, Sequence[str]], tokenize: Any
                        ) -> Dict[str, object]:
    """Write the names of the KB concepts of the labels in ``label_types`` (from :func:`linker_label_types`)
    that an entity may grow to (:mod:`spacy_sapbert.ner.name_growth`); none is an error."""
    from spacy_sapbert.errors import InputError
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.ner.name_growth import kb_grow_names, write_grow_names

    growth = kb_grow_names(KnowledgeBase.from_jsonl(kb_file), label_types, tokenize)
    if not len(growth):
        raise InputError(f"no name of 2 or more word tokens among the concepts of types {dict(label_types)}",
                         kb_file, field="--kb")
    write_grow_names(path, growth)
    return {"kb": str(kb_file), "labels": list(label_types), "names": len(growth), "output": str(path)}


__all__ = ["annotated", "annotation_rates", "dictionary_patterns", "annotator_exclusions", "write_patterns",
           "write_exclusions", "linker_label_types", "write_kb_grow_names", "MIN_CHARACTERS"]
