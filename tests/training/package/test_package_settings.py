"""`sapbert package-settings`: linker settings chosen on dev set in a packaged default's config, report and card;
every part copied byte for byte."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

from spacy_sapbert.default import DEFAULT_PIPELINE
from tests.output_guard import sapbert_app


def _digests(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_settings_are_set_recorded_and_the_parts_kept(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(sapbert_app(), [
        "package-settings", "--pipeline", DEFAULT_PIPELINE, "-o", str(out), "--set", "head_fallback=null",
        "--set", 'label_thresholds={"CHEMICAL": 0.85, "DISEASE": 0.7}', "--label-reason", "DISEASE=a test's choice"])
    assert result.exit_code == 0, result.output
    linker = spacy.load(out).get_pipe("sapbert_linker")
    assert linker.head_fallback is None and linker.label_thresholds == {"CHEMICAL": 0.85, "DISEASE": 0.7}
    assert linker.split_composites is True  # not asked: the default's, kept
    report = json.loads((out / "build.json").read_text(encoding="utf-8"))
    # the settings given, over those an earlier run recorded (the default's split_composites, skip_newer_mesh)
    assert report["linker_settings"] == {"split_composites": True, "head_fallback": None, "skip_newer_mesh": ["Disease"],
                                         "label_thresholds": {"CHEMICAL": 0.85, "DISEASE": 0.7}}
    labels = report["default_threshold"]["labels"]
    assert labels["DISEASE"] == {"value": 0.7, "chosen_for": "a test's choice"}
    assert labels["CHEMICAL"] == {"value": 0.85, "chosen_for": "the best CHEMICAL document F1 there"}  # the earlier reason
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "0.7 for DISEASE spans (`label_thresholds`, a test's choice)" in card and "`head_fallback`" not in card
    assert "`skip_newer_mesh`" in card
    default = Path(DEFAULT_PIPELINE)
    for part in ("sapbert_ner", "dictionary_entities", "sapbert_linker"):
        assert _digests(out / part) == _digests(default / part), part
    # again on its own output, no threshold asked: the thresholds' record stays as it was
    again = CliRunner().invoke(sapbert_app(), ["package-settings", "--pipeline", str(out), "-o", str(out),
                                               "--set", "split_composites=false"])
    assert again.exit_code == 0, again.output
    after = json.loads((out / "build.json").read_text(encoding="utf-8"))
    assert after["default_threshold"] == report["default_threshold"]
    assert after["linker_settings"]["split_composites"] is False
    assert spacy.load(out).get_pipe("sapbert_linker").split_composites is False


@pytest.mark.parametrize("args, message", [
    (["--set", "head_fallback"], "expected KEY=VALUE"),
    (["--set", "head_fallback=[DISEASE]"], "is not JSON"),
    (["--set", 'head_fallback="DISEASE"'], "setting 'head_fallback': expected null or a list of span labels"),
    (["--set", "encode_batch_size=8"], "encode_batch_size cannot change once"),
    (["--set", "threshold=0.7", "--label-reason", "GENE=why"], "GENE, which has no label threshold"),
])
def test_bad_settings_are_refused_by_name_and_nothing_is_written(tmp_path, args, message):
    out = tmp_path / "out"
    result = CliRunner().invoke(sapbert_app(), ["package-settings", "--pipeline", DEFAULT_PIPELINE, "-o", str(out),
                                                *args])
    assert result.exit_code != 0 and message in result.output, result.output
    assert not out.exists()


CARD_SENTENCES = [("head_fallback", ["DISEASE"], "A DISEASE span of several words"),
                  ("skip_newer_mesh", ["Disease"], "skips the Disease concepts")]
"""Each linker setting the card tells of from the config, the embedded default's value, a phrase of its sentence."""


@pytest.mark.parametrize("setting, value, phrase", CARD_SENTENCES)
def test_the_model_card_says_each_config_setting_from_the_pipelines_value(setting, value, phrase):
    from spacy_sapbert.training.package.card import config_sentence

    assert config_sentence(setting, None) == config_sentence(setting, []) == ""
    sentence = config_sentence(setting, value)
    assert phrase in sentence and f"`{setting}`" in sentence
    assert sentence in (Path(DEFAULT_PIPELINE) / "README.md").read_text(encoding="utf-8")


def test_every_setting_of_the_cards_table_is_checked():
    from spacy_sapbert.training.package.card import CONFIG_SENTENCES

    assert {setting for setting, _, _ in CARD_SENTENCES} == set(CONFIG_SENTENCES)
