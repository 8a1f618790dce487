"""Linker without spaCy: aggregation by concept, threshold, dedupe, LRU cache, bad mentions."""
from __future__ import annotations

import numpy as np
import pytest

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import IndexMismatchError, NameIndex
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.linking.linker import Linker
from spacy_sapbert.linking.settings import LinkerSettings

from tests.linker_fixtures import small_kb


class CountingEncoder:
    """Wraps an Encoder and records what it was asked to encode."""

    def __init__(self, encoder: Encoder) -> None:
        self._encoder = encoder
        self.calls = []

    def encode(self, texts, batch_size=None, show_progress=False):
        self.calls.append(list(texts))
        return self._encoder.encode(texts, batch_size=batch_size, show_progress=show_progress)

    def __getattr__(self, name):
        return getattr(self._encoder, name)


@pytest.fixture(scope="module")
def encoder(tiny_bert) -> Encoder:
    return Encoder(tiny_bert, pooling="mean", device="cpu")  # a random BERT's [CLS] vectors are all alike


@pytest.fixture(scope="module")
def index(encoder) -> NameIndex:
    return NameIndex.build(small_kb(), encoder, show_progress=False)


@pytest.fixture
def counting(encoder) -> CountingEncoder:
    return CountingEncoder(encoder)


def make(counting, index, **kwargs) -> Linker:
    return Linker(counting, small_kb(), index, **kwargs)


def test_links_are_concepts_best_first_one_entry_per_concept(counting, index):
    linker = make(counting, index, k=len(index), max_entities_per_mention=100)
    (result,) = linker.link(["Heart attack!"])  # normalises to an exact KB name
    assert result[0][0] == "D009203" and result[0][1] == pytest.approx(1.0, abs=1e-5)
    concepts = [cid for cid, _ in result]
    assert len(concepts) == len(set(concepts)) == len(small_kb())  # every concept once, at its best name
    assert all(a[1] >= b[1] for a, b in zip(result, result[1:]))
    assert all(isinstance(cid, str) and isinstance(score, float) for cid, score in result)
    (shared,) = linker.link(["MS"])
    assert {cid for cid, _ in shared[:2]} == {"D009103", "D009081"}


def test_max_entities_and_threshold(counting, index):
    five = make(counting, index, max_entities_per_mention=2).link(["renal failure"])[0]
    assert len(five) == 2 and five[0][0] == "D051437"
    strict = make(counting, index, threshold=0.999).link(["renal failure", "zzzz qqq"])
    assert [cid for cid, _ in strict[0]] == ["D051437"]
    assert all(score >= 0.999 for _, score in strict[1])
    everything = make(counting, index, threshold=-1.0, k=len(index), max_entities_per_mention=50).link(["renal"])[0]
    assert len(everything) == len(small_kb())
    with pytest.raises(InputError, match="max_entities_per_mention"):
        make(counting, index, max_entities_per_mention=0)
    with pytest.raises(InputError, match="Linker setting 'k': expected an integer ≥ 1, got 0"):
        make(counting, index, k=0)
    with pytest.raises(InputError, match="setting 'threshold'"):
        make(counting, index, threshold=1.5)


def test_identical_mentions_are_encoded_once_and_cached(counting, index):
    linker = make(counting, index, cache_size=10)
    first = linker.link(["HCQ", "hcq", "H.C.Q", "renal failure", "HCQ"])
    assert counting.calls == [["h c q"]]  # "hcq" and "renal failure" are KB names: their stored vectors are used
    assert first[0] == first[1] == first[4]
    again = linker.link(["renal failure", "hcq", "breast tumour"])
    assert counting.calls[-1] == ["breast tumour"]  # the other two came from the cache
    assert again[0] == first[3] and again[1] == first[0]
    assert linker.cache_info()["hits"] == 2 and linker.cache_info()["size"] == 4
    linker.k = 5  # a different k changes the candidates: the cache is dropped
    assert linker.cache_info()["size"] == 0


def test_cache_is_lru_and_can_be_off(counting, index):
    linker = make(counting, index, cache_size=2)
    linker.link(["a a"]), linker.link(["b b"]), linker.link(["a a"]), linker.link(["c c"])
    counting.calls.clear()
    linker.link(["a a", "b b"])  # "b b" was least recently used when "c c" came in
    assert counting.calls == [["b b"]]
    off = make(counting, index, cache_size=0)
    off.link(["renal failures"])
    off.link(["renal failures"])
    assert counting.calls[-2:] == [["renal failures"], ["renal failures"]]


def test_a_mention_that_is_a_kb_name_takes_the_stored_vector_and_links_as_encoded(counting, index, encoder):
    names = ["renal failure", "hcq", "plaquenil"]
    linker = make(counting, index, k=len(index), cache_size=0)
    stored = linker.candidates(names + ["renal failures"])
    assert counting.calls == [["renal failures"]]
    positions, vectors = index.stored_name_vectors(names + ["renal failures"])
    assert positions == [0, 1, 2]
    assert np.allclose(vectors, encoder.encode(names), atol=1e-5)
    scores, rows = index.search(encoder.encode(names), len(index), texts=names)
    for i, name in enumerate(names):  # what encoding the mention would have given: same concepts, same order
        assert [cid for cid, _ in stored[i]] == [cid for cid, _, _ in linker._by_concept(scores[i], rows[i])]
    pq = index.convert("pq", pq_m=4, pq_bits=4)  # a compressed index keeps no exact vectors: mentions are encoded
    assert pq.stored_name_vectors(names) == ([], pytest.approx(np.zeros((0, index.dim))))


def test_bad_mentions_have_a_defined_result(counting, index):
    linker = make(counting, index)
    weird = ["", "   ", "!!!", "\x00\x07\u200b", "–—•", "心肌梗死", "x" * 5000, "heart\x00attack"]
    results = linker.link(weird)
    assert results[:5] == [[], [], [], [], []]
    assert all(counting.calls[-1].count(t) == 0 for t in ["", " "])  # nothing empty is encoded
    assert results[5] and results[6]
    assert results[7][0][0] == "D009203"  # control characters act as spaces: "heart attack"
    assert linker.link([]) == []
    with pytest.raises(InputError, match="not one string"):
        linker.link("heart attack")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="not a string"):
        linker.link(["ok", None])  # type: ignore[list-item]


def test_candidates_ignore_threshold_and_cut_off(counting, index):
    linker = make(counting, index, threshold=0.99, max_entities_per_mention=1, k=len(index))
    assert len(linker.candidates(["renal failure"])[0]) == len(small_kb())
    assert len(linker.link(["renal failure"])[0]) == 1


def test_settings_are_one_object_and_changes_make_a_new_checked_one(counting, index):
    settings = LinkerSettings(k=7, threshold=0.5)
    linker = Linker(counting, small_kb(), index, settings=settings, max_entities_per_mention=2)
    assert (linker.k, linker.threshold, linker.max_entities_per_mention) == (7, 0.5, 2)
    assert settings.max_entities_per_mention == 5  # the given object is never changed: it is frozen
    linker.threshold = None
    assert linker.settings == LinkerSettings(k=7, max_entities_per_mention=2)
    with pytest.raises(InputError, match="setting 'max_entities_per_mention'"):
        linker.max_entities_per_mention = 0
    assert linker.max_entities_per_mention == 2
    linker.link(["a a", "b b", "c c"])
    linker.settings = linker.settings.replace(cache_size=1)  # a smaller cache keeps the newest entries
    assert linker.cache_info()["size"] == 1


def test_index_is_built_when_missing_and_checked_when_given(encoder, index):
    built = Linker(encoder, small_kb(), show_progress=False)
    assert built.index.names == index.names
    other = KnowledgeBase([Concept("X:1", "something else")], name="other")
    with pytest.raises(IndexMismatchError, match="KB"):
        Linker(encoder, other, index)


def test_rescore_gap_makes_a_compressed_index_rank_as_exact_search(counting, index):
    """A coarse PQ index (4 codes) scrambles the order; re-scoring every candidate within the gap
    by encoding its name gives exact search's concepts and cosines, names encoded once."""
    coarse = index.convert("pq", pq_m=1, pq_bits=2)
    mentions = ["kidney failure", "heart attacks", "renal disease", "chloroquine phosphate", "diabetes"]
    exact = make(counting, index, max_entities_per_mention=3).link(mentions)
    plain = make(counting, coarse, max_entities_per_mention=3)
    assert [[c for c, _ in found] for found in plain.link(mentions)] != [[c for c, _ in found] for found in exact]
    linker = make(counting, coarse, max_entities_per_mention=3, rescore_gap=2.0)  # 2: every candidate
    counting.calls.clear()
    rescored = linker.link(mentions)
    for got, want in zip(rescored, exact):
        assert [c for c, _ in got] == [c for c, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
    names = [name for call in counting.calls[1:] for name in call]
    assert len(names) == len(set(names)) and set(names) <= set(index.names)  # each name encoded once
    counting.calls.clear()
    linker.clear_cache()
    linker.link(mentions)
    assert len(counting.calls) == 2  # cleared: the mentions, then the names, encoded again
    exact_linker = make(counting, index, rescore_gap=2.0)  # an exact index is never re-scored
    counting.calls.clear()
    exact_linker.link(mentions)
    assert len(counting.calls) == 1
    with pytest.raises(InputError, match="rescore_gap"):
        make(counting, coarse, rescore_gap=-0.1)


class FixedNames:
    """An encoder of three names with fixed 2-d vectors that records what it is asked to encode."""
    dim = 2

    def __init__(self):
        self.asked = []

    def encode(self, names):
        import numpy as np

        self.asked.append(list(names))
        return np.array([{"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [0.6, 0.8]}[n] for n in names])


def test_rescore_near_best_only_touches_rows_within_the_gap():
    import numpy as np

    from spacy_sapbert.index.exact_rescore import NameVectors, rescore_near_best

    fixed = FixedNames()
    vectors = NameVectors(fixed, capacity=2)
    queries = np.array([[0.0, 1.0]], dtype=np.float32)
    scores = np.array([[0.9, 0.85, 0.5]], dtype=np.float32)
    rows = np.array([[0, 1, 2]])
    new_scores, new_rows = rescore_near_best(queries, scores, rows, ["a", "b", "c"], vectors, gap=0.1)
    np.testing.assert_array_equal(new_rows, [[1, 2, 0]])  # "b" exact 1.0, "c" untouched 0.5, "a" exact 0.0
    np.testing.assert_allclose(new_scores, [[1.0, 0.5, 0.0]])
    assert fixed.asked == [["a", "b"]]
    vectors.get(["c"])  # capacity 2: "a" (least recently used) goes
    vectors.get(["b", "a"])
    assert fixed.asked[-1] == ["a"]


def test_rescore_near_best_keeps_the_exact_score_of_a_querys_own_name():
    """A row whose name is the query's own text was scored q·q by the index: it keeps that score
    and its name is not encoded again; the other near rows are re-scored as before."""
    import numpy as np

    from spacy_sapbert.index.exact_rescore import NameVectors, rescore_near_best

    queries = np.array([[0.0, 1.0], [0.0, 1.0]], dtype=np.float32)  # both encode "b"
    scores = np.array([[1.0, 0.95, 0.5], [0.9, 0.85, 0.5]], dtype=np.float32)
    rows = np.array([[1, 2, 0], [0, 1, 2]])
    fixed = FixedNames()
    new_scores, new_rows = rescore_near_best(queries, scores, rows, ["a", "b", "c"], NameVectors(fixed), gap=0.1,
                                             texts=["b", "zzz"])
    assert fixed.asked == [["c", "a", "b"]]  # "b" of the first query, its own text, is not encoded
    np.testing.assert_array_equal(new_rows, [[1, 2, 0], [1, 2, 0]])
    np.testing.assert_allclose(new_scores, [[1.0, 0.8, 0.5], [1.0, 0.5, 0.0]])
