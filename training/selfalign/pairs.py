"""Positive pairs for self-alignment training, and the TSV file that carries them.

Pretraining pairs come from a knowledge base: every pair of distinct normalised names of
one concept, at most :data:`spacy_sapbert.kb.knowledge_base.MAX_PAIRS_PER_CONCEPT` per concept (a seeded
random sample where a concept has more), so that concepts with hundreds of synonyms do
not drown the rest (SapBERT's recipe). ``sapbert kb stats`` counts the same pairs through
:func:`spacy_sapbert.kb.knowledge_base.pair_count`.

Fine-tuning pairs come from a PubTator training corpus: each mention is paired with the
names of its gold concept in a KB, which teaches the encoder how names are written in
text rather than in vocabularies.

The file format is ``concept_id<TAB>name_a<TAB>name_b``, one pair per line, names already
normalised; lines starting with ``#`` are comments (the writer records the source and the
KB fingerprint there, and the trainer copies them into the model's ``sapbert.json``).
"""
from __future__ import annotations

import itertools
import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from spacy_sapbert.util.atomic import atomic_open
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.knowledge_base import MAX_PAIRS_PER_CONCEPT, KnowledgeBase
from spacy_sapbert.kb.normalize import normalize

from ..corpora import Document, Mention

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
COMMENT = "#"


class Pair(NamedTuple):
    """Two names of one concept: a positive pair for the metric-learning loss."""

    concept_id: str
    name_a: str
    name_b: str


def concept_pairs(names: Sequence[str], concept_id: str, rng: random.Random,
                  max_pairs: int = MAX_PAIRS_PER_CONCEPT) -> List[Pair]:
    """All unordered pairs of ``names`` (already distinct and normalised), or a random
    sample of ``max_pairs`` of them; a concept with one name gives none (it has nothing
    to align with; the loss still sees it as a negative for other concepts' names)."""
    combos = list(itertools.combinations(names, 2))
    if len(combos) > max_pairs:
        combos = rng.sample(combos, max_pairs)
    return [Pair(concept_id, a, b) for a, b in combos]


def kb_pairs(kb: KnowledgeBase, seed: int = 42, max_pairs_per_concept: int = MAX_PAIRS_PER_CONCEPT) -> List[Pair]:
    """Pretraining pairs of a KB, shuffled; the same KB and seed give the same list."""
    if max_pairs_per_concept < 1:
        raise ValueError(f"max_pairs_per_concept must be >= 1, got {max_pairs_per_concept}")
    rng = random.Random(seed)
    pairs: List[Pair] = []
    for concept in kb:
        names = kb.normalized_names(concept)
        pairs.extend(concept_pairs(names, concept.concept_id, rng, max_pairs_per_concept))
    rng.shuffle(pairs)
    logger.info("%d pretraining pairs from %d concepts of KB %r", len(pairs), len(kb), kb.name)
    return pairs


@dataclass
class MentionPairStats:
    """What happened to each training mention: so a user can see how much of the corpus
    the KB could use, instead of mentions silently disappearing."""

    mentions: int = 0
    used: int = 0
    no_id: int = 0
    composite: int = 0
    id_not_in_kb: int = 0
    duplicate: int = 0
    empty_text: int = 0
    pairs: int = 0
    identical_names_skipped: int = 0
    missing_ids: Counter = field(default_factory=Counter)

    def as_dict(self) -> Dict[str, object]:
        out: Dict[str, object] = {k: v for k, v in self.__dict__.items() if k != "missing_ids"}
        out["most_common_missing_ids"] = self.missing_ids.most_common(10)
        return out


def mention_pairs(documents: Iterable[Document], kb: KnowledgeBase, seed: int = 42,
                  max_pairs_per_mention: int = MAX_PAIRS_PER_CONCEPT,
                  types: Optional[Sequence[str]] = None) -> Tuple[List[Pair], MentionPairStats]:
    """Fine-tuning pairs: (normalised mention, each name of its gold concept), shuffled.

    Defined behaviour for the awkward mentions, all counted in the returned stats:

    - no ID (``-1``): skipped;
    - composite mentions (``D1|D2``, "breast and ovarian cancer"): skipped, because the
      text names several concepts and pairing it with either one's names would teach a
      wrong synonym;
    - an ID the KB lacks (not even as an alternative ID): skipped; the most frequent such
      IDs are listed;
    - the same (concept, normalised mention) seen again: skipped, so that frequent
      mentions do not dominate an epoch;
    - a name identical to the mention itself is not paired with it (a pair of one text
      with itself carries no signal).

    The label is the KB's ``concept_id`` of the resolved concept, so a mention annotated
    with an OMIM ID and one annotated with the MeSH ID of the same MEDIC concept share it.
    """
    stats = MentionPairStats()
    rng = random.Random(seed)
    wanted = set(types) if types else None
    seen = set()
    pairs: List[Pair] = []
    for doc in documents:
        for mention in doc.mentions:
            if wanted is not None and mention.type not in wanted:
                continue
            stats.mentions += 1
            usable = _gold_concept_and_text(mention, kb, stats)
            if usable is None:
                continue
            concept, text = usable
            key = (concept.concept_id, text)
            if key in seen:
                stats.duplicate += 1
                continue
            seen.add(key)
            stats.used += 1
            names = [n for n in kb.normalized_names(concept) if n != text]
            stats.identical_names_skipped += len(kb.normalized_names(concept)) - len(names)
            if len(names) > max_pairs_per_mention:
                names = rng.sample(names, max_pairs_per_mention)
            pairs.extend(Pair(concept.concept_id, text, name) for name in names)
    rng.shuffle(pairs)
    stats.pairs = len(pairs)
    logger.info("%d fine-tuning pairs from %d of %d mentions (%d without ID, %d composite, %d with an ID not "
                "in KB %r, %d duplicates)", stats.pairs, stats.used, stats.mentions, stats.no_id, stats.composite,
                stats.id_not_in_kb, kb.name, stats.duplicate)
    return pairs, stats


def _gold_concept_and_text(mention: Mention, kb: KnowledgeBase,
                           stats: MentionPairStats) -> Optional[Tuple[Concept, str]]:
    """(the KB concept of ``mention``'s gold ID, its normalised text), or None, counted in ``stats``, for a
    mention without an ID, a composite one, one whose ID the KB lacks, or one that normalises to nothing."""
    if not mention.ids:
        stats.no_id += 1
        return None
    if mention.is_composite:
        stats.composite += 1
        return None
    concept = kb.resolve(mention.ids[0])
    if concept is None:
        stats.id_not_in_kb += 1
        stats.missing_ids[mention.ids[0]] += 1
        return None
    text = normalize(mention.text)
    if not text:
        stats.empty_text += 1
        return None
    return concept, text


# -- the TSV file ----------------------------------------------------------------------

def write_pairs(pairs: Iterable[Pair], path: PathLike, header: Optional[Dict[str, object]] = None) -> Path:
    """Write pairs as TSV (atomically), with ``# key=value`` header lines for provenance."""
    path = Path(path)
    count = 0
    with atomic_open(path, "w") as out:
        for key, value in (header or {}).items():
            out.write(f"{COMMENT} {key}={value}\n")
        for pair in pairs:
            for value in pair:
                if not value or "\t" in value or "\n" in value:
                    raise ValueError(f"pair field {value!r} is empty or holds a tab/newline: {pair}")
            out.write("\t".join(pair) + "\n")
            count += 1
    logger.info("wrote %d pairs to %s", count, path)
    return path


def iter_pairs(path: PathLike) -> Iterator[Tuple[int, Pair]]:
    """(line number, pair) for each pair line; a malformed line raises InputError with file:line."""
    path = Path(path)
    if not path.is_file():
        raise InputError("pairs file not found", path)
    with path.open(encoding="utf-8") as handle:
        try:
            for line_no, line in enumerate(handle, 1):
                line = line.rstrip("\n").rstrip("\r")
                if not line.strip() or line.startswith(COMMENT):
                    continue
                cols = line.split("\t")
                if len(cols) != 3:
                    raise InputError(f"expected 3 tab-separated fields (concept_id, name_a, name_b), found {len(cols)}",
                                     path, line_no)
                for name, value in zip(Pair._fields, cols):
                    if not value.strip():
                        raise InputError("empty value", path, line_no, name)
                yield line_no, Pair(*cols)
        except UnicodeDecodeError as err:
            raise InputError(f"not UTF-8 text ({err.reason})", path) from err


def read_pairs(path: PathLike) -> List[Pair]:
    """All pairs of a TSV file; an empty file (no pair lines) is an error, not an empty run."""
    pairs = [pair for _, pair in iter_pairs(path)]
    if not pairs:
        raise InputError("pairs file holds no pairs", path)
    return pairs


def read_header(path: PathLike) -> Dict[str, str]:
    """The ``# key=value`` lines at the top of a pairs file."""
    header: Dict[str, str] = {}
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            if not line.startswith(COMMENT):
                break
            key, sep, value = line[1:].strip().partition("=")
            if sep:
                header[key.strip()] = value.strip()
    return header


def mix_pairs(paths: Sequence[PathLike], limits: Sequence[int], seed: int = 42) -> Tuple[List[Pair], Dict[str, object]]:
    """Pairs of several files in one shuffled list, at most ``limits[i]`` (0 = all, a seeded
    sample otherwise) from ``paths[i]``: e.g. the task's mention pairs plus a sample of KB
    synonym pairs, so that fine-tuning keeps the KB's synonymy in view. The files must be
    written against the same KB (their ``kb_fingerprint`` headers agree): a concept ID means
    the same concept in all of them."""
    if not paths:
        raise ValueError("no pairs file to mix")
    if len(limits) != len(paths):
        raise ValueError(f"{len(limits)} limits for {len(paths)} pairs files")
    rng = random.Random(seed)
    fingerprints = {str(p): read_header(p).get("kb_fingerprint") for p in paths}
    if len(set(fingerprints.values())) > 1:
        raise InputError("pairs files written against different KBs (kb_fingerprint headers differ: "
                         + ", ".join(f"{p}={f}" for p, f in fingerprints.items()) + ")", paths[-1],
                         field="kb_fingerprint")
    mixed: List[Pair] = []
    taken: List[str] = []
    for path, limit in zip(paths, limits):
        pairs = read_pairs(path)
        if 0 < limit < len(pairs):
            pairs = rng.sample(pairs, limit)
        taken.append(f"{path}:{len(pairs)}")
        mixed.extend(pairs)
    rng.shuffle(mixed)
    first = read_header(paths[0])
    header: Dict[str, object] = {"source": "mix:" + ",".join(taken), "kb": first.get("kb", ""),
                                 "kb_fingerprint": first.get("kb_fingerprint", ""), "seed": seed}
    return mixed, header


def kb_header(kb: KnowledgeBase, source: str, seed: int, **extra: object) -> Dict[str, object]:
    """The provenance header written above the pairs of ``kb``."""
    header: Dict[str, object] = {"source": source, "kb": kb.name, "kb_fingerprint": kb.fingerprint(), "seed": seed}
    header.update(extra)
    return header


__all__ = [
    "Pair", "MentionPairStats", "concept_pairs", "kb_pairs", "mention_pairs", "write_pairs", "iter_pairs",
    "read_pairs", "read_header", "mix_pairs", "kb_header",
]
