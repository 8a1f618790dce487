"""What type-aware candidates change: BC5CDR dev gold spans linked with and without ``label_to_types``.

The embedded default pipeline's ``sapbert_linker`` (encoder, KB ``mesh-medic`` with
Disease and Chemical concepts, and its index as shipped: PQ, no re-ranking) links every gold
mention of the BC5CDR development set, labelled with its gold type (DISEASE / CHEMICAL),
twice: with the default ``label_to_types`` (DISEASE → Disease/Phenotype, CHEMICAL → Chemical)
and with ``null`` (every concept, the behaviour before type-aware candidates).

The spans go through the pipe itself, so abbreviations are linked through their long forms as
in use: each document's gold mentions are a span group (``spans_key``; gold mentions may
overlap, entities may not) and scispaCy's abbreviation detector has run on it. A mention that
does not start and end on a token boundary becomes the smallest token span around it (counted
below). Mentions without a gold ID (``-1``) are left out. A mention is right when its top
concept (``span.kb_id_``) carries one of its gold IDs (:func:`spacy_sapbert.kb.matching.is_gold`;
for a composite mention, any one part). The top concept is read from ``kb_id_``, not
``span._.kb_ents``: spaCy keys span extensions by character offsets, so two gold spans at the
same offsets with different labels (counted below) share one ``kb_ents``.

    python benchmarks/type_aware.py [--corpus assets/corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt]
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from spacy.tokens import Doc, Span

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import spacy_sapbert  # noqa: E402
from spacy_sapbert.kb.knowledge_base import KnowledgeBase  # noqa: E402
from spacy_sapbert.kb.matching import is_gold  # noqa: E402
from spacy_sapbert.training.corpora import Mention, read_pubtator  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "assets" / "corpora" / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt"
GOLD_KEY = "gold"
LABELS = ("DISEASE", "CHEMICAL")
WRONG_TYPE = {"DISEASE": "Chemical-only", "CHEMICAL": "Disease-only"}
"""Per span label, the concepts that could never be right for it (named for the report)."""


def gold_docs(nlp: Any, corpus: Path) -> Tuple[List[Doc], List[List[Mention]], int, int]:
    """One doc per document with its ID-bearing gold mentions as ``doc.spans["gold"]``, the
    abbreviation detector run; the mentions in span order; how many were off token boundaries;
    how many spans share their offsets with a span of another label."""
    detector = nlp.get_pipe("abbreviation_entities").detector
    docs, mentions, misaligned, shared = [], [], 0, 0
    for document in read_pubtator(corpus):
        doc = nlp.make_doc(document.text)
        spans, kept = [], []
        for mention in document.mentions:
            if not mention.has_id:
                continue
            span = doc.char_span(mention.start, mention.end, label=mention.type.upper(), alignment_mode="expand")
            if span is None:
                continue
            misaligned += span.start_char != mention.start or span.end_char != mention.end
            spans.append(span)
            kept.append(mention)
        doc.spans[GOLD_KEY] = spans
        labels = Counter((s.start_char, s.end_char, s.label_) for s in spans)
        offsets = Counter((start, end) for start, end, _ in labels)
        shared += sum(n for (start, end, _), n in labels.items() if offsets[(start, end)] > 1)
        detector(doc)
        docs.append(doc)
        mentions.append(kept)
    return docs, mentions, misaligned, shared


def wrong_type(concept_id: str, label: str, kb: KnowledgeBase) -> bool:
    types = set(kb[concept_id].types)
    return "Chemical" not in types if label == "CHEMICAL" else types == {"Chemical"}


def run(nlp: Any, docs: List[Doc], mentions: List[List[Mention]],
        label_to_types: Optional[Dict[str, List[str]]]) -> Tuple[Counter, Counter, Counter, float]:
    """(right, total, wrong-type) counts per label for one setting, and seconds taken."""
    pipe = nlp.get_pipe("sapbert_linker")
    pipe.configure(spans_key=GOLD_KEY, label_to_types=label_to_types)
    pipe.linker.clear_cache()
    right, total, mistyped = Counter(), Counter(), Counter()
    for doc in docs:  # without the kb_id the last run wrote
        doc.spans[GOLD_KEY] = [Span(doc, s.start, s.end, label=s.label) for s in doc.spans[GOLD_KEY]]
    started = time.perf_counter()
    linked = list(pipe.pipe(docs, batch_size=64))  # the spans of the last run are replaced
    seconds = time.perf_counter() - started
    for doc, gold in zip(linked, mentions):
        for span, mention in zip(doc.spans[GOLD_KEY], gold):
            label = span.label_
            total[label] += 1
            top = span.kb_id_ or None  # set_kb_id: the top concept of this span (the pipe's threshold is null)
            right[label] += top is not None and is_gold(top, mention.ids, pipe.kb)
            mistyped[label] += top is not None and wrong_type(top, label, pipe.kb)
    return right, total, mistyped, seconds


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args(argv)
    nlp = spacy_sapbert.load()
    pipe = nlp.get_pipe("sapbert_linker")
    default_map = pipe.label_to_types
    docs, mentions, misaligned, shared = gold_docs(nlp, args.corpus)
    index = pipe.index
    print(f"pipeline: embedded default; KB {pipe.kb.name!r} ({len(pipe.kb)} concepts, types "
          f"{sorted({t for c in pipe.kb for t in c.types})}); index {index.kind} {index.manifest.get('params')} "
          f"as shipped ({len(index)} rows); k={pipe.k}")
    print(f"corpus: {args.corpus.name}: {len(docs)} documents, {sum(map(len, mentions))} gold mentions with an ID "
          f"({misaligned} widened to token boundaries, {shared} at the offsets of a span of another label)")
    settings = ((str(None), None), (str(default_map), default_map))
    width = max(len(name) for name, _ in settings)
    print(f"{'label_to_types':<{width}} {'label':<9} {'Acc@1':>7} {'right':>6} {'spans':>6}  "
          "linked to a wrong-type concept")
    for name, mapping in settings:
        right, total, mistyped, seconds = run(nlp, docs, mentions, mapping)
        for label in (*LABELS, "all"):
            r = sum(right.values()) if label == "all" else right[label]
            n = sum(total.values()) if label == "all" else total[label]
            note = f"{mistyped[label]} {label} spans → {WRONG_TYPE[label]} concepts" if label in LABELS else \
                f"({seconds:.1f} s)"
            print(f"{name:<{width}} {label:<9} {r / max(n, 1):>7.2%} {r:>6} {n:>6}  {note}")


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message=r".*\[W036\]")  # scispaCy's empty matcher, on every document
    main()
