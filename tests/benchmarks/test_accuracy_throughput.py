"""benchmarks/accuracy_throughput.py on a one-abstract BioSyn dataset with the tiny random BERT as bi-encoder and
a tiny random re-ranker: every system is there with plausible numbers, the adaptive re-ranker goes from the dense
linker (max gap 0) to the always-on re-ranker (a huge max gap), and a missing re-ranker folder is an error naming
it."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Dict

import pytest
import torch

from tests.benchmarks import load_script

SYSTEMS = ["scispacy", "dense", "hybrid", "rerank-always", "rerank-adaptive"]
# the dictionary of tests/training/evaluation/test_evaluate.py's scispaCy test: every character 3-gram occurs in >= 10 names, so
# scispaCy's min_df=10 keeps them all; one concept has two |-joined IDs
STEMS = "breast ovarian renal hepatic cardiac gastric colonic pulmonary cerebral spinal dermal retinal".split()
ENDS = "cancer failure disease tumour syndrome infection injury fibrosis atrophy necrosis lesion cyst".split()
NAMES = [f"{a} {b}" for a in STEMS for b in ENDS]
CUIS = [f"C{i:03d}" + ("|OMIM:9" if name == "cardiac tumour" else "") for i, name in enumerate(NAMES)]
TITLE = "Breast and ovarian cancer in one family."
ABSTRACT = "Renal failure and a gastric cyst came with a cardiac tumour, hepatic fibrosis and zebra stripes."
QUERIES = [  # (span text in title + " " + abstract, BioSyn mention, CUIs): all but the last are dictionary names
    ("Breast and ovarian cancer", "breast cancer|ovarian cancer", "C000|C012"), ("Renal failure", "renal failure",
    "C025"), ("gastric cyst", "gastric cyst", "C071"), ("cardiac tumour", "cardiac tumour", "OMIM:9"),
    ("hepatic fibrosis", "hepatic fibrosis", "C043"), ("zebra stripes", "zebra stripes", "D999")]
RIGHT = round(100 * 5 / 6, 2)


def write_biosyn(root: Path) -> Path:
    """processed_test/1.concept, test/1.txt (title, blank line, abstract) and test_dictionary.txt."""
    (root / "processed_test").mkdir(parents=True)
    (root / "test").mkdir()
    (root / "test" / "1.txt").write_text(f"{TITLE}\n\n{ABSTRACT}\n", encoding="utf-8")
    joined, lines = f"{TITLE} {ABSTRACT}", []
    for span, mention, cui in QUERIES:
        start = joined.index(span)
        lines.append(f"1||{start}|{start + len(span)}||Disease||{mention}||{cui}")
    (root / "processed_test" / "1.concept").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "test_dictionary.txt").write_text("".join(f"{c}||{n}\n" for c, n in zip(CUIS, NAMES)), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def script() -> Any:
    return load_script("accuracy_throughput")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return write_biosyn(tmp_path_factory.mktemp("biosyn") / "toy")


@pytest.fixture(scope="module")
def reranker_folder(tiny_bert, tmp_path_factory) -> Path:
    """A random cross-encoder whose scores outweigh the cosines (so that re-ranking changes answers), with a
    first-stage weight (so that the cosines must be handed over) and no margin."""
    from spacy_sapbert.linking.rerank.model import Reranker
    from spacy_sapbert.linking.rerank.settings import RerankerSettings
    from spacy_sapbert.training.rerank.model import load_cross_encoder

    torch.manual_seed(0)
    model, config, tokenizer = load_cross_encoder(str(tiny_bert), 0.0)
    with torch.no_grad():
        model.classifier.weight.mul_(200.0)
    folder = tmp_path_factory.mktemp("rerank") / "model"
    settings = RerankerSettings(k=4, margin=0.0, first_stage_weight=0.5, max_length=48, max_candidate_length=16)
    Reranker(model, settings, config, tokenizer).save(folder, weights_dtype="float32")
    return folder


def run(script: Any, dataset: Path, tiny_bert: Path, tmp_path: Path, *extra: str) -> Dict[str, Any]:
    output = tmp_path / "result.json"
    returned = script.main(["--queries", str(dataset / "processed_test"), "--dictionary",
                            str(dataset / "test_dictionary.txt"), "--model", str(tiny_bert), "--device", "cpu",
                            "--output", str(output), *extra])
    written = json.loads(output.read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(returned))
    return {s["system"]: s for s in written["systems"]} | {"": written}


def test_every_system_and_the_adaptive_extremes(script, dataset, tiny_bert, reranker_folder, tmp_path, capsys):
    none = run(script, dataset, tiny_bert, tmp_path, "--reranker", str(reranker_folder), "--max-gap", "0")
    record = none[""]
    assert [s["system"] for s in record["systems"]] == SYSTEMS
    assert record["n_queries"] == 6 and record["sub_mentions"] == 7 and record["names"] == 144
    assert record["machine"]["cpus"] >= 1 and record["machine"]["torch_threads"] >= 1 and record["date"]
    assert "--max-gap 0" in record["command"] and set(record["indexing"]) >= {"encode_names_s", "scispacy_index_s"}
    for system in SYSTEMS:
        row = none[system]
        assert 0 <= row["acc@1"] <= row["acc@5"] <= 100 and row["seconds"] > 0 and row["mentions_per_s"] > 0
        assert row["x_scispacy"] == pytest.approx(row["mentions_per_s"] / none["scispacy"]["mentions_per_s"], abs=0.01)
    # dictionary names are found by their 3-grams and by identical vectors (the composite's two parts, and the
    # name of "C0xx|OMIM:9" for gold OMIM:9); the gold of "zebra stripes" is not in the dictionary
    assert none["scispacy"]["acc@1"] == none["dense"]["acc@1"] == none["hybrid"]["acc@1"] == RIGHT
    assert none["dense"]["acc@5"] == none["hybrid"]["acc@5"] == RIGHT
    always, adaptive = none["rerank-always"], none["rerank-adaptive"]
    assert always["reranked"] == 7 and always["reranked_share"] == 1.0 and always["k"] == 4
    assert always["acc@1"] < RIGHT, "the test needs a re-ranker that changes answers"
    assert adaptive["reranked"] == 0 and adaptive["reranked_share"] == 0.0 and adaptive["acc@1"] == RIGHT
    for row in (always, adaptive):  # re-ordering keeps the k candidates
        assert row["acc@5"] == row["first_stage_acc_at_k"] == RIGHT
    table = capsys.readouterr().out
    assert "| dense + re-ranker, adaptive (gap < 0) |" in table and "| 0.0% |" in table and "| 100.0% |" in table

    every = run(script, dataset, tiny_bert, tmp_path, "--reranker", str(reranker_folder), "--max-gap", "1e9")
    assert every["rerank-adaptive"]["reranked"] == every["rerank-always"]["reranked"] == 7
    for key in ("acc@1", "acc@5"):
        assert every["rerank-adaptive"][key] == every["rerank-always"][key] == always[key]


def test_without_a_reranker_its_systems_are_skipped(script, dataset, tiny_bert, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="benchmark"):
        result = run(script, dataset, tiny_bert, tmp_path, "--limit", "2")
    assert [s["system"] for s in result[""]["systems"]] == SYSTEMS[:3] and result[""]["sub_mentions"] == 3
    assert "re-ranker systems are skipped" in caplog.text


def test_a_missing_reranker_folder_is_an_error_naming_it(script, dataset, tiny_bert, tmp_path, capsys):
    missing = tmp_path / "no-such-reranker"
    with pytest.raises(SystemExit) as exit_info:
        run(script, dataset, tiny_bert, tmp_path, "--reranker", str(missing))
    assert exit_info.value.code == 2
    assert f"{missing}: re-ranker folder not found" in capsys.readouterr().err
    assert not (tmp_path / "result.json").exists()
