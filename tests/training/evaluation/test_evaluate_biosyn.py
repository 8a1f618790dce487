"""BioSyn-format evaluation scored as SapBERT's evaluation/utils.py: composite queries, CUI
intersection, cosine vs raw inner product (a toy encoder whose vectors are set by hand); the hybrid
first stage (dense + w · character n-gram TF-IDF over the union of both top-k)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_sapbert.formats import biosyn as biosyn_format
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
    queries = biosyn_format.read_queries(folder)
    assert [(q.mention, q.cui) for q in queries] == [("heart attack", "D1"), ("renal failure|stroke", "D2|D3"),
                                                     ("kidney failure", "D2+D9")]
    names, cuis = biosyn_format.read_dictionary(dictionary)
    assert cuis == ["D1", "D9|D2", "D4", "D3"]
    result = biosyn.score(HandMadeEncoder(), queries, names, cuis, k=2)
    # cosine: every sub-mention's nearest name is right (composite: both parts; "D9|D2" meets "D2+D9")
    assert result["cosine"] == {"acc@1": 100.0, "acc@2": 100.0}
    # inner product: "big" comes first for the queries with positive coordinates, second place still finds them,
    # except "stroke" (negative x) whose best is itself
    assert result["dot"] == {"acc@1": 0.0, "acc@2": 100.0}
    assert result["cosine_recall"] == {"recall@1": 100.0, "recall@5": 100.0, "recall@10": 100.0, "recall@20": 100.0}
    assert result["exact_name_ceiling"] == {"queries": 0, "acc@1": 100.0}


def test_query_fields_and_id_rules(tmp_path):
    folder, _ = write_data(tmp_path)
    composite = biosyn_format.read_queries(folder)[1]
    assert (composite.document, biosyn_format.query_span(composite)) == ("1", (20, 33))
    assert composite.where.endswith("1.concept:2") and composite.file_and_line[1] == 2
    # the scoring splits as SapBERT's code does, as written; id_list is for readers of the IDs
    assert biosyn_format.split_mention("a b |c+ d") == ["a b ", "c", " d"]
    assert biosyn_format.gold_ids("D2+D9") == {"D2", "D9"} and biosyn_format.gold_ids("D2| D9") == {"D2", " D9"}
    assert biosyn_format.id_list("D2+D9| D7") == ["D2", "D9", "D7"]
    # a dictionary entry splits on "|" only (whether it is right: tests/kb/test_ids_matching.py)
    assert biosyn_format.dictionary_ids("D2+D9|D7") == {"D2+D9", "D7"}
    (folder / "3.concept").write_text("3||12-20||Disease||x||D1\n", encoding="utf-8")
    odd = biosyn_format.read_queries(folder)[-1]  # SapBERT never reads the span: scoring takes it as it is
    with pytest.raises(InputError, match=r"3.concept:1: field 'span': span '12-20' is not start\|end"):
        biosyn_format.query_span(odd)


def test_exact_name_ceiling_counts_queries_a_verbatim_wrong_name_decides():
    # "dm" is a name of D2 only (gold D1): cosine puts it first whatever the encoder; "ms" is a name of
    # both concepts (a tie, not a certain loss); a composite is lost when any part is
    parts = [["dm"], ["ms"], ["heart attack", "dm"], ["myocardial infarction"]]
    gold = [{"D1"}, {"D1"}, {"D3", "D1"}, {"D3", "D1"}, {"D3"}]  # per sub-mention, as score_vectors makes them
    names = ["dm", "ms", "ms", "myocardial infarction"]
    cui_sets = [frozenset({"D2"}), frozenset({"D2"}), frozenset({"D1"}), frozenset({"D3"})]
    assert biosyn.exact_name_ceiling(parts, gold, names, cui_sets) == {"queries": 2, "acc@1": 50.0}


def test_bad_lines_name_file_and_line(tmp_path):
    folder = tmp_path / "q"
    folder.mkdir()
    (folder / "1.concept").write_text("1||0|3||Disease||abc||D1\n1||only three||D2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"1.concept:2: expected 5 '\|\|'-separated fields"):
        biosyn_format.read_queries(folder)
    with pytest.raises(InputError, match="no \\*.concept files"):
        biosyn_format.read_queries(tmp_path / "q" / "..")
    (tmp_path / "d.txt").write_text("D1||a\nno separator\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"d.txt:2: expected 'IDs\|\|names'"):
        biosyn_format.read_dictionary(tmp_path / "d.txt")


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
    from spacy_sapbert.encoding.encoder import Encoder

    direct = biosyn.score(Encoder(str(tiny_bert), dtype="float32"), biosyn_format.read_queries(folder),
                          *biosyn_format.read_dictionary(dictionary), k=2)
    assert set(direct) == {"cosine", "dot", "cosine_recall", "exact_name_ceiling"} and "hybrid" not in record
    assert {key: record[key] for key in direct} == direct  # the command reports what score() computes


def test_command_output_is_new_unless_overwrite_and_never_an_input(tmp_path, tiny_bert):
    from tests.output_guard import assert_output_guarded

    folder, dictionary = write_data(tmp_path)
    output = tmp_path / "result.json"
    assert_output_guarded(lambda path: ["evaluate-biosyn", str(folder), "--dictionary", str(dictionary), "--model",
                                        str(tiny_bert), "--top", "2", "-o", str(path)], output, reads=[dictionary])
    assert json.loads(output.read_text(encoding="utf-8"))["n_queries"] == 3


# -- hybrid first stage -------------------------------------------------------------------------------

TYPO_VECTORS = {  # the dense model puts the typo next to the wrong names; the right one is far
    "myocardial infarction": [0.3, 0.95], "myocarditis": [1.0, 0.05], "cardiomyopathy": [1.0, 0.1],
    "myocardail infarction": [1.0, 0.0], "renal failure": [-1.0, 0.0], "kidney failure": [-1.0, 0.1],
}


class TypoEncoder:
    def encode(self, texts, batch_size=None, show_progress=False, normalize=False):
        return np.array([TYPO_VECTORS[t] for t in texts], dtype=np.float32)


def typo_case():
    queries = [biosyn_format.BiosynQuery("myocardail infarction", "D1", "q:1"),
               biosyn_format.BiosynQuery("kidney failure", "D2", "q:2")]
    names = ["myocardial infarction", "myocarditis", "cardiomyopathy", "renal failure"]
    return queries, names, ["D1", "D5", "D6", "D2"]


def test_typo_missed_by_dense_is_fixed_by_sparse():
    queries, names, cuis = typo_case()
    result = biosyn.score(TypoEncoder(), queries, names, cuis, scorings=["cosine"], k=2, sparse_weights=[0.0, 3.0],
                          candidates=2)
    assert result["cosine"] == {"acc@1": 50.0, "acc@2": 50.0}  # the right name is third by cosine
    assert result["cosine_recall"]["recall@5"] == 100.0
    dense_only, hybrid = result["hybrid"]
    assert dense_only["sparse_weight"] == 0.0 and dense_only["acc@1"] == 50.0 and dense_only["acc@2"] == 50.0
    assert dense_only["recall@union"] == 100.0  # the sparse top-2 brought it in; w=0 still ranks it last
    assert hybrid["sparse"] == "char:1-2" and hybrid["candidates"] == 2
    assert hybrid["acc@1"] == 100.0 and hybrid["recall@1"] == 100.0
    assert biosyn.best_hybrid(result["hybrid"]) is hybrid


def test_hybrid_with_weight_zero_equals_dense():
    rng = np.random.default_rng(0)
    words = ["heart", "renal", "kidney", "failure", "cancer", "breast", "acid", "tumor", "syndrome", "attack"]
    names = list(dict.fromkeys(" ".join(rng.choice(words, size=rng.integers(1, 4))) for _ in range(400)))
    cuis = [f"D{rng.integers(0, 40)}" for _ in names]
    queries = [biosyn_format.BiosynQuery(" ".join(rng.choice(words, size=2)) + ("|" + str(rng.choice(words)) if i % 7 == 0
                                                                          else ""), f"D{rng.integers(0, 40)}", "")
               for i in range(300)]
    flat = [p for parts in biosyn_format.sub_mentions(queries) for p in parts]
    raw_names = rng.normal(size=(len(names), 16)).astype(np.float32)
    raw_queries = rng.normal(size=(len(flat), 16)).astype(np.float32)
    schemes = [biosyn.CharNgramSettings(), biosyn.CharNgramSettings("char_wb", (3, 3))]
    result = biosyn.score_vectors(queries, names, cuis, raw_queries, raw_names, ["cosine"], 5, [0.0, 0.3], schemes)
    zero = [e for e in result["hybrid"] if e["sparse_weight"] == 0.0]
    assert len(zero) == 2 and len(result["hybrid"]) == 4
    for entry in zero:
        assert {key: entry[key] for key in result["cosine"]} == result["cosine"]
        assert {key: entry[key] for key in result["cosine_recall"]} == result["cosine_recall"]
        assert entry["recall@union"] >= entry["recall@20"]
    assert 0 < result["cosine"]["acc@5"] < 100  # not a degenerate case
    assert any(e["acc@1"] != result["cosine"]["acc@1"] for e in result["hybrid"] if e["sparse_weight"] > 0)


def test_best_hybrid_prefers_acc1_then_acc5_then_the_smaller_weight():
    entries = [{"sparse": "char:1-2", "sparse_weight": w, "acc@1": a1, "acc@5": a5}
               for w, a1, a5 in [(0.0, 80.0, 90.0), (0.5, 81.0, 90.0), (1.0, 81.0, 91.0), (2.0, 81.0, 91.0)]]
    assert biosyn.best_hybrid(entries)["sparse_weight"] == 1.0
    with pytest.raises(InputError, match="no hybrid results"):
        biosyn.best_hybrid([])


def test_command_hybrid_and_tuning(tmp_path, tiny_bert):
    from spacy_sapbert.cli import app
    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.training.cli import register

    register(app)
    folder, dictionary = write_data(tmp_path)
    base = ["evaluate-biosyn", str(folder), "--dictionary", str(dictionary), "--model", str(tiny_bert), "--top", "2",
            "--scoring", "cosine"]
    result = CliRunner().invoke(app, base + ["--sparse-weight", "0,0.5", "--sparse-weight", "1",
                                             "--sparse-scheme", "char_wb:3-3", "--candidates", "3"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output[result.output.index('{"queries"'):].splitlines()[0])
    assert [(e["sparse"], e["sparse_weight"]) for e in record["hybrid"]] == [("char_wb:3-3", w) for w in (0, 0.5, 1)]
    direct = biosyn.score(Encoder(str(tiny_bert), dtype="float32"), biosyn_format.read_queries(folder),
                          *biosyn_format.read_dictionary(dictionary), scorings=["cosine"], k=2, sparse_weights=[0, 0.5, 1],
                          sparse_schemes=[biosyn.CharNgramSettings("char_wb", (3, 3))], candidates=3)
    assert record["hybrid"] == direct["hybrid"]

    result = CliRunner().invoke(app, base + ["--tune-on", str(folder), "--tune-dictionary", str(dictionary),
                                             "--sparse-scheme", "char:1-2,char_wb:3-3"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output[result.output.index('{"queries"'):].splitlines()[0])
    tuning = record["tuning"]
    assert len(tuning["hybrid"]) == 2 * len(biosyn.DEFAULT_WEIGHTS)
    chosen = biosyn.best_hybrid(tuning["hybrid"])
    picked = (tuning["sparse"], tuning["sparse_weight"])
    assert picked == (chosen["sparse"], chosen["sparse_weight"])
    assert [(e["sparse"], e["sparse_weight"]) for e in record["hybrid"]] == [picked]  # only the choice, here

    for extra, message in [(["--tune-on", str(folder)], "--tune-on and --tune-dictionary go together"),
                           (["--sparse-scheme", "char:1-2"], "needs --sparse-weight"),
                           (["--sparse-weight", "-1"], "finite and >= 0"),
                           (["--sparse-weight", "x"], "sparse weights are numbers"),
                           (["--sparse-weight", "1", "--sparse-scheme", "word:1-1"], "unknown analyzer")]:
        result = CliRunner().invoke(app, base + extra)
        assert result.exit_code == 2 and message in result.output, (extra, result.output)
