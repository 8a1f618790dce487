"""Calibrated scores: the logistic model, its threshold for a precision, and the pipe that
saves it and reports probabilities."""
from __future__ import annotations

import json

import numpy as np
import pytest
import spacy

from spacy_sapbert.calibration import (Calibration, candidate_features, fit_calibration, reliability_curve,
                                       threshold_for_precision)
from spacy_sapbert.errors import InputError

from tests.test_component import TEXTS, links, make_nlp
from tests.linker_fixtures import write_small_kb


def _synthetic(n: int = 4000, seed: int = 0):
    """Mentions whose chance of being right is a known logistic function of (score, margin)."""
    rng = np.random.default_rng(seed)
    x = np.stack([rng.uniform(0.4, 1.0, n), rng.uniform(0.0, 0.3, n)], axis=1)
    truth = 1 / (1 + np.exp(-(12 * x[:, 0] + 20 * x[:, 1] - 10)))
    return x, rng.uniform(size=n) < truth, truth


def test_features_are_score_and_margin_over_the_best_other_candidate():
    np.testing.assert_allclose(candidate_features([0.9, 0.7, 0.6]), [[0.9, 0.2], [0.7, -0.2], [0.6, -0.3]])
    np.testing.assert_allclose(candidate_features([0.8]), [[0.8, 1.8]])
    assert candidate_features([]).shape == (0, 2)


def test_fit_recovers_the_probabilities_it_was_fitted_on():
    x, y, truth = _synthetic()
    calibration = fit_calibration(x, y, fitted_on="synthetic")
    assert np.abs(calibration.probabilities_of(x) - truth).mean() < 0.03
    assert calibration.weights[0] > 0 and calibration.weights[1] > 0
    # the probability of the first candidate rises with its margin
    low, high = calibration.probabilities([0.8, 0.79])[0], calibration.probabilities([0.8, 0.5])[0]
    assert high > low


def test_threshold_reaches_the_precision_with_the_most_coverage():
    p = np.array([0.99, 0.9, 0.8, 0.7, 0.6, 0.5])
    right = np.array([True, True, True, False, True, False])
    threshold, coverage, precision = threshold_for_precision(p, right, 0.8)
    assert (threshold, coverage) == (0.6, 5 / 6) and precision == pytest.approx(0.8)
    assert threshold_for_precision(p, right, 1.0)[:2] == (0.8, 0.5)
    assert threshold_for_precision(p, np.zeros(6, bool), 0.5) == (1.0, 0.0, 1.0)  # nothing reaches it: link nothing
    # ties: a threshold links every mention with that probability, so precision is over all of them
    assert threshold_for_precision(np.array([0.9, 0.9]), np.array([True, False]), 0.6)[1] == 0.0
    curve = reliability_curve(p, right, [0.0, 0.75])
    assert curve[0]["coverage"] == 1.0 and curve[1] == {"threshold": 0.75, "coverage": 0.5, "precision": 1.0,
                                                       "linked": 3}


def test_round_trip_and_bad_files_name_the_field():
    calibration = Calibration((5.0, 9.0), -3.5, "dev")
    assert Calibration.from_dict(json.loads(json.dumps(calibration.to_dict()))) == calibration
    bad = dict(calibration.to_dict(), weights=[1.0, "x"])
    with pytest.raises(InputError, match="calibration.weights"):
        Calibration.from_dict(bad, "cfg.json")
    with pytest.raises(InputError, match="calibration.format"):
        Calibration.from_dict(dict(calibration.to_dict(), format="isotonic/9"))
    with pytest.raises(InputError, match="all are right"):
        fit_calibration(np.ones((3, 2)), [True, True, True])


def test_calibrated_pipe_reports_probabilities_thresholds_them_and_saves_them(tiny_bert, tmp_path):
    nlp = make_nlp(tiny_bert, write_small_kb(tmp_path))
    pipe = nlp.get_pipe("sapbert_linker")
    raw = [links(doc) for doc in nlp.pipe(TEXTS)]
    pipe.calibration = Calibration((10.0, 20.0), -9.0, "test")
    calibrated = [links(doc) for doc in nlp.pipe(TEXTS)]
    for before, after in zip(raw, calibrated):
        for (text, kb_id, cands), (_, kb_id2, cands2) in zip(before, after):
            assert [c for c, _ in cands] == [c for c, _ in cands2] and kb_id == kb_id2  # same order, new scores
            every = pipe.linker.candidates([text])[0]  # raw cosines of every candidate, as the margin needs
            expected = pipe.calibration.probabilities([s for _, s in every])[:len(cands2)]
            assert [s for _, s in cands2] == pytest.approx(expected.tolist())
    first = [c[0][1] for doc in calibrated for _, _, c in doc if c]
    pipe.threshold = float(np.median(first))
    kept = [c for doc in nlp.pipe(TEXTS) for _, _, c in links(doc)]
    assert 0 < sum(1 for c in kept if c) < len(kept)  # the threshold is a probability: some abstain

    nlp.to_disk(tmp_path / "pipeline")
    assert json.loads((tmp_path / "pipeline" / "sapbert_linker" / "cfg.json").read_text())["calibration"] == \
        pipe.calibration.to_dict()
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.get_pipe("sapbert_linker").calibration == pipe.calibration
    loaded.get_pipe("sapbert_linker").threshold = pipe.threshold  # a live change; config.cfg keeps the added value
    assert [links(d) for d in loaded.pipe(TEXTS)] == [links(d) for d in nlp.pipe(TEXTS)]
    pipe.calibration = None
    assert [links(doc) for doc in nlp.pipe(TEXTS)] != [links(d) for d in loaded.pipe(TEXTS)]
