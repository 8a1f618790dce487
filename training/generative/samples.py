"""Training samples of the generative linker: ``(left, mention, right) → target name``, as JSONL.

**KB-guided pre-training** (GenBioEL §3.2): for a concept with at least two names, pick two
of them, ``a`` (the marked mention) and ``b`` (the target), and a clause ``c``: its
definition, or, without one, up to three other names joined by commas. ``a`` and ``c`` go
into one of :data:`TEMPLATES`, ``a`` marked as the mention; the target is ``b``. Every choice
is drawn from a generator seeded by ``seed`` and the concept's position, so the file is the
same on every run.

**Synonyms-aware fine-tuning** (§3.3): for a mention annotated with a concept, the target is
not the canonical name but the concept's name most similar to the mention by character
3-gram TF-IDF cosine (fitted on all the dictionary's names), which is easier to generate from
the mention and still maps back to the concept.

A sample line: ``{"left", "mention", "right", "target", "concept", "source"}``.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Sequence, Tuple, Union

from spacy_sapbert.util.atomic import atomic_open
from spacy_sapbert.formats.biosyn import id_list
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.errors import InputError
from spacy_sapbert.generative.seq2seq import CONTEXT_CHARS

PathLike = Union[str, Path]
TEMPLATES = (
    "{c} are the synonyms of {a}.",
    "{a} has synonyms such as {c}.",
    "{a} is also called {c}.",
    "{a} refers to {c}.",
    "{a} is defined as {c}.",
    "{a}: {c}.",
)
DEFINITION_TEMPLATES = (3, 4, 5)
"""Indices of the templates that read well with a definition as ``c`` (the others take names)."""


@dataclass
class Sample:
    left: str
    mention: str
    right: str
    target: str
    concept: str
    source: str = ""


def kb_guided(concepts: Iterable[Concept], seed: int = 42, per_concept: int = 1) -> Iterator[Sample]:
    """Pre-training samples from the KB (see the module's docstring)."""
    for position, concept in enumerate(concepts):
        names = list(dict.fromkeys(n for n in concept.names if n.strip()))
        if len(names) < 2:
            continue
        rng = random.Random(seed * 1_000_003 + position)
        for _ in range(per_concept):
            a, b = rng.sample(names, 2)
            others = [n for n in names if n not in (a, b)]
            if concept.definition:
                clause, template = concept.definition.strip().rstrip("."), TEMPLATES[rng.choice(DEFINITION_TEMPLATES)]
            else:
                clause = ", ".join(rng.sample(others, min(3, len(others)))) if others else b
                template = TEMPLATES[rng.randrange(3)]
            left, _, right = template.format(a="\0", c=clause).partition("\0")
            yield Sample(left.strip(), a, right.strip(), b, concept.concept_id, "kb")


class SynonymChooser:
    """The concept name nearest a mention by character 3-gram TF-IDF cosine."""

    def __init__(self, names: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(analyzer="char", ngram_range=(3, 3), lowercase=True).fit(list(names))

    def choose(self, mention: str, names: Sequence[str]) -> str:
        if len(names) == 1:
            return names[0]
        vectors = self.vectorizer.transform([mention, *names])
        similarity = (vectors[1:] @ vectors[0].T).toarray().ravel()
        return names[int(similarity.argmax())]


def synonyms_aware(mentions: Iterable[Tuple[str, str, str, List[str], str]], dictionary: Sequence[Tuple[str, str]]
                   ) -> Tuple[List[Sample], Dict[str, int]]:
    """Fine-tuning samples: ``(left, mention, right, gold IDs, where)`` → the nearest name of the gold
    concept in ``dictionary`` (``(CUI, name)`` pairs; a CUI may join several IDs with ``|``)."""
    by_id: Dict[str, List[Tuple[str, str]]] = {}
    for cui, name in dictionary:
        for one in id_list(cui):
            by_id.setdefault(one, []).append((cui, name))
    chooser = SynonymChooser([name for _, name in dictionary])
    samples, stats = [], {"mentions": 0, "samples": 0, "not_in_dictionary": 0}
    for left, mention, right, gold, where in mentions:
        stats["mentions"] += 1
        entries = [entry for one in gold for entry in by_id.get(one, [])]
        if not entries:
            stats["not_in_dictionary"] += 1
            continue
        target = chooser.choose(mention, [name for _, name in entries])
        cui = next(c for c, name in entries if name == target)
        samples.append(Sample(left[-CONTEXT_CHARS:], mention, right[:CONTEXT_CHARS], target, cui, where))
        stats["samples"] += 1
    return samples, stats


def write_samples(samples: Iterable[Sample], path: PathLike) -> Tuple[Path, int]:
    """Write ``samples`` as JSONL, whole or not at all; (path, count)."""
    count = 0
    with atomic_open(path, "w") as out:
        for sample in samples:
            out.write(json.dumps(asdict(sample), ensure_ascii=False) + "\n")
            count += 1
    return Path(path), count


def read_samples(path: PathLike) -> Tuple[List[Sample], str]:
    """(samples, SHA-256 of the file) of a samples file; a bad line names its file and line."""
    path = Path(path)
    if not path.is_file():
        raise InputError("samples file not found", path)
    data = path.read_bytes()
    samples = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            samples.append(Sample(**json.loads(line)))
        except (json.JSONDecodeError, TypeError) as err:
            raise InputError(f"expected a sample object ({err})", path, number) from err
    return samples, hashlib.sha256(data).hexdigest()


__all__ = ["Sample", "SynonymChooser", "TEMPLATES", "kb_guided", "read_samples", "synonyms_aware", "write_samples"]
