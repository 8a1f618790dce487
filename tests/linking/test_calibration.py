"""Calibrated scores: the logistic model, its threshold for a precision, and the pipe that
saves it and reports probabilities."""
from __future__ import annotations

import json

import numpy as np
import pytest
import spacy

from spacy_sapbert.linking.calibration import (Calibration, candidate_features, fit_calibration, reliability_curve,
                                       threshold_for_precision)
from spacy_sapbert.errors import InputError

from tests.pipes.test_component import TEXTS, links, make_nlp
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


def write_gold_corpus(folder):
    """A PubTator file of gold spans over the small KB: right ones, an unlinkable ``-1`` and an ID the
    KB lacks (8 spans, 2 unlinkable)."""
    text = "Plaquenil and HCQ after a heart attack; renal failure, kidney failure and zebra fever."
    mentions = [("Plaquenil", "Chemical", "D006886"), ("HCQ", "Chemical", "D006886"),
                ("heart attack", "Disease", "D009203"), ("renal failure", "Disease", "D051437"),
                ("kidney failure", "Disease", "D051437"), ("zebra fever", "Disease", "-1")]
    lines = [f"1|t|{text}", "1|a|"]
    for mention, label, cid in mentions:
        start = text.index(mention)
        lines.append(f"1\t{start}\t{start + len(mention)}\t{mention}\t{label}\t{cid}")
    text2 = "Breast cancer and a made-up syndrome."
    lines += ["", f"2|t|{text2}", "2|a|", "2\t0\t13\tBreast cancer\tDisease\tD001943",
              "2\t20\t36\tmade-up syndrome\tDisease\tD999999"]
    corpus = folder / "gold.PubTator"
    corpus.write_text("\n".join(lines) + "\n")
    return corpus


def test_sapbert_calibrate_fits_on_gold_spans_and_writes_a_new_pipeline(tiny_bert, tmp_path):
    """Gold spans (right, unlinkable ``-1``, ID outside the KB) through a saved pipeline: the report's
    counts follow the corpus, and --output is a pipeline that loads with the calibration and threshold."""
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.training.cli import register

    register(app)
    make_nlp(tiny_bert, write_small_kb(tmp_path), ruler=False).to_disk(tmp_path / "pipeline")
    corpus = write_gold_corpus(tmp_path)
    result = CliRunner().invoke(app, ["calibrate", str(corpus), "--pipeline", str(tmp_path / "pipeline"),
                                      "--min-precision", "0.5", "--report", str(tmp_path / "r.json"),
                                      "--output", str(tmp_path / "calibrated")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["spans"] == 8 and report["unlinkable_spans"] == 2  # "-1" and the ID the KB lacks
    assert report["precision"] >= 0.5 and 0 < report["coverage"] <= 1
    assert report["by_label"].keys() == {"CHEMICAL", "DISEASE"}
    loaded = spacy.load(tmp_path / "calibrated").get_pipe("sapbert_linker")
    assert loaded.calibration == Calibration.from_dict(report["calibration"])
    assert loaded.threshold == pytest.approx(report["threshold"], abs=1e-4) and loaded.threshold >= report["threshold"]
    again = CliRunner().invoke(app, ["calibrate", str(corpus), "--pipeline", str(tmp_path / "pipeline"),
                                     "--report", str(tmp_path / "r2.json"), "--output", str(tmp_path / "calibrated")])
    assert again.exit_code == 2 and "not empty" in again.output
    assert 0.1234 not in [row["threshold"] for row in report["reliability"]]
    # a calibrated pipeline's own threshold gets a row of the curve: what it keeps as it is
    loaded_nlp = spacy.load(tmp_path / "calibrated")
    loaded_nlp.get_pipe("sapbert_linker").threshold = 0.1234
    loaded_nlp.to_disk(tmp_path / "calibrated-low")
    third = CliRunner().invoke(app, ["calibrate", str(corpus), "--pipeline", str(tmp_path / "calibrated-low"),
                                     "--min-precision", "0.5", "--report", str(tmp_path / "r3.json")])
    assert third.exit_code == 0, third.output
    assert 0.1234 in [row["threshold"] for row in json.loads((tmp_path / "r3.json").read_text())["reliability"]]
    # and a label's own threshold, what that label's spans keep at it
    loaded_nlp.get_pipe("sapbert_linker").label_thresholds = {"CHEMICAL": 0.99}
    loaded_nlp.to_disk(tmp_path / "calibrated-chem")
    fourth = CliRunner().invoke(app, ["calibrate", str(corpus), "--pipeline", str(tmp_path / "calibrated-chem"),
                                      "--min-precision", "0.5", "--report", str(tmp_path / "r4.json")])
    assert fourth.exit_code == 0, fourth.output
    by_label = json.loads((tmp_path / "r4.json").read_text())["by_label"]
    assert by_label["CHEMICAL"]["at_own_threshold"]["threshold"] == 0.99
    assert by_label["CHEMICAL"]["at_own_threshold"]["coverage"] <= by_label["CHEMICAL"]["coverage"]
    assert "at_own_threshold" not in by_label["DISEASE"]


def test_sapbert_calibrate_report_is_new_unless_overwrite_and_never_the_corpus(tiny_bert, tmp_path):
    from tests.output_guard import assert_output_guarded

    make_nlp(tiny_bert, write_small_kb(tmp_path), ruler=False).to_disk(tmp_path / "pipeline")
    corpus = write_gold_corpus(tmp_path)
    report = tmp_path / "r.json"
    assert_output_guarded(lambda path: ["calibrate", str(corpus), "--pipeline", str(tmp_path / "pipeline"),
                                        "--min-precision", "0.5", "--report", str(path)],
                          report, reads=[corpus], option="--report")
    assert json.loads(report.read_text(encoding="utf-8"))["spans"] == 8
