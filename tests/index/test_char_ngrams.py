"""The character n-gram TF-IDF index (BioSyn's sparse scores): exact search, pair scores, and saving
without pickle that gives the very same scores back and refuses other names."""
from __future__ import annotations

import json

import numpy as np
import pytest

from spacy_sapbert.index.char_ngrams import FILES, CharNgramIndex, CharNgramSettings, names_fingerprint
from spacy_sapbert.errors import InputError

NAMES = ["myocardial infarction", "myocarditis", "renal failure", "kidney failure", "stroke", "sthag6",
         "tooth agenesis selective 6", "breast cancer", "breast neoplasm", "heart attack"]
QUERIES = ["myocardail infarction", "sthag", "kidny failure", "brest cancer", "zzz", ""]
SCHEMES = [CharNgramSettings(), CharNgramSettings("char_wb", (2, 3)), CharNgramSettings("char_wb", (3, 3))]


def brute_force(index: CharNgramIndex, queries):
    """Every query-name cosine, from the TF-IDF matrices densified."""
    return index.vectors(queries).toarray() @ index.matrix.toarray().T


@pytest.mark.parametrize("settings", SCHEMES, ids=lambda s: s.label())
def test_search_is_exact_best_first(settings):
    index = CharNgramIndex.fit(NAMES, settings)
    scores, rows = index.search(QUERIES, 3, chunk=2)  # chunks smaller than the queries
    full = brute_force(index, QUERIES)
    assert rows.shape == scores.shape == (len(QUERIES), 3)
    for i in range(len(QUERIES)):
        expected = sorted(range(len(NAMES)), key=lambda r: (-round(float(full[i, r]), 5), r))[:3]
        assert np.allclose(scores[i], full[i, expected], atol=1e-6)
        assert np.allclose(full[i, rows[i]], full[i, expected], atol=1e-6)  # same scores (ties may swap rows)
    assert NAMES[rows[0, 0]] == "myocardial infarction" and NAMES[rows[1, 0]] == "sthag6"
    assert NAMES[rows[2, 0]] == "kidney failure" and NAMES[rows[3, 0]] == "breast cancer"
    assert np.all(scores[5] == 0.0)  # an empty query matches nothing


def test_search_keeps_to_the_names_and_ties_go_to_the_lower_row():
    index = CharNgramIndex.fit(["ab", "ba", "ab"])
    scores, rows = index.search(["ab", "xy"], 10)
    assert rows.shape == (2, 3)
    assert rows[0].tolist() == [0, 2, 1] and scores[0, 0] == pytest.approx(1.0)
    assert rows[1].tolist() == [0, 1, 2] and np.all(scores[1] == 0.0)
    with pytest.raises(InputError, match="k must be positive"):
        index.search(["ab"], 0)


def test_score_pairs_matches_search_and_pads_with_zero():
    index = CharNgramIndex.fit(NAMES)
    scores, rows = index.search(QUERIES, 4)
    assert np.allclose(index.score_pairs(QUERIES, rows), scores, atol=1e-6)
    padded = np.array([[0, -1], [5, -1], [3, 2], [-1, -1], [0, 1], [2, 2]])
    pairs = index.score_pairs(QUERIES, padded)
    assert np.allclose(pairs, np.where(padded >= 0, np.take_along_axis(brute_force(index, QUERIES),
                                                                       np.maximum(padded, 0), axis=1), 0.0), atol=1e-6)
    with pytest.raises(InputError, match="out of range"):
        index.score_pairs(["a"], np.array([[len(NAMES)]]))
    with pytest.raises(InputError, match="shape"):
        index.score_pairs(["a", "b"], np.array([[0]]))


@pytest.mark.parametrize("settings", SCHEMES, ids=lambda s: s.label())
def test_save_load_round_trip_gives_identical_scores(tmp_path, settings):
    index = CharNgramIndex.fit(NAMES, settings)
    index.save(tmp_path / "sparse")
    assert sorted(p.name for p in (tmp_path / "sparse").iterdir()) == sorted(FILES)
    record = json.loads((tmp_path / "sparse" / "char_ngrams.json").read_text())
    assert record["format_version"] == 1 and record["analyzer"] == settings.analyzer
    assert record["ngram_range"] == list(settings.ngram_range)
    assert record["names_fingerprint"] == names_fingerprint(NAMES)
    np.load(tmp_path / "sparse" / "char_ngrams_idf.npy", allow_pickle=False)  # a plain array, no pickle
    loaded = CharNgramIndex.load(tmp_path / "sparse", list(NAMES))
    assert loaded.settings == settings
    assert (loaded.matrix != index.matrix).nnz == 0
    for got, expected in zip(loaded.search(QUERIES, 5), index.search(QUERIES, 5)):
        assert np.array_equal(got, expected)
    rows = index.search(QUERIES, 5)[1]
    assert np.array_equal(loaded.score_pairs(QUERIES, rows), index.score_pairs(QUERIES, rows))


def test_load_against_other_names_refuses(tmp_path):
    CharNgramIndex.fit(NAMES).save(tmp_path)
    for other in (NAMES[:-1], NAMES[::-1], NAMES[:-1] + ["heart attacks"]):
        with pytest.raises(InputError, match="char_ngrams.json: field 'names_fingerprint'.*refit") as err:
            CharNgramIndex.load(tmp_path, other)
        assert err.value.field == "names_fingerprint"


def test_load_refuses_damaged_folders(tmp_path):
    CharNgramIndex.fit(NAMES).save(tmp_path)
    settings = tmp_path / "char_ngrams.json"
    record = json.loads(settings.read_text())
    settings.write_text(json.dumps({**record, "format_version": 99}))
    with pytest.raises(InputError, match="format_version"):
        CharNgramIndex.load(tmp_path, NAMES)
    settings.write_text(json.dumps(record))
    np.save(tmp_path / "char_ngrams_idf.npy", np.ones(3, dtype=np.float32))
    with pytest.raises(InputError, match=r"char_ngrams_idf.npy: expected \d+ finite idf weights"):
        CharNgramIndex.load(tmp_path, NAMES)
    (tmp_path / "char_ngrams_vocabulary.json").unlink()
    with pytest.raises(InputError, match="missing char_ngrams_vocabulary.json"):
        CharNgramIndex.load(tmp_path, NAMES)


def test_settings_are_checked_and_parsed():
    assert CharNgramSettings.parse("char_wb:3-3") == CharNgramSettings("char_wb", (3, 3))
    assert CharNgramSettings.parse("char:1-2").label() == "char:1-2"
    for bad in ("word:1-2", "char:2-1", "char:x", "char:0-2"):
        with pytest.raises(InputError):
            CharNgramSettings.parse(bad)
    with pytest.raises(InputError, match="no names"):
        CharNgramIndex.fit([])
    with pytest.raises(InputError, match="no character n-grams"):
        CharNgramIndex.fit(["", ""])
