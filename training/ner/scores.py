"""NER scores on raw text: exact character spans against the PubTator gold.

spaCy's own scorer (what ``spacy train`` prints) compares entities with the converted DocBin,
where a gold mention that does not sit on token boundaries is "missing" and a prediction on it
is ignored: it cannot see the mentions the tokenisation made unreachable. Here the pipeline
reads the text as a user would give it and a prediction counts only if its character offsets
and label equal a gold mention's, so those mentions count as misses. The share of gold
mentions that lie on the pipeline's token boundaries is reported as the recall ceiling.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from spacy.language import Language
from tqdm import tqdm

from ..corpora import Document

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
SpanKey = Tuple[str, int, int, str]
"""(pmid, start_char, end_char, label)."""


@dataclass(frozen=True)
class PRF:
    """Counts and precision/recall/F1 (in percent) of one label or of all labels together."""

    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float:
        return 100.0 * self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return 100.0 * self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_dict(self) -> Dict[str, float]:
        return {"p": round(self.precision, 2), "r": round(self.recall, 2), "f": round(self.f1, 2),
                "tp": self.tp, "fp": self.fp, "fn": self.fn}


def gold_spans(documents: Iterable[Document], label_map: Mapping[str, str]) -> Set[SpanKey]:
    """The gold mentions as (pmid, start, end, label); types missing from label_map are left out."""
    return {(doc.pmid, m.start, m.end, label_map[m.type]) for doc in documents for m in doc.mentions
            if m.type in label_map}


def predict_spans(nlp: Language, documents: Sequence[Document], batch_size: int = 32,
                  show_progress: bool = True) -> Tuple[Set[SpanKey], Dict[str, List[Tuple[int, int]]]]:
    """Run ``nlp`` over each document's text; returns its entities and each doc's token offsets."""
    predicted: Set[SpanKey] = set()
    tokens: Dict[str, List[Tuple[int, int]]] = {}
    texts = (d.text for d in documents)
    docs = nlp.pipe(texts, batch_size=batch_size)
    for document, doc in tqdm(zip(documents, docs), total=len(documents), desc="NER", unit="doc",
                              disable=not show_progress, leave=False):
        predicted.update((document.pmid, e.start_char, e.end_char, e.label_) for e in doc.ents)
        tokens[document.pmid] = [(t.idx, t.idx + len(t.text)) for t in doc]
    return predicted, tokens


def score_spans(gold: Set[SpanKey], predicted: Set[SpanKey], labels: Optional[Sequence[str]] = None) -> Dict[str, PRF]:
    """Exact-match P/R/F1 per label and over all of ``labels`` (key ``"ALL"``).

    Predictions with a label outside ``labels`` are ignored: on a corpus that annotates
    diseases only, a predicted CHEMICAL is neither right nor wrong.
    """
    labels = list(labels) if labels is not None else sorted({g[3] for g in gold} | {p[3] for p in predicted})
    scores: Dict[str, PRF] = {}
    total = Counter()
    for label in labels:
        g = {s for s in gold if s[3] == label}
        p = {s for s in predicted if s[3] == label}
        tp = len(g & p)
        scores[label] = PRF(tp, len(p) - tp, len(g) - tp)
        total.update({"tp": tp, "fp": len(p) - tp, "fn": len(g) - tp})
    scores["ALL"] = PRF(total["tp"], total["fp"], total["fn"])
    return scores


def reachable_share(gold: Set[SpanKey], tokens: Mapping[str, List[Tuple[int, int]]]) -> Dict[str, float]:
    """Per label, the percentage of gold spans that start and end on token boundaries (the recall ceiling)."""
    starts = {pmid: {s for s, _ in offs} for pmid, offs in tokens.items()}
    ends = {pmid: {e for _, e in offs} for pmid, offs in tokens.items()}
    hit, count = Counter(), Counter()
    for pmid, start, end, label in gold:
        for key in (label, "ALL"):
            count[key] += 1
            hit[key] += start in starts.get(pmid, ()) and end in ends.get(pmid, ())
    return {key: round(100.0 * hit[key] / count[key], 2) for key in count}


def evaluate_corpus(nlp: Language, documents: Sequence[Document], label_map: Mapping[str, str],
                    labels: Optional[Sequence[str]] = None, name: str = "") -> dict:
    """Scores of ``nlp`` on one corpus: per-label P/R/F1 and the recall ceiling of its tokenisation."""
    gold = gold_spans(documents, label_map)
    predicted, tokens = predict_spans(nlp, documents)
    labels = list(labels) if labels is not None else sorted(set(label_map.values()))
    scores = score_spans(gold, predicted, labels)
    report = {
        "corpus": name,
        "documents": len(documents),
        "gold_mentions": len(gold),
        "scores": {label: prf.to_dict() for label, prf in scores.items()},
        "reachable_percent": {k: v for k, v in reachable_share(gold, tokens).items() if k in labels or k == "ALL"},
    }
    return report


def format_report(report: dict) -> str:
    """A small table: one row per label, as ``ner-evaluate`` prints it."""
    lines = [f"{report['corpus']} ({report['documents']} documents, {report['gold_mentions']} gold mentions)",
             f"{'label':<10} {'P':>6} {'R':>6} {'F1':>6} {'TP':>6} {'FP':>6} {'FN':>6} {'reachable%':>11}"]
    for label, s in report["scores"].items():
        reach = report["reachable_percent"].get(label, float("nan"))
        lines.append(f"{label:<10} {s['p']:>6.2f} {s['r']:>6.2f} {s['f']:>6.2f} {s['tp']:>6} {s['fp']:>6} "
                     f"{s['fn']:>6} {reach:>11.2f}")
    return "\n".join(lines)


def check_report_path(output: Optional[PathLike], overwrite: bool, read: Iterable[Optional[PathLike]]) -> None:
    """Before a scoring command runs: its report ``output`` (when given) is new, or ``overwrite``, and is none of the
    files ``read`` nor inside a folder of them (pipelines, read whole when they load)."""
    from spacy_sapbert.util.atomic import check_new_file

    if output is not None:
        check_new_file(output, overwrite, [p for p in read if p is not None])


def write_report(reports: Sequence[dict], path: PathLike, extra: Optional[dict] = None) -> Path:
    """Write the reports (and settings) as JSON for the metrics/ folder (whole or not at all)."""
    from spacy_sapbert.util.atomic import atomic_write_text

    return atomic_write_text(path, json.dumps({**(extra or {}), "reports": list(reports)}, indent=2) + "\n")
