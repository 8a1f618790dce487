"""Gold mentions → evaluation queries, as BioSyn preprocessed them (SapBERT reused that data).

The published NCBI/BC5CDR figures were measured on queries that went through four
steps, and a number is only comparable when ours go through the same ones:

1. abbreviations are expanded from the mention's own abstract (BioSyn ran Ab3P; we run
   scispaCy's AbbreviationDetector, Schwartz & Hearst's rule-based algorithm, on a blank
   English pipeline with scispaCy's tokenizer): every whitespace token of the mention
   (and each side of a ``/``) that is a short form of its document is replaced by the
   long form;
2. composite mentions (several gold IDs) are split into one part per ID: BC5CDR gives
   the parts in a 7th column, NCBI does not, so the text is split with BioSyn's four
   patterns ("X of A and B", "A, B and C D stem", "A and B stem", "A/B"), or by words when
   there are as many words as IDs; when no pattern gives one part per ID the mention
   stays whole. As in BioSyn, a mixed MeSH/OMIM ID list keeps only its MeSH IDs
   (the OMIM ones are auxiliary);
3. each part is normalised with :func:`spacy_sapbert.kb.normalize.normalize` (lower-case,
   punctuation to spaces) — the same function the index uses for KB names;
4. mentions without an ID (``-1``) are dropped.

BioSyn also applied a hand-made spelling list to the NCBI test set; we do not (it was
written for that test set).
"""
from __future__ import annotations

import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.linking.composite import coordinated_parts
from spacy_sapbert.kb.ids import vocabulary
from spacy_sapbert.util.textfile import iter_lines

from ..corpora import Document, Mention, read_pubtator

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
MAX_EXPANSION_ROUNDS = 3


@dataclass(frozen=True)
class Query:
    """One evaluation query: a gold mention after preprocessing."""

    pmid: str
    start: int
    end: int
    mention: str
    """The mention as written in the text."""
    expanded: str
    """The mention after abbreviation expansion (original case, before splitting)."""
    parts: Tuple[str, ...]
    """Normalised query strings: one per composite part, else one."""
    gold: Tuple[str, ...]
    """Gold IDs; a composite query is a hit only when every part links to one of them."""
    type: str = ""
    source: str = ""
    """``file:line`` of the mention, for error reports and prediction dumps."""
    parts_aligned: bool = False
    """The corpus itself gave the parts in ID order (BC5CDR's 7th column), not a text pattern."""
    document: str = field(default="", repr=False, compare=False)
    """The abstract (title and text) the mention is in, ``document[start:end]`` being the mention: for
    systems that read context (:mod:`.context_systems`)."""

    @property
    def is_composite(self) -> bool:
        return len(self.gold) > 1

    @property
    def was_expanded(self) -> bool:
        return self.expanded != self.mention


# -- abbreviations ----------------------------------------------------------------------
class AbbreviationExpander:
    """Short form → long form per document, found by scispaCy's AbbreviationDetector.

    scispaCy's trained pipelines cannot be installed here and are not needed: the
    detector is rule-based and runs on a blank English pipeline. The pipeline gets the
    tokenizer scispaCy's own models use (``combined_rule_tokenizer``), which keeps
    hyphenated short forms whole: with spaCy's default English tokenizer "A-T", "B-NHL"
    or "T-PLL" are three tokens and are never found (NCBI test: 125 definitions instead
    of 115).
    """

    def __init__(self, scispacy_tokenizer: bool = True) -> None:
        import scispacy.abbreviation  # noqa: F401  (registers the "abbreviation_detector" factory)
        import spacy

        self.nlp = spacy.blank("en")
        if scispacy_tokenizer:
            from scispacy.custom_tokenizer import combined_rule_tokenizer

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # a regex in scispaCy's prefix rules
                self.nlp.tokenizer = combined_rule_tokenizer(self.nlp)
        self.nlp.add_pipe("abbreviation_detector")

    def maps(self, texts: Sequence[str], batch_size: int = 64) -> List[Dict[str, str]]:
        """One ``{short form: long form}`` per text; the first definition of a short form wins."""
        out: List[Dict[str, str]] = []
        with warnings.catch_warnings():
            # W036: scispaCy's detector keeps a second matcher that is empty until it has seen a
            # definition; the warning says so on every call and means nothing here.
            warnings.filterwarnings("ignore", message=r".*\[W036\]")
            docs = list(self.nlp.pipe(texts, batch_size=batch_size))
        for doc in docs:
            found: Dict[str, str] = {}
            for abbreviation in doc._.abbreviations:
                short, long = abbreviation.text, abbreviation._.long_form.text
                # A long form that contains its own short form would grow on every round.
                if short not in found and short != long and short not in long.split():
                    found[short] = long
            out.append(found)
        return out


def expand_abbreviations(mention: str, abbreviations: Dict[str, str]) -> str:
    """Replace every whitespace token (and each side of a ``/``) that is a short form.

    Repeated until nothing changes (a long form may itself hold a short form), at most
    :data:`MAX_EXPANSION_ROUNDS` rounds. A trailing comma is kept out of the lookup.
    """
    if not abbreviations:
        return mention
    current = mention
    for _ in range(MAX_EXPANSION_ROUNDS):
        tokens = []
        for token in current.split():
            if "/" in token:
                token = "/".join(abbreviations.get(t, t) for t in token.split("/"))
            elif token.endswith(",") and token[:-1] in abbreviations:
                token = abbreviations[token[:-1]] + ","
            else:
                token = abbreviations.get(token, token)
            tokens.append(token)
        expanded = " ".join(tokens)
        if expanded == current:
            break
        current = expanded
    return current


# -- composite mentions -----------------------------------------------------------------
# "HNPCC/Lynch syndrome": the gold says how many parts; no shared head is assumed
_SLASH = re.compile(r"(?P<before>(?:.* )*)(?P<left>.*)/(?P<right>.*)?(?P<after>(?: .*)*)")


def resolve_ids(ids: Sequence[str]) -> Tuple[str, ...]:
    """BioSyn's "auxiliary ID" rule: a list mixing OMIM with MeSH IDs keeps only the MeSH ones."""
    omim = [vocabulary(i) == "OMIM" for i in ids]
    if any(omim) and not all(omim):
        return tuple(i for i, is_omim in zip(ids, omim) if not is_omim)
    return tuple(ids)


def split_composite(mention: str, n_ids: int) -> List[str]:
    """The parts of a composite mention, one per ID, or ``[mention]`` when no rule fits."""
    mention = mention.strip()
    if n_ids <= 1:
        return [mention]
    parts = coordinated_parts(mention)
    if not parts:
        match = _SLASH.fullmatch(mention)
        if match and "and/or" not in mention:
            before, after = match.group("before").strip(), match.group("after").strip()
            parts = [" ".join(p for p in (before, side.strip(), after) if p)
                     for side in (match.group("left"), match.group("right") or "")]
        elif len(mention.split()) == n_ids:
            parts = mention.split()
    if len(parts) != n_ids:
        return [mention]
    return parts


# -- documents → queries ----------------------------------------------------------------
def _parts_column(lines: List[str], mention: Mention) -> Optional[List[str]]:
    """BC5CDR's 7th column (the composite's parts, ``|``-separated), when the line has one."""
    if not mention.line or mention.line > len(lines):
        return None
    cols = lines[mention.line - 1].rstrip("\r\n").split("\t")
    if len(cols) >= 7 and cols[6].strip():
        return [p.strip() for p in cols[6].split("|")]
    return None


def make_query(doc: Document, mention: Mention, abbreviations: Dict[str, str],
               parts_column: Optional[List[str]] = None, source: str = "") -> Optional[Query]:
    """One mention → a :class:`Query`, or ``None`` for a mention without an ID."""
    if not mention.has_id:
        return None
    gold = resolve_ids(mention.ids)
    expanded = expand_abbreviations(mention.text, abbreviations)
    aligned = len(gold) > 1 and parts_column is not None and len(parts_column) == len(gold)
    if aligned:
        raw_parts = [expand_abbreviations(p, abbreviations) for p in parts_column]
    else:
        raw_parts = split_composite(expanded, len(gold))
    return Query(doc.pmid, mention.start, mention.end, mention.text, expanded,
                 tuple(normalize(p) for p in raw_parts), gold, mention.type, source, aligned, doc.text)


def load_queries(path: PathLike, types: Optional[Iterable[str]] = None, expand: bool = True,
                 expander: Optional[AbbreviationExpander] = None) -> List[Query]:
    """The queries of a PubTator file, in file order; ``types`` keeps only those mention types."""
    path = Path(path)
    wanted = set(types) if types else None
    documents = list(read_pubtator(path))
    lines = [text for _, text in iter_lines(path)]  # same decoding (and .gz support) as read_pubtator
    if expand:
        expander = expander or AbbreviationExpander()
        maps = expander.maps([d.text for d in documents])
    else:
        maps = [{} for _ in documents]
    queries: List[Query] = []
    dropped = 0
    for doc, abbreviations in zip(documents, maps):
        for mention in doc.mentions:
            if wanted is not None and mention.type not in wanted:
                continue
            query = make_query(doc, mention, abbreviations, _parts_column(lines, mention), f"{path}:{mention.line}")
            if query is None:
                dropped += 1
            else:
                queries.append(query)
    logger.info("%s: %d queries (%d composite, %d with an abbreviation expanded), %d without an ID dropped",
                path.name, len(queries), sum(q.is_composite for q in queries),
                sum(q.was_expanded for q in queries), dropped)
    return queries


__all__ = ["AbbreviationExpander", "Query", "expand_abbreviations", "load_queries", "make_query", "resolve_ids",
           "split_composite"]
