"""Refinement codes of a pq index: scores closer to exact, saved and read back, refused where they cannot work."""
from __future__ import annotations

import numpy as np
import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.index.kinds import faiss_module
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.index.refine import REFINE_FILE

DIM = 32


def _flat(rows: int = 3000, seed: int = 0) -> NameIndex:
    """A flat index of clustered unit vectors (names of 300 concepts): near neighbours that 4-bit codes confuse."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((300, DIM)).astype(np.float32)
    vectors = centres[rng.integers(0, 300, rows)] + 0.35 * rng.standard_normal((rows, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = faiss_module().IndexFlatIP(DIM)
    index.add(vectors)
    manifest = {"format_version": 1, "kind": "flat", "params": {}, "dim": DIM, "rows": rows, "names": rows,
                "concepts": rows, "model_fingerprint": "m", "kb_fingerprint": "k", "kb_name": "random"}
    return NameIndex(index, [f"name {i}" for i in range(rows)], [f"C{i}" for i in range(rows)], manifest)


def _queries(flat: NameIndex, n: int = 200, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    queries = flat.vectors()[rng.integers(0, len(flat), n)] + 0.2 * rng.standard_normal((n, DIM)).astype(np.float32)
    return queries / np.linalg.norm(queries, axis=1, keepdims=True)


def _errors(index: NameIndex, flat: NameIndex, queries: np.ndarray) -> np.ndarray:
    scores, rows = index.search(queries, k=10)
    exact = np.einsum("nd,nkd->nk", queries, flat.vectors()[rows])
    return np.abs(scores - exact)


@pytest.fixture(scope="module")
def flat() -> NameIndex:
    return _flat()


def test_refinement_codes_bring_the_candidates_scores_close_to_exact_and_the_best_with_them(flat):
    queries = _queries(flat)
    plain = flat.convert("pq", pq_m=16, pq_bits=4)
    refined = flat.convert("pq", pq_m=16, pq_bits=4, refine_m=8)
    assert plain.refine_codes is None and refined.refine_codes is not None
    assert refined.manifest["params"]["refine_m"] == 8 and plain.manifest["params"]["refine_m"] == 0
    plain_error, refined_error = _errors(plain, flat, queries).mean(), _errors(refined, flat, queries).mean()
    assert refined_error < plain_error / 3, (plain_error, refined_error)
    # the same candidates (the codes search), ordered by the refined scores: the best is exact search's more often
    _, exact_best = flat.search(queries, k=1)
    same = [(index.search(queries, k=10)[1][:, 0] == exact_best[:, 0]).mean() for index in (plain, refined)]
    assert same[1] > same[0] + 0.2, same  # 0.705 against 0.35 when written
    # codes kept, residual codes added: the searched codes are the same object
    added = plain.with_refine_codes(flat.vectors(), 8)
    assert added.index is plain.index and added.manifest["params"]["refine_m"] == 8
    assert _errors(added, flat, queries).mean() < plain_error / 3
    dropped = added.with_refine_codes(None, 0)
    assert dropped.refine_codes is None and dropped.manifest["params"]["refine_m"] == 0
    for a, b in zip(dropped.search(queries, 10), plain.search(queries, 10)):
        np.testing.assert_array_equal(a, b)


def test_refinement_codes_are_saved_beside_the_index_and_read_back(flat, tmp_path):
    queries = _queries(flat, n=20)
    refined = flat.convert("pq", pq_m=16, pq_bits=4, refine_m=8)
    folder = refined.save(tmp_path / "pq")
    assert (folder / REFINE_FILE).is_file()
    loaded = NameIndex.load(folder)
    assert loaded.refine_codes is not None and loaded.manifest["params"]["refine_m"] == 8
    for a, b in zip(loaded.search(queries, 10), refined.search(queries, 10)):
        np.testing.assert_array_equal(a, b)
    plain_folder = flat.convert("pq", pq_m=16, pq_bits=4).save(tmp_path / "plain")
    assert not (plain_folder / REFINE_FILE).exists() and NameIndex.load(plain_folder).refine_codes is None
    # codes of another index: refused, naming the file
    other = _flat(rows=100, seed=3).convert("pq", pq_m=16, pq_bits=4, refine_m=8)
    faiss_module().write_index(other.refine_codes, str(folder / REFINE_FILE))
    with pytest.raises(InputError, match=r"refine\.faiss.*expected refinement codes of 3000 rows"):
        NameIndex.load(folder)
    (folder / REFINE_FILE).unlink()
    with pytest.raises(InputError, match=r"refine\.faiss.*cannot be read"):
        NameIndex.load(folder)


def test_refinement_codes_are_refused_where_they_cannot_work(flat):
    with pytest.raises(InputError, match="refine_m=5 must divide the vector dimension 32"):
        flat.convert("pq", pq_m=16, refine_m=5)
    with pytest.raises(InputError, match="choose one"):
        flat.convert("pq", pq_m=16, refine_m=8, rerank=10)
    with pytest.raises(InputError, match="unknown index parameter"):
        flat.convert("hnsw", refine_m=8)
    with pytest.raises(InputError, match="made for a pq index, not a flat one"):
        flat.with_refine_codes(flat.vectors(), 8)
    plain = flat.convert("pq", pq_m=16, pq_bits=4)
    with pytest.raises(InputError, match="none given"):
        plain.with_refine_codes(None, 8)
    with pytest.raises(InputError, match="1000 vectors for an index of 3000 rows"):
        plain.with_refine_codes(flat.vectors()[:1000], 8)
