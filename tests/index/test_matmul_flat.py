"""The matrix-multiply search of a flat index gives FAISS's float32 answers (:mod:`spacy_sapbert.index.matmul_flat`):
in float32 directly; in bf16 itself where its bound proves the shortlist, through NameIndex.search's FAISS search
of the queries it reports unsure."""
import faiss
import numpy as np
import pytest

from spacy_sapbert.index import matmul_flat
from spacy_sapbert.index.matmul_flat import MatmulFlatSearch
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.index.row_filter import RowFilter


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def flat():
    index = faiss.IndexFlatIP(48)
    index.add(unit(3000, 48, 0))
    return index


def name_index(index):
    """A NameIndex over a bare FAISS index (a name and a concept per row), searched in bf16."""
    wrapped = NameIndex(index, [f"name {i}" for i in range(index.ntotal)], [f"C{i}" for i in range(index.ntotal)],
                        {"kind": "flat", "params": {}})
    wrapped.flat_search = "bfloat16"
    return wrapped


def masked_top(index, queries, k, mask):
    every = queries @ faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d).T
    every[:, ~mask] = -np.inf
    rows = np.argsort(-every, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(every, rows, axis=1), rows


@pytest.mark.parametrize("bf16", [True, False])
def test_same_rows_and_scores_as_faiss(flat, bf16):
    queries = unit(300, 48, 1)  # more than one chunk of queries
    scores, rows, unsure = MatmulFlatSearch(flat, bf16=bf16).search(queries, 10)
    want_scores, want_rows = flat.search(queries, 10)
    assert len(unsure) == 0  # random names lie apart: the bound proves every shortlist
    assert np.array_equal(rows, want_rows)
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)


@pytest.mark.parametrize("bf16", [True, False])
def test_a_row_filter_is_exact(flat, bf16):
    queries = unit(20, 48, 2)
    mask = np.zeros(flat.ntotal, dtype=bool)
    mask[::7] = True
    scores, rows, unsure = MatmulFlatSearch(flat, bf16=bf16).search(queries, 5, mask)
    want_scores, want_rows = masked_top(flat, queries, 5, mask)
    assert len(unsure) == 0
    assert np.array_equal(rows, want_rows) and mask[rows].all()
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)


@pytest.mark.parametrize("bf16", [True, False])
def test_fewer_allowed_rows_than_k_are_padded(flat, bf16):
    mask = np.zeros(flat.ntotal, dtype=bool)
    mask[[3, 30, 300]] = True
    scores, rows, unsure = MatmulFlatSearch(flat, bf16=bf16).search(unit(4, 48, 3), 6, mask)
    assert len(unsure) == 0  # every allowed row was scored in float32
    assert (np.sort(rows[:, :3], axis=1) == [3, 30, 300]).all()
    assert (rows[:, 3:] == -1).all() and np.isneginf(scores[:, 3:]).all()
    none = MatmulFlatSearch(flat, bf16=bf16).search(unit(2, 48, 4), 3, np.zeros(flat.ntotal, dtype=bool))
    assert (none[1] == -1).all() and np.isneginf(none[0]).all()


def test_a_query_the_bound_does_not_clear_is_scored_in_float32(flat, monkeypatch):
    """With an error bound no shortlist clears, every query is reported unsure and NameIndex.search
    takes FAISS's float32 path for it: the same answers."""
    monkeypatch.setattr(matmul_flat, "ERROR_BOUND", 10.0)
    queries = unit(30, 48, 5)
    mask = np.arange(flat.ntotal) % 3 > 0
    assert list(MatmulFlatSearch(flat).search(queries, 8, mask)[2]) == list(range(30))
    for m in (None, mask):
        scores, rows = name_index(flat).search(queries, 8, None if m is None else RowFilter(m))
        want_scores, want_rows = masked_top(flat, queries, 8, np.ones(flat.ntotal, dtype=bool) if m is None else m)
        assert np.array_equal(rows, want_rows)
        np.testing.assert_allclose(scores, want_scores, atol=1e-5)


def test_crowded_names_still_get_the_exact_answer():
    """Many names within the bf16 error of each other (near-duplicates, as a KB's spelling variants
    are): the shortlist cannot be trusted for most queries, and the answers are still FAISS's."""
    centres = unit(40, 64, 6)
    noise = np.random.default_rng(7).standard_normal((4000, 64)).astype(np.float32)
    names = centres.repeat(100, axis=0) + 0.002 * noise
    names /= np.linalg.norm(names, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(64)
    index.add(names)
    queries = centres[:25] + 0.01 * unit(25, 64, 8)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    assert len(MatmulFlatSearch(index).search(queries, 25)[2]) > 0  # FAISS's path is taken
    scores, rows = name_index(index).search(queries, 25)
    want_scores, want_rows = index.search(queries, 25)
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)
    for got, want, score in zip(rows, want_rows, want_scores):  # equal scores may come in another order
        assert set(got[score < score[-1] - 1e-5]) == set(want[score < score[-1] - 1e-5])
    scores32, rows32, unsure32 = MatmulFlatSearch(index, bf16=False).search(queries, 25)
    assert len(unsure32) == 0  # float32 scores need no second search
    np.testing.assert_allclose(scores32, want_scores, atol=1e-5)
    for got, want, score in zip(rows32, want_rows, want_scores):
        assert set(got[score < score[-1] - 1e-5]) == set(want[score < score[-1] - 1e-5])


@pytest.mark.parametrize("columns", [20_000, 20_032])  # a last block shorter than the others, and none
def test_block_maxima_find_the_same_top_values_as_topk(columns):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    scores = torch.from_numpy(rng.standard_normal((40, columns)).astype(np.float32)).to(torch.bfloat16)  # many ties
    scores[0, -1] = 10.0  # the best score in the last block
    scores[1, :] = float("-inf")
    scores[1, [5, 700, columns - 1]] = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)  # fewer finite than k
    k = 20
    assert k * matmul_flat.BLOCK * 4 <= columns  # the block path, not topk's fallback
    values, found = matmul_flat.top_rows(scores, k)
    expected = torch.topk(scores, k, dim=1).values
    assert torch.equal(values, expected)
    real = found >= 0  # -1: a -inf that stands for no column (row 1 has 3 finite scores)
    assert torch.equal(torch.gather(scores, 1, found.clamp(min=0))[real], values[real])  # the columns hold them
    assert bool(torch.isinf(values[~real]).all()) and bool(real[[0] + list(range(2, 40))].all())
    assert found[0, 0] == columns - 1 and found[1, :3].tolist() == [columns - 1, 700, 5]
    assert all(len(set(c for c in row if c >= 0)) == sum(c >= 0 for c in row) for row in found.tolist())  # none twice
