"""Scores that mean something: a candidate's probability of being the right concept.

A cosine similarity says how close two names are, not how likely the link is right: 0.83 is
a sure link for "breast cancer" and a guess for "PD". What separates them is the cosine
*and* its margin over the next concept (an ambiguous mention has several close concepts),
so :class:`Calibration` maps (cosine, margin) to P(correct) with a logistic model fitted on
gold mentions of a development set (Platt scaling with one extra feature), and the
threshold the pipe abstains below is a probability chosen for a target precision.

Stored as a few JSON numbers in the pipe's ``cfg.json``; nothing here is pickled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from spacy_sapbert.errors import InputError

FEATURES = ("score", "margin")
FORMAT = "logistic-score-margin/1"


def candidate_features(scores: Sequence[float]) -> np.ndarray:
    """(n, 2) features of a mention's candidates, given their scores best first: the score and
    its margin over the best *other* candidate (negative for every candidate but the first)."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size == 0:
        return np.zeros((0, 2))
    if values.size == 1:
        others = np.array([-1.0])  # no rival concept: the worst a cosine can be
    else:
        others = np.full(values.size, values[0])
        others[0] = values[1]
    return np.stack([values, values - others], axis=1)


@dataclass(frozen=True)
class Calibration:
    """P(candidate is right) = sigmoid(w · (score, margin) + b)."""

    weights: Tuple[float, float]
    bias: float
    fitted_on: str = ""
    """What it was fitted on (dataset, mentions), for the model card."""

    def probabilities(self, scores: Sequence[float]) -> np.ndarray:
        """Probabilities of a mention's candidates, given their scores best first (same order)."""
        return self.probabilities_of(candidate_features(scores))

    def probabilities_of(self, features: np.ndarray) -> np.ndarray:
        """Probabilities of rows of :func:`candidate_features`."""
        logits = np.asarray(features, dtype=np.float64).reshape(-1, len(FEATURES)) @ np.asarray(self.weights)
        return 1.0 / (1.0 + np.exp(-(logits + self.bias)))

    def to_dict(self) -> Dict[str, Any]:
        return {"format": FORMAT, "features": list(FEATURES), "weights": list(self.weights), "bias": self.bias,
                "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "calibration") -> "Calibration":
        """Read :meth:`to_dict`'s output, naming the field that is wrong."""
        if not isinstance(data, Mapping):
            raise InputError(f"expected an object, got {type(data).__name__}", where, field="calibration")
        if data.get("format") != FORMAT:
            raise InputError(f"unknown calibration format {data.get('format')!r} (this version reads {FORMAT!r})",
                             where, field="calibration.format")
        weights = data.get("weights")
        if (not isinstance(weights, list) or len(weights) != len(FEATURES)
                or not all(_is_finite(w) for w in weights)):
            raise InputError(f"expected {len(FEATURES)} finite numbers, got {weights!r}", where,
                             field="calibration.weights")
        if not _is_finite(data.get("bias")):
            raise InputError(f"expected a finite number, got {data.get('bias')!r}", where, field="calibration.bias")
        return cls((float(weights[0]), float(weights[1])), float(data["bias"]), str(data.get("fitted_on", "")))


def _is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fit_calibration(features: np.ndarray, correct: Sequence[bool], fitted_on: str = "",
                    l2: float = 1e-2, iterations: int = 100) -> Calibration:
    """Logistic regression of ``correct`` on ``features`` (n, 2) by Newton's method, with a small
    L2 penalty so that a separable set still gives finite weights."""
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURES) or len(x) != len(y):
        raise ValueError(f"features must be (n, {len(FEATURES)}) with one label per row, got {x.shape}, {y.shape}")
    if len(np.unique(y)) < 2:
        raise InputError("calibration needs right and wrong links among the mentions; all are "
                         + ("right" if y.size and y[0] else "wrong"), field="calibration")
    design = np.hstack([x, np.ones((len(x), 1))])
    theta = np.zeros(design.shape[1])
    penalty = np.diag([l2] * x.shape[1] + [0.0])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(design @ theta)))
        gradient = design.T @ (p - y) + penalty @ theta
        hessian = (design * (p * (1 - p))[:, None]).T @ design + penalty + 1e-9 * np.eye(len(theta))
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.abs(step).max() < 1e-8:
            break
    return Calibration((float(theta[0]), float(theta[1])), float(theta[2]), fitted_on)


def reliability_curve(probabilities: Sequence[float], correct: Sequence[bool],
                      thresholds: Sequence[float]) -> List[Dict[str, float]]:
    """Per threshold: the share of mentions linked (coverage) and the precision of those links.
    ``probabilities`` and ``correct`` are per mention (its first candidate)."""
    p = np.asarray(probabilities, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    rows = []
    for threshold in thresholds:
        linked = p >= threshold
        n = int(linked.sum())
        rows.append({"threshold": float(threshold), "coverage": float(linked.mean()) if p.size else 0.0,
                     "precision": float(ok[linked].mean()) if n else 1.0, "linked": n})
    return rows


def threshold_for_precision(probabilities: Sequence[float], correct: Sequence[bool],
                            min_precision: float) -> Tuple[float, float, float]:
    """The lowest threshold whose links reach ``min_precision`` (the most coverage that precision
    allows): (threshold, coverage, precision). Candidate thresholds are the observed probabilities."""
    p = np.asarray(probabilities, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    order = np.argsort(-p, kind="stable")
    hits = np.cumsum(ok[order])
    precision = hits / np.arange(1, len(p) + 1)
    # a threshold at p[order[i]] links every mention with that probability or more: take the last
    # index of each run of equal probabilities
    last_of_run = np.r_[p[order][1:] != p[order][:-1], True]
    good = np.flatnonzero((precision >= min_precision) & last_of_run)
    if good.size == 0:
        return 1.0, 0.0, 1.0
    i = int(good[-1])
    return float(p[order[i]]), (i + 1) / len(p), float(precision[i])


__all__ = ["Calibration", "FEATURES", "candidate_features", "fit_calibration", "reliability_curve",
           "threshold_for_precision"]
