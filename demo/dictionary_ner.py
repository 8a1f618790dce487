"""A dictionary matcher over a KB's names: how the demo finds mentions in a pipeline without NER.

The embedded default pipeline has its own NER model, but the demo also serves pipelines that
have none: one it builds from ``--model`` and ``--kb`` without ``--ner``, or a saved pipeline
with only the linker. There, mentions are found by exact (case-insensitive) matching of the
KB's names, so a user can still try the linker on free text. The UI says so, and how to get
a NER: this finds only names that are in the KB verbatim, which is the one thing the
embedding linker does not need.

Why a custom component instead of spaCy's ``entity_ruler``: a KB has hundreds of thousands of
names, and the rules differ by kind of name — acronyms (``HCQ``, ``MI``, ``ALL``) must match
case-sensitively or "all" in running text becomes a leukaemia, everything else matches on the
lower-cased form. Short forms that scispaCy's ``AbbreviationDetector`` defined in the text are
added as entities of their long form's label, as a NER model would tag them, by the rule of the
package's ``abbreviation_entities`` pipe (:mod:`spacy_sapbert.pipes.abbreviations`), so the demo
labels them as a packaged NER pipeline does.
"""
from __future__ import annotations

import logging
import re
from typing import Dict, Iterable, List, Optional, Tuple

from spacy.language import Language
from spacy.lang.en.stop_words import STOP_WORDS
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Span
from spacy.util import filter_spans
from tqdm import tqdm

from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.pipes.abbreviations import short_form_entities, with_short_forms, without_unlabelled_short_forms

logger = logging.getLogger(__name__)

FACTORY_NAME = "sapbert_demo_dictionary_ner"
DEFAULT_LABEL = "ENTITY"
_ACRONYM = re.compile(r"^[A-Z0-9][A-Z0-9\-]{1,7}$")


def is_acronym(name: str) -> bool:
    """Upper-case short names (with at least one letter) are matched case-sensitively."""
    return bool(_ACRONYM.match(name)) and any(ch.isalpha() for ch in name)


def usable_name(name: str, min_length: int) -> bool:
    """Names that would flood running text with false matches are left out: stop words,
    numbers, and lower-case names shorter than ``min_length``."""
    stripped = name.strip()
    if is_acronym(stripped):  # matched case-sensitively, so "ALL" is safe where "all" is not
        return True
    if not stripped or stripped.lower() in STOP_WORDS or stripped.replace(".", "").isdigit():
        return False
    return len(stripped) >= min_length


def singular_variant(name: str) -> Optional[str]:
    """The name with its last word made singular by the two commonest English rules
    (``Cardiomyopathies`` → ``Cardiomyopathy``, ``Chronic Kidney Diseases`` → ``… Disease``),
    or None. MeSH headings are plural; running text mostly is not."""
    head, _, last = name.rpartition(" ")
    lower = last.lower()
    if len(lower) > 4 and lower.endswith("ies"):
        last = last[:-3] + "y"
    elif len(lower) > 3 and lower.endswith("s") and not lower.endswith(("ss", "us", "is")):
        last = last[:-1]
    else:
        return None
    return f"{head} {last}" if head else last


def concept_label(types: Iterable[str], default: str = DEFAULT_LABEL) -> str:
    """The entity label for a concept: its first type, upper-cased (``Disease`` → ``DISEASE``)."""
    for value in types:
        if value and value.strip():
            return value.strip().upper().replace(" ", "_")
    return default


class DictionaryNER:
    """Sets ``doc.ents`` from exact KB-name matches (longest match wins)."""

    def __init__(self, nlp: Language, name: str = FACTORY_NAME, min_length: int = 3,
                 default_label: str = DEFAULT_LABEL) -> None:
        self.nlp = nlp
        self.name = name
        self.min_length = min_length
        self.default_label = default_label
        self.lower_matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
        self.exact_matcher = PhraseMatcher(nlp.vocab, attr="ORTH")
        self.n_names = 0
        self.spans_key: Optional[str] = None
        """Write matches to ``doc.spans[spans_key]`` instead of ``doc.ents`` (when the linker reads a span group)."""

    def add_kb(self, kb: KnowledgeBase, show_progress: bool = True) -> int:
        """Add every usable name of ``kb`` (and the singular of plural names); returns how many
        patterns were added."""
        by_label: Dict[Tuple[str, bool], List[str]] = {}
        seen = set()
        for concept in kb:
            label = concept_label(concept.types, self.default_label)
            for name in concept.names:
                name = name.strip()
                if not usable_name(name, self.min_length):
                    continue
                exact = is_acronym(name)
                variants = [name] if exact else [name] + [v for v in [singular_variant(name)] if v]
                for variant in variants:
                    key = (variant if exact else variant.lower(), label)
                    if key in seen:
                        continue
                    seen.add(key)
                    by_label.setdefault((label, exact), []).append(variant)
        total = sum(len(v) for v in by_label.values())
        bar = tqdm(total=total, desc="dictionary matcher", unit="name", disable=not show_progress)
        for (label, exact), names in by_label.items():
            matcher = self.exact_matcher if exact else self.lower_matcher
            docs = []
            for doc in self.nlp.tokenizer.pipe(names, batch_size=2000):
                docs.append(doc)
                bar.update(1)
            matcher.add(label, docs)
        bar.close()
        self.n_names += total
        logger.info("dictionary matcher: %d patterns from KB %r", total, kb.name)
        return total

    def __call__(self, doc: Doc) -> Doc:
        spans = [Span(doc, start, end, label=key)
                 for matcher in (self.lower_matcher, self.exact_matcher)
                 for key, start, end in matcher(doc)]
        spans = filter_spans(spans)
        spans = with_short_forms(spans, short_form_entities(doc, spans))
        spans = without_unlabelled_short_forms(doc, spans)
        spans = sorted(spans, key=lambda s: s.start)
        if self.spans_key:
            doc.spans[self.spans_key] = spans
        else:
            doc.ents = spans
        return doc


@Language.factory(FACTORY_NAME, default_config={"min_length": 3, "default_label": DEFAULT_LABEL})
def make_dictionary_ner(nlp: Language, name: str, min_length: int, default_label: str) -> DictionaryNER:
    """Factory; fill the matcher with :meth:`DictionaryNER.add_kb` after ``add_pipe``."""
    return DictionaryNER(nlp, name=name, min_length=min_length, default_label=default_label)
