"""BioSyn-format evaluation scored as SapBERT's evaluation/utils.py: composite queries, CUI
intersection, cosine vs raw inner product (a toy encoder whose vectors are set by hand)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_sapbert.errors import InputError
from spacy_sapbert.training.evaluation import biosyn

VECTORS = {  # name → pooled vector; "big" has a large norm, so it wins by inner product only
    "heart attack": [1.0, 0.0], "myocardial infarction": [0.9, 0.1], "big": [5.0, 5.0],
    "renal failure": [0.0, 1.0], "kidney failure": [0.1, 0.9], "stroke": [-1.0, 0.2],
}


class HandMadeEncoder:
    def encode(self, texts, batch_size=None, show_progress=False, normalize=True):
        rows = np.array([VECTORS[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True) if normalize else rows


def write_data(tmp_path):
    folder = tmp_path / "processed_test"
    folder.mkdir()
    (folder / "1.concept").write_text("1||0|12||Disease||heart attack||D1\n"
                                      "1||20|33||Disease||renal failure|stroke||D2|D3\n", encoding="utf-8")
    (folder / "2.concept").write_text("2||0|12||Disease||kidney failure||D2+D9\n", encoding="utf-8")
    dictionary = tmp_path / "dict.txt"
    dictionary.write_text("D1||myocardial infarction\nD9|D2||renal failure\nD4||big\nD3||stroke\n",
                          encoding="utf-8")
    return folder, dictionary


def test_scoring_as_sapbert_does(tmp_path):
    folder, dictionary = write_data(tmp_path)
    queries = biosyn.read_queries(folder)
    assert [(q.mention, q.cui) for q in queries] == [("heart attack", "D1"), ("renal failure|stroke", "D2|D3"),
                                                     ("kidney failure", "D2+D9")]
    names, cuis = biosyn.read_dictionary(dictionary)
    assert cuis == ["D1", "D9|D2", "D4", "D3"]
    result = biosyn.score(HandMadeEncoder(), queries, names, cuis, k=2)
    # cosine: every sub-mention's nearest name is right (composite: both parts; "D9|D2" meets "D2+D9")
    assert result["cosine"] == {"acc@1": 100.0, "acc@2": 100.0}
    # inner product: "big" comes first for the queries with positive coordinates, second place still finds them,
    # except "stroke" (negative x) whose best is itself
    assert result["dot"] == {"acc@1": 0.0, "acc@2": 100.0}


def test_bad_lines_name_file_and_line(tmp_path):
    folder = tmp_path / "q"
    folder.mkdir()
    (folder / "1.concept").write_text("1||0|3||Disease||abc||D1\n1||only three||D2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"1.concept:2: expected 5 '\|\|'-separated fields"):
        biosyn.read_queries(folder)
    with pytest.raises(InputError, match="no \\*.concept files"):
        biosyn.read_queries(tmp_path / "q" / "..")
    (tmp_path / "d.txt").write_text("D1||a\nno separator\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"d.txt:2: expected 'CUI\|\|name'"):
        biosyn.read_dictionary(tmp_path / "d.txt")


def test_command_prints_both_scorings(tmp_path, tiny_bert):
    from spacy_sapbert.cli import app
    from spacy_sapbert.training.cli import register

    register(app)
    folder, dictionary = write_data(tmp_path)
    result = CliRunner().invoke(app, ["evaluate-biosyn", str(folder), "--dictionary", str(dictionary),
                                      "--model", str(tiny_bert), "--top", "2"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output[result.output.index('{"queries"'):].splitlines()[0])  # after the progress bar
    assert record["n_queries"] == 3 and record["names"] == 4
    from spacy_sapbert.encoder import Encoder

    direct = biosyn.score(Encoder(str(tiny_bert), dtype="float32"), biosyn.read_queries(folder),
                          *biosyn.read_dictionary(dictionary), k=2)
    assert {"cosine": record["cosine"], "dot": record["dot"]} == direct  # the command reports what score() computes
