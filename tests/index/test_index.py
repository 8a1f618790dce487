"""NameIndex: build, search, the three kinds, save/load and the fingerprint checks (tiny random BERT)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import IndexMismatchError, NameIndex
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

from tests.conftest import write_tiny_bert
from tests.linker_fixtures import small_kb


@pytest.fixture(scope="module")
def encoder(tiny_bert) -> Encoder:
    return Encoder(tiny_bert, pooling="mean", device="cpu")  # a random BERT's [CLS] vectors are all alike


@pytest.fixture(scope="module")
def flat(encoder) -> NameIndex:
    return NameIndex.build(small_kb(), encoder, show_progress=False)


def test_every_name_concept_pair_is_a_row(flat):
    kb = small_kb()
    assert list(zip(flat.names, flat.concept_ids)) == list(kb.name_concept_pairs())
    assert flat.manifest["names"] == len(set(flat.names)) < len(flat)  # "ms" is shared: encoded once
    assert flat.manifest["kb_fingerprint"] == kb.fingerprint()
    assert flat.kind == "flat" and flat.dim == 32


def test_concepts_named_reads_the_index_table_as_the_kb_aliases_say(flat):
    aliases = small_kb().alias_to_concepts
    assert sorted(flat.concepts_named("ms")) == sorted(aliases["ms"]) == ["D009081", "D009103"]
    assert all(flat.concepts_named(name) == aliases[name] for name in aliases)
    assert flat.concepts_named("no such name") == []


def test_a_name_finds_itself_and_a_shared_name_finds_both_concepts(flat, encoder):
    names = ["myocardial infarction", "plaquenil", "ms"]
    scores, rows = flat.search(encoder.encode(names), k=3)
    assert scores.dtype == np.float32 and rows.dtype == np.int64 and scores.shape == (3, 3)
    assert flat.names[rows[0, 0]] == "myocardial infarction" and scores[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert flat.concept_ids[rows[1, 0]] == "D006886"
    top_two = {flat.concept_ids[r] for r in rows[2, :2]}
    assert top_two == {"D009103", "D009081"}
    np.testing.assert_allclose(scores[2, :2], 1.0, atol=1e-5)
    assert (np.diff(scores, axis=1) <= 1e-6).all()  # best first


def test_k_beyond_the_index_pads_with_minus_one(flat, encoder):
    scores, rows = flat.search(encoder.encode(["renal failure"]), k=len(flat) + 3)
    assert (rows[0, -3:] == -1).all() and np.isneginf(scores[0, -3:]).all()
    assert (rows[0, : len(flat)] >= 0).all()
    with pytest.raises(InputError, match="k must be positive"):
        flat.search(encoder.encode(["x"]), k=0)
    with pytest.raises(InputError, match="shape"):
        flat.search(np.zeros((1, 7), dtype=np.float32), k=1)


@pytest.mark.parametrize("kind", ["hnsw", "ivfpq", "pq"])
def test_approximate_kinds_build_search_and_round_trip(kind, encoder, tmp_path):
    index = NameIndex.build(small_kb(), encoder, kind=kind, show_progress=False)
    assert index.kind == kind and len(index) == len(list(small_kb().name_concept_pairs()))
    queries = encoder.encode(["heart attack", "renal failure"])
    scores, rows = index.search(queries, k=5)
    assert (rows >= 0).all() and np.isfinite(scores).all()
    if kind == "hnsw":  # HNSW keeps exact vectors: an exact name is found with score 1
        assert index.names[rows[0, 0]] == "heart attack" and scores[0, 0] == pytest.approx(1.0, abs=1e-5)
    expected = {"hnsw": {"hnsw_m", "ef_search"}, "ivfpq": {"nlist", "pq_m", "nprobe"}, "pq": {"pq_m", "pq_bits"}}
    assert set(index.manifest["params"]) >= expected[kind]
    loaded = NameIndex.load(index.save(tmp_path / kind), encoder=encoder, kb=small_kb())
    again_scores, again_rows = loaded.search(queries, k=5)
    np.testing.assert_array_equal(again_rows, rows)
    np.testing.assert_array_equal(again_scores, scores)


def test_index_parameters_are_checked(encoder):
    with pytest.raises(InputError, match="unknown index kind"):
        NameIndex.build(small_kb(), encoder, kind="annoy", show_progress=False)
    with pytest.raises(InputError, match="unknown index parameter"):
        NameIndex.build(small_kb(), encoder, kind="hnsw", show_progress=False, nlist=4)
    with pytest.raises(InputError, match="no parameters"):
        NameIndex.build(small_kb(), encoder, kind="flat", show_progress=False, hnsw_m=4)
    custom = NameIndex.build(small_kb(), encoder, kind="hnsw", show_progress=False, hnsw_m=8, ef_search=16)
    assert custom.manifest["params"]["hnsw_m"] == 8


def test_save_load_round_trip_without_pickle(flat, encoder, tmp_path):
    folder = flat.save(tmp_path / "idx")
    assert sorted(p.name for p in folder.iterdir()) == [
        "concepts.json.gz", "index.faiss", "manifest.json", "names.json.gz", "rows.npy"]
    np.load(folder / "rows.npy", allow_pickle=False)  # plain array, no pickled objects
    loaded = NameIndex.load(folder, encoder=encoder, kb=small_kb())
    assert loaded.names == flat.names and loaded.concept_ids == flat.concept_ids
    queries = encoder.encode(["breast tumour", "kidney"])
    for a, b in zip(loaded.search(queries, 4), flat.search(queries, 4)):
        np.testing.assert_array_equal(a, b)
    assert NameIndex.load(folder).manifest == flat.manifest  # no encoder/KB given: no check


def test_loading_with_another_model_or_kb_is_an_error(flat, tiny_bert, tmp_path):
    folder = flat.save(tmp_path / "idx")
    other_model = Encoder(write_tiny_bert(tmp_path / "other-bert", seed=7), pooling="mean")
    with pytest.raises(IndexMismatchError, match="model") as err:
        NameIndex.load(folder, encoder=other_model)
    assert "model_fingerprint" in str(err.value) and "rebuild" in str(err.value)
    other_kb = KnowledgeBase(list(small_kb()) + [Concept("D000001", "Calcimycin", [])], name="bigger")
    with pytest.raises(IndexMismatchError, match="KB 'small'.*'bigger'"):
        NameIndex.load(folder, kb=other_kb)
    same_weights_cls_pooling = Encoder(tiny_bert, pooling="cls")
    with pytest.raises(IndexMismatchError, match="'pooling': 'cls'"):
        NameIndex.load(folder, encoder=same_weights_cls_pooling)


def test_kb_without_names_is_an_error(encoder):
    with pytest.raises(InputError, match="is empty"):
        NameIndex.build(KnowledgeBase([], name="nothing"), encoder, show_progress=False)
    punctuation_only = KnowledgeBase([Concept("X:1", "--", ["...", " "])], name="dots")
    with pytest.raises(InputError, match="'dots' has no names"):
        NameIndex.build(punctuation_only, encoder, show_progress=False)


def test_broken_index_folders_are_reported(flat, tmp_path):
    with pytest.raises(InputError, match="index folder not found"):
        NameIndex.load(tmp_path / "missing")
    folder = flat.save(tmp_path / "idx")
    (folder / "rows.npy").unlink()
    with pytest.raises(InputError, match="cannot read the index files"):
        NameIndex.load(folder)
    folder = flat.save(tmp_path / "idx2")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["rows"] = 3
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="disagree"):
        NameIndex.load(folder)
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(InputError, match="manifest.json: invalid JSON"):
        NameIndex.load(folder)


@pytest.mark.parametrize("kind", ["pq", "ivfpq"])
def test_rerank_scores_compressed_candidates_exactly_from_memory_mapped_vectors(kind, flat, encoder, tmp_path):
    kb = small_kb()
    queries = encoder.encode(["heart attack", "renal failure", "breast tumour", "ms"])
    exact_scores, exact_rows = flat.search(queries, k=4)
    plain = NameIndex.build(kb, encoder, kind=kind, show_progress=False)
    assert plain.rerank_vectors is None and plain.manifest["params"]["rerank"] == 0
    # every row is a candidate: re-ranking turns the compressed search into the exact one
    built = NameIndex.build(kb, encoder, kind=kind, show_progress=False, rerank=len(flat))
    converted = flat.convert(kind, rerank=len(flat))
    for index in (built, converted):
        scores, rows = index.search(queries, k=4)
        assert [[index.concept_ids[r] for r in row[:1]] for row in rows] == \
            [[flat.concept_ids[r] for r in row[:1]] for row in exact_rows]
        np.testing.assert_allclose(scores, exact_scores, atol=2e-3)  # float16 copies of the vectors
        assert index.names[rows[0, 0]] == "heart attack" and scores[0, 0] == pytest.approx(1.0, abs=2e-3)
    folder = built.save(tmp_path / kind)
    assert (folder / "vectors.npy").is_file()
    loaded = NameIndex.load(folder, encoder=encoder, kb=kb)
    assert isinstance(loaded.rerank_vectors, np.memmap) and loaded.rerank_vectors.dtype == np.float16
    for a, b in zip(loaded.search(queries, 4), built.search(queries, 4)):
        np.testing.assert_array_equal(a, b)
    np.save(folder / "vectors.npy", np.zeros((2, 32), dtype=np.float16))
    with pytest.raises(InputError, match="expected float16 vectors of shape"):
        NameIndex.load(folder)
    (folder / "vectors.npy").unlink()
    with pytest.raises(InputError, match="vectors.npy"):
        NameIndex.load(folder)
    with pytest.raises(InputError, match="rerank"):
        NameIndex.build(kb, encoder, kind=kind, show_progress=False, rerank=-1)
    with pytest.raises(InputError, match="unknown index parameter"):
        NameIndex.build(kb, encoder, kind="hnsw", show_progress=False, rerank=10)


def test_a_name_equal_to_the_query_text_is_scored_exactly_and_first_in_a_compressed_index(encoder):
    kb = small_kb()
    index = NameIndex.build(kb, encoder, kind="pq", show_progress=False, pq_m=1, pq_bits=2)  # coarse: 4 codes
    texts = ["heart attack", "renal failure", "ms", "not a name"]
    queries = encoder.encode(texts)
    coarse_scores, coarse_rows = index.search(queries, k=4)
    assert index.names[coarse_rows[0, 0]] != "heart attack" or coarse_scores[0, 0] < 0.99  # codes are not exact
    scores, rows = index.search(queries, k=4, texts=texts)
    own = np.einsum("nd,nd->n", queries, queries)
    assert index.names[rows[0, 0]] == "heart attack" and scores[0, 0] == pytest.approx(own[0], abs=1e-6)
    assert index.names[rows[1, 0]] == "renal failure"
    # a shared name: both concepts, tied, last row first (as exact search returns them); every row once
    assert [index.concept_ids[r] for r in rows[2, :2]] == ["D009081", "D009103"] and scores[2, 0] == scores[2, 1]
    assert all(len(set(r[r >= 0].tolist())) == len(r[r >= 0]) for r in rows)
    np.testing.assert_array_equal(rows[3], coarse_rows[3])  # no name equals the text: the codes' order
    # a row filter keeps its word: an excluded concept's name is not brought in
    from spacy_sapbert.index.name_index import RowFilter
    mask = np.array([cid != "D009203" for cid in index.concept_ids])
    _, filtered = index.search(queries[:1], k=4, rows=RowFilter(mask), texts=texts[:1])
    assert "D009203" not in {index.concept_ids[r] for r in filtered[0] if r >= 0}
    with pytest.raises(InputError, match="texts"):
        index.search(queries, k=2, texts=texts[:2])


@pytest.mark.parametrize("kind", ["flat", "pq", "hnsw"])
def test_rows_with_equal_scores_come_last_row_first_in_every_kind(kind, flat, encoder):
    index = flat if kind == "flat" else flat.convert(kind)
    scores, rows = index.search(encoder.encode(["ms", "multiple sclerosis", "mitral stenosis"]), k=len(flat))
    ties = 0
    for row_scores, row_ids in zip(scores, rows):
        for i in range(len(row_ids) - 1):
            if row_scores[i] == row_scores[i + 1] and row_ids[i + 1] >= 0:
                assert row_ids[i] > row_ids[i + 1]
                ties += 1
    assert ties >= 3  # "ms" is tied in each query's list


def test_promote_rows_merges_known_scores_into_the_hits():
    from spacy_sapbert.index.kinds import promote_rows

    scores = np.array([[0.9, 0.8, 0.1], [0.5, -np.inf, -np.inf]], dtype=np.float32)
    found = np.array([[4, 7, 2], [3, -1, -1]])
    new_scores, new_rows = promote_rows(scores, found, [np.array([7, 9]), None], [1.0, 1.0], k=3)
    np.testing.assert_array_equal(new_rows, [[7, 9, 4], [3, -1, -1]])
    np.testing.assert_allclose(new_scores, [[1.0, 1.0, 0.9], [0.5, -np.inf, -np.inf]])
    np.testing.assert_array_equal(found, [[4, 7, 2], [3, -1, -1]])  # the inputs are left as they were


# -- saving over an existing folder -------------------------------------------------------------
def _other_index(encoder) -> NameIndex:
    kb = KnowledgeBase([Concept("X:1", "Calcimycin", ["A23187"]), Concept("X:2", "Aspirin", [])], name="other")
    return NameIndex.build(kb, encoder, show_progress=False)


def test_a_save_that_fails_half_way_leaves_the_old_index(flat, encoder, tmp_path, monkeypatch):
    folder = flat.save(tmp_path / "idx")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    other = _other_index(encoder)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", disk_full)  # index.faiss and the names are written by then
    with pytest.raises(OSError, match="No space left"):
        other.save(folder)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert NameIndex.load(folder, encoder=encoder, kb=small_kb()).manifest == flat.manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no temporary folder left behind
    other.save(folder)
    assert NameIndex.load(folder).manifest == other.manifest


def test_save_refuses_a_folder_that_is_not_an_index(flat, tmp_path):
    folder = tmp_path / "my-project"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    with pytest.raises(InputError) as err:
        flat.save(folder)
    assert str(folder) in str(err.value) and "not a saved NameIndex" in str(err.value)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my-project"]
    a_file = tmp_path / "index.txt"
    a_file.write_text("not a folder")
    with pytest.raises(InputError, match="index.txt: .*not a folder"):
        flat.save(a_file)
    assert a_file.read_text() == "not a folder"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert NameIndex.load(flat.save(empty)).manifest == flat.manifest  # an empty folder is fine
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(InputError, match="not a saved NameIndex"):  # a link is judged by where it points
        flat.save(link)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_save_replaces_an_index_whole_and_clears_leftovers_of_killed_saves(flat, encoder, tmp_path):
    reranked = NameIndex.build(small_kb(), encoder, kind="pq", show_progress=False, rerank=4)
    folder = reranked.save(tmp_path / "idx")
    assert (folder / "vectors.npy").is_file()
    (folder / "names.json").write_text("[]")  # a file an older version wrote
    leftover = tmp_path / ".idx.tmp-deadbeef"  # what a save killed before its swap leaves
    leftover.mkdir()
    (leftover / "index.faiss").write_bytes(b"partial")
    flat.save(folder)
    assert sorted(p.name for p in folder.iterdir()) == [
        "concepts.json.gz", "index.faiss", "manifest.json", "names.json.gz", "rows.npy"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]
    assert NameIndex.load(folder, encoder=encoder, kb=small_kb()).manifest == flat.manifest
    link = tmp_path / "current"
    link.symlink_to(folder)
    reranked.save(link)  # a link to an index stays a link; the index it points to is replaced
    assert link.is_symlink() and (folder / "vectors.npy").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "idx"]


def test_an_index_saved_back_over_the_folder_it_is_memory_mapped_from_survives(encoder, tmp_path):
    # The re-rank vectors of a loaded index are read from vectors.npy as it is written; writing that
    # file in place truncated it (an OSError, or SIGBUS) and destroyed the saved index. In a child
    # process, so that a SIGBUS cannot take the test run with it.
    import subprocess
    import sys
    import textwrap

    built = NameIndex.build(small_kb(), encoder, kind="pq", show_progress=False, rerank=4)
    folder = built.save(tmp_path / "idx")
    script = textwrap.dedent(f"""
        import numpy as np
        from spacy_sapbert.index.name_index import NameIndex
        loaded = NameIndex.load({str(folder)!r})
        assert isinstance(loaded.rerank_vectors, np.memmap)
        expected = np.array(loaded.rerank_vectors)
        loaded.save({str(folder)!r})
        again = NameIndex.load({str(folder)!r})
        assert np.array_equal(np.asarray(again.rerank_vectors), expected)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])
    assert NameIndex.load(folder, encoder=encoder, kb=small_kb()).manifest == built.manifest


def test_a_saved_index_folder_has_the_permissions_of_a_new_folder(flat, tmp_path):
    import stat

    reference = tmp_path / "made-by-mkdir"
    reference.mkdir()
    folder = flat.save(tmp_path / "idx")  # (built in a private temporary folder first)
    assert stat.S_IMODE(folder.stat().st_mode) == stat.S_IMODE(reference.stat().st_mode)


def test_faiss_index_kinds_are_made_through_the_public_helper():
    from spacy_sapbert.index.name_index import INDEX_KINDS, make_faiss_index

    vectors = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    for kind in INDEX_KINDS:
        index, used = make_faiss_index(kind, 16, vectors, {})
        assert index.d == 16 and (used == {} if kind == "flat" else used)
    with pytest.raises(InputError, match="unknown index kind 'lsh'"):
        make_faiss_index("lsh", 16, vectors, {})
    with pytest.raises(InputError, match="pq_m=5 must divide"):
        make_faiss_index("pq", 16, vectors, {"pq_m": 5})


def test_flat_searches_go_through_blas_and_over_fetch_with_the_selectors_answers(flat, encoder):
    import faiss

    from spacy_sapbert.index.kinds import blas_distances
    from spacy_sapbert.index.row_filter import FLAT_OVERFETCH_SHARE, RowFilter, filtered_search

    queries = encoder.encode(["renal failure", "kidney trouble", "hcq", "breast tumour", "a b"] * 6)
    before = faiss.cvar.distance_compute_blas_threshold
    with blas_distances():
        assert faiss.cvar.distance_compute_blas_threshold == 1
    assert faiss.cvar.distance_compute_blas_threshold == before  # a user's setting is given back
    rng = np.random.RandomState(0)
    for share in (0.6, 0.3):  # both above FLAT_OVERFETCH_SHARE: over-fetched through BLAS
        assert share >= FLAT_OVERFETCH_SHARE
        rows = RowFilter(rng.rand(len(flat)) < share)
        scores, found = filtered_search(flat.index, "flat", {}, queries, 4, rows)
        params = faiss.SearchParameters(sel=rows.selector)
        want_scores, want = flat.index.search(queries, 4, params=params)  # FAISS's own filtered search
        assert rows.mask[found[found >= 0]].all()
        assert np.allclose(scores, want_scores, atol=1e-6)
        assert (found == want).mean() > 0.95  # equal scores (a name several concepts share) may swap rows


@pytest.mark.parametrize("bits", [3, 4])  # 3: IndexPQ itself (a tiny KB caps bits at log2 of its names)
def test_a_filtered_pq_search_scans_the_allowed_codes_alone_with_the_full_indexs_scores(flat, encoder, bits):
    import faiss

    from spacy_sapbert.index.kinds import pq_searcher
    from spacy_sapbert.index.row_filter import RowFilter, filtered_search, overfetch_search

    pq = flat.convert("pq", pq_m=4, pq_bits=bits)
    queries = encoder.encode(["renal failure", "kidney trouble", "hcq", "breast tumour", "a b"])
    rows = RowFilter(np.random.RandomState(0).rand(len(pq)) < 0.5)
    scores, found = filtered_search(pq.index, "pq", {}, queries, 3, rows)
    whole = pq_searcher(pq.index)  # 4-bit codes: the fast-scan copy of the whole index; others: the index
    assert isinstance(whole, faiss.IndexPQFastScan) == (bits == 4)
    want_scores, _ = overfetch_search(whole, "pq", {}, queries, 3, rows)  # the whole index, allowed rows kept
    assert np.array_equal(scores, want_scores)  # the same codes and tables: the same numbers
    every_score, every_row = overfetch_search(whole, "pq", {}, queries, rows.count, rows)
    for i in range(len(queries)):  # rows that tie may come in another order: each found row has its own score
        own = dict(zip(every_row[i].tolist(), every_score[i].tolist()))
        assert [own[row] for row in found[i].tolist()] == scores[i].tolist()
    allowed, row_of = rows.pq_codes(pq.index)
    assert allowed.ntotal == rows.count and list(row_of) == list(np.flatnonzero(rows.mask))
    assert rows.pq_codes(pq.index)[0] is allowed  # made once per index
    other = flat.convert("pq", pq_m=4, pq_bits=4)
    assert rows.pq_codes(other.index)[0] is not allowed


@pytest.mark.parametrize("count", [1, 31, 32, 33, 64, 65, 500])
def test_allowed_rows_are_packed_for_fast_scan_as_faiss_packs_a_copy_of_their_codes(count):
    """pq_rows_searcher packs the rows' 4-bit codes block by block: the same bytes (a short last block padded with
    zero codes) and answers as FAISS's fast-scan constructor over an IndexPQ holding a copy of those codes."""
    import faiss

    from spacy_sapbert.index.kinds import pq_rows_searcher

    rng = np.random.default_rng(count)
    vectors = rng.standard_normal((700, 16)).astype(np.float32)
    full = faiss.IndexPQ(16, 8, 4, faiss.METRIC_INNER_PRODUCT)
    full.train(vectors)
    full.add(vectors)
    rows = np.sort(rng.choice(len(vectors), size=count, replace=False))
    codes = faiss.rev_swig_ptr(full.codes.data(), full.ntotal * full.code_size).reshape(full.ntotal, full.code_size)
    copy = faiss.IndexPQ(full.d, full.pq.M, full.pq.nbits, full.metric_type)
    copy.pq, copy.is_trained = full.pq, True
    copy.add_sa_codes(np.ascontiguousarray(codes[rows]))
    want = faiss.IndexPQFastScan(copy)
    got = pq_rows_searcher(full, rows)
    assert isinstance(got, faiss.IndexPQFastScan) and (got.ntotal, got.ntotal2) == (want.ntotal, want.ntotal2)
    assert bytes(faiss.rev_swig_ptr(got.codes.data(), got.codes.size())) == \
        bytes(faiss.rev_swig_ptr(want.codes.data(), want.codes.size()))
    queries = vectors[:7]
    assert all(np.array_equal(a, b) for a, b in zip(got.search(queries, 5), want.search(queries, 5)))


def test_a_flat_index_searched_by_a_matrix_multiply_gives_faiss_answers(flat, encoder):
    """flat_search (auto: bf16 where the CPU is faster in it, else float32) changes the speed, not the
    answers: the same rows and (to float rounding) scores as FAISS's own search, with a row filter too;
    the searcher follows the setting, and a setting it does not know is an error that names it."""
    import copy

    from spacy_sapbert.index.matmul_flat import MatmulFlatSearch
    from spacy_sapbert.index.row_filter import RowFilter

    queries = encoder.encode(["renal failure", "kidney trouble", "hcq", "breast tumour", "ms"])
    faiss_own = copy.copy(flat)
    faiss_own.flat_search = "faiss"
    filters = [None, RowFilter(np.random.RandomState(1).rand(len(flat)) < 0.5)]
    for setting in ("bfloat16", "float32"):
        searched = copy.copy(flat)
        searched.flat_search = setting
        for rows in filters:
            got_scores, got = searched.search(queries, 3, rows)
            want_scores, want = faiss_own.search(queries, 3, rows)
            assert np.array_equal(got, want)
            np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)
        made = searched._searcher()
        assert isinstance(made, MatmulFlatSearch) and made.bf16 is (setting == "bfloat16")
    assert faiss_own._searcher() is flat.index
    broken = copy.copy(flat)
    broken.flat_search = "bf16"
    with pytest.raises(InputError, match="flat_search 'bf16': expected one of float32, bfloat16, faiss"):
        broken.search(queries, 3)


def test_a_filtered_pq_search_makes_no_searcher_of_the_whole_index(encoder):
    """Each type set's rows have a fast-scan copy of their own codes (RowFilter.pq_codes); one of every code,
    for unfiltered searches, is not made until such a search comes (12 MB for the embedded default)."""
    from spacy_sapbert.index.name_index import RowFilter

    index = NameIndex.build(small_kb(), encoder, kind="pq", show_progress=False, pq_m=4, pq_bits=4)
    queries = encoder.encode(["heart attack", "kidney failure"])
    rows = RowFilter(np.array([cid != "D009203" for cid in index.concept_ids]))
    first = index.search(queries, k=3, rows=rows)
    assert index._made_searcher is None
    index.search(queries, k=3)
    assert index._made_searcher is not None
    for a, b in zip(index.search(queries, k=3, rows=rows), first):
        np.testing.assert_array_equal(a, b)


def test_row_values_read_each_rows_value_through_its_number():
    """A loaded index keeps its names and concept IDs as numbers into its tables (RowValues), not a list per
    row; they must read as the lists they stand for."""
    from spacy_sapbert.index.tables import RowValues

    values = RowValues(["heart attack", "ms"], np.array([1, 0, 0, 1], dtype=np.int32))
    as_list = ["ms", "heart attack", "heart attack", "ms"]
    assert len(values) == 4 and list(values) == as_list and values[-1] == "ms" and values[1:3] == as_list[1:3]
    assert values == as_list and as_list == values and values == tuple(as_list) and values != as_list[:3]
    assert values != ["ms"] * 4 and (values == "ms") is False
    with pytest.raises(TypeError):
        hash(values)
    with pytest.raises(IndexError):
        values[4]
