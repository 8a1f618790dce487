"""Calibrated scores and abstention, fitted and measured on gold spans of a PubTator corpus.

The pipe links what the NER finds, and some of it has no concept in the KB: BC5CDR marks
such mentions ``-1``, and a gold ID the KB lacks is no better. A link there is wrong
whatever it is, so these mentions are the negatives a threshold must learn to refuse.

The gold spans go through the pipeline as a user's spans do: the pipeline's own
abbreviation step runs on the text, the ``sapbert_linker`` pipe links each span with its
gold label (so the label-to-type filter applies), and the first candidate and the margin
over the next are the features of :mod:`spacy_sapbert.linking.calibration`.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from spacy_sapbert.linking.calibration import (Calibration, candidate_features, fit_calibration, reliability_curve,
                                       threshold_for_precision)
from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.matching import is_gold

from ..corpora import read_pubtator

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


@dataclass(frozen=True)
class LinkedSpan:
    """One gold span as the pipe linked it (before any threshold)."""

    pmid: str
    text: str
    label: str
    gold: Tuple[str, ...]
    """Gold IDs; empty for a ``-1`` mention."""
    scores: Tuple[float, ...]
    """The pipe's candidate scores, best first (raw: no calibration, no threshold)."""
    correct: bool
    in_kb: bool
    """A concept of the KB carries a gold ID (False for ``-1`` mentions too)."""


def link_gold_spans(nlp: Any, corpus: PathLike, candidates: int = 5) -> List[LinkedSpan]:
    """Link every gold span of ``corpus`` through ``nlp``'s own abbreviation step and linker, with
    the pipe's threshold and calibration off (raw scores are what calibration is fitted on)."""
    from spacy.tokens import Span

    from spacy.util import filter_spans

    pipe = nlp.get_pipe(LINKER_PIPE)
    before = pipe.settings
    pipe.configure(threshold=None, max_entities_per_mention=candidates)
    calibration, pipe.calibration = getattr(pipe, "calibration", None), None
    kb = pipe.kb
    before_linker = [name for name, _ in nlp.pipeline if name not in ("ner", LINKER_PIPE)]
    out: List[LinkedSpan] = []
    try:
        documents = list(read_pubtator(corpus))
        docs = []
        for document in documents:
            doc = nlp.make_doc(document.text)
            for name in before_linker:  # the abbreviation detector, which may relabel spans: gold spans win
                doc = nlp.get_pipe(name)(doc)
            golds = []
            for mention in document.mentions:
                span = doc.char_span(mention.start, mention.end, label=mention.type.upper(), alignment_mode="expand")
                if span is None:
                    raise InputError(f"mention {mention.text!r} does not align with tokens", corpus, mention.line)
                golds.append((mention, span))
            spans = [span for _, span in golds]
            doc.ents = ()
            doc.set_ents(filter_spans(spans))
            docs.append((document, doc, golds))
        for (document, doc, golds), linked in zip(docs, pipe.pipe(d for _, d, _ in docs)):
            by_offsets = {(e.start_char, e.end_char, e.label_): e for e in linked.ents}
            for mention, span in golds:
                ent = by_offsets.get((span.start_char, span.end_char, span.label_))
                if ent is None:  # an overlapping gold span lost to a longer one: linked alone
                    single = nlp.make_doc(document.text)
                    single.set_ents([Span(single, span.start, span.end, label=span.label_)])
                    ent = pipe(single).ents[0]
                found = ent._.get(pipe.settings.extension) or []
                in_kb = any(kb.resolve(g) is not None for g in mention.ids)
                correct = bool(found) and bool(mention.ids) and is_gold(found[0][0], mention.ids, kb)
                out.append(LinkedSpan(document.pmid, mention.text, span.label_, tuple(mention.ids),
                                      tuple(s for _, s in found), correct, in_kb))
    finally:
        pipe.configure(threshold=before.threshold, max_entities_per_mention=before.max_entities_per_mention)
        pipe.calibration = calibration
    return out


def features(spans: Iterable[LinkedSpan]) -> Tuple[np.ndarray, np.ndarray]:
    """(features of each span's first candidate, right or not); spans without a candidate are left out."""
    rows, labels = [], []
    for span in spans:
        if span.scores:
            rows.append(candidate_features(span.scores)[0])
            labels.append(span.correct)
    return np.array(rows).reshape(-1, 2), np.array(labels, dtype=bool)


def cross_validated(spans: Sequence[LinkedSpan], min_precision: float, folds: int = 2,
                    seed: int = 0) -> Dict[str, float]:
    """Precision and coverage at the threshold chosen on the other folds (documents split by PMID):
    what a held-out corpus of the same kind can expect, rather than the fitted set's own figure."""
    pmids = sorted({s.pmid for s in spans})
    rng = np.random.default_rng(seed)
    fold_of = dict(zip(rng.permutation(pmids), np.arange(len(pmids)) % folds))
    linked, right, total = 0, 0, 0
    for fold in range(folds):
        train = [s for s in spans if fold_of[s.pmid] != fold]
        test = [s for s in spans if fold_of[s.pmid] == fold]
        x, y = features(train)
        calibration = fit_calibration(x, y)
        threshold, _, _ = threshold_for_precision(calibration.probabilities_of(x), y, min_precision)
        xt, yt = features(test)
        keep = calibration.probabilities_of(xt) >= threshold
        linked += int(keep.sum())
        right += int(yt[keep].sum())
        total += len(test)
    return {"folds": folds, "precision": right / linked if linked else 1.0, "coverage": linked / total}


def fit_and_report(spans: Sequence[LinkedSpan], min_precision: float, fitted_on: str,
                   also_at: Sequence[float] = (), label_thresholds: Optional[Mapping[str, float]] = None
                   ) -> Tuple[Calibration, Dict[str, Any]]:
    """The calibration, its threshold for ``min_precision`` and what they cost, as a JSON-ready report;
    the reliability curve also has a row for each of ``also_at`` (the pipeline's own threshold, say), and
    a label in ``label_thresholds`` (the pipeline's own per-label thresholds) gets what its spans keep at
    its threshold beside what they keep at the fitted one (``by_label[label]["at_own_threshold"]``)."""
    x, y = features(spans)
    calibration = fit_calibration(x, y, fitted_on=fitted_on)
    probabilities = calibration.probabilities_of(x)
    threshold, coverage, precision = threshold_for_precision(probabilities, y, min_precision)
    n = len(spans)
    unlinkable = [s for s in spans if not s.in_kb]
    refused = sum(1 for s in unlinkable if not s.scores or
                  calibration.probabilities(s.scores)[0] < threshold)
    points = sorted({0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, threshold, *also_at})
    curve = reliability_curve(probabilities, y, points)
    report = {
        "fitted_on": fitted_on, "spans": n, "with_candidates": int(len(y)),
        "accuracy_without_threshold": float(y.mean()) if len(y) else 0.0,
        "unlinkable_spans": len(unlinkable), "unlinkable_refused": refused,
        "min_precision": min_precision, "threshold": threshold, "coverage": coverage * len(y) / max(n, 1),
        "precision": precision, "calibration": calibration.to_dict(),
        "reliability": sorted(curve, key=lambda row: row["threshold"]),
        "cross_validated": cross_validated(spans, min_precision),
        "by_label": {label: _label_summary([s for s in spans if s.label == label], calibration, threshold)
                     for label in sorted({s.label for s in spans})},
    }
    for label, own in (label_thresholds or {}).items():
        if label in report["by_label"]:
            summary = _label_summary([s for s in spans if s.label == label], calibration, own)
            report["by_label"][label]["at_own_threshold"] = {"threshold": own, "coverage": summary["coverage"],
                                                             "precision": summary["precision"]}
    return calibration, report


def apply_calibration(nlp: Any, calibration: Calibration, threshold: float) -> float:
    """Give ``nlp``'s linker ``calibration`` and ``threshold`` (rounded up to 4 decimals, so that the
    precision it was chosen for still holds), both on the pipe and in ``nlp``'s config, which is
    what ``nlp.to_disk`` saves; the rounded threshold is returned."""
    rounded = math.ceil(threshold * 1e4) / 1e4
    pipe = nlp.get_pipe(LINKER_PIPE)
    pipe.calibration = calibration
    pipe.threshold = rounded
    nlp.get_pipe_config(LINKER_PIPE)["threshold"] = rounded
    return rounded


def _label_summary(spans: Sequence[LinkedSpan], calibration: Calibration, threshold: float) -> Dict[str, float]:
    x, y = features(spans)
    keep = calibration.probabilities_of(x) >= threshold
    return {"spans": len(spans), "accuracy": float(y.mean()) if len(y) else 0.0,
            "coverage": float(keep.sum()) / max(len(spans), 1),
            "precision": float(y[keep].mean()) if keep.any() else 1.0}


__all__ = ["LinkedSpan", "cross_validated", "features", "fit_and_report", "link_gold_spans"]
