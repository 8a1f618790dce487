"""Type-aware candidates: a span's label restricts the KB types it may link to
(``label_to_types``), inside the search, for every index kind (the real MiniLM on a small KB
whose chemicals are the nearest names of some disease mentions)."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import spacy

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.index.row_filter import RowFilter, filtered_search
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.linking.linker import Linker
from spacy_sapbert.linking.settings import DEFAULT_LABEL_TO_TYPES, SettingError

CONCEPTS = [
    Concept("D003042", "Cocaine", ["cocaine hydrochloride", "benzoylmethylecgonine"], ["Chemical"]),
    Concept("D016578", "Crack Cocaine", ["crack"], ["Chemical"]),
    Concept("D008012", "Lidocaine", ["lignocaine", "Xylocaine"], ["Chemical"]),
    Concept("D019970", "Cocaine-Related Disorders", ["cocaine abuse", "cocaine dependence"], ["Disease"]),
    Concept("D006886", "Hydroxychloroquine", ["Plaquenil", "HCQ"], ["Chemical"]),
    Concept("D001241", "Aspirin", ["acetylsalicylic acid"], ["Chemical"]),
    Concept("D009203", "Myocardial Infarction", ["heart attack"], ["Disease"]),
    Concept("D006973", "Hypertension", ["high blood pressure"], ["Disease"]),
    Concept("D012202", "Reye Syndrome", ["Reye's syndrome"], ["Disease"]),
    Concept("HP:0002615", "Hypotension", ["low blood pressure"], ["Phenotype"]),
    Concept("D007022", "Hypotension, Orthostatic", ["orthostatic hypotension"], ["Disease"]),
]
TYPES = {c.concept_id: set(c.types) for c in CONCEPTS}
KINDS = [("flat", {}), ("hnsw", {}), ("ivfpq", {}), ("pq", {}), ("pq", {"rerank": 10}), ("ivfpq", {"rerank": 10})]


def mixed_kb() -> KnowledgeBase:
    return KnowledgeBase(CONCEPTS, name="mixed")


@pytest.fixture(scope="module")
def encoder(minilm_path) -> Encoder:
    return Encoder(minilm_path, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def flat(encoder) -> NameIndex:
    return NameIndex.build(mixed_kb(), encoder, show_progress=False)


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return mixed_kb().to_jsonl(tmp_path_factory.mktemp("kb") / "mixed.jsonl")


def test_a_disease_mention_whose_nearest_names_are_chemicals_gets_a_disease(encoder, flat):
    linker = Linker(encoder, mixed_kb(), flat, k=2)
    (unfiltered,) = linker.candidates(["cocaine"])
    assert unfiltered and all(TYPES[cid] == {"Chemical"} for cid, _ in unfiltered)  # the top 2 names: chemicals
    (disease,) = linker.link(["cocaine"], types=[{"Disease"}])
    assert disease[0][0] == "D019970"  # found by the search, not by filtering the top 2 afterwards
    (chemical,) = linker.link(["cocaine abuse"], types=[["Chemical"]])
    assert chemical[0][0] == "D003042" and all(TYPES[cid] == {"Chemical"} for cid, _ in chemical)
    # DISEASE's default types take phenotypes too (a symptom is a DISEASE span in BC5CDR)
    (phenotype,) = linker.link(["hypotensive"], types=[DEFAULT_LABEL_TO_TYPES["DISEASE"]])
    assert phenotype[0][0] == "HP:0002615"


@pytest.mark.parametrize("kind, params", KINDS, ids=[f"{k}{p or ''}" for k, p in KINDS])
def test_every_index_kind_filters_inside_the_search(encoder, flat, kind, params):
    index = flat.convert(kind, **params) if kind != "flat" else flat
    linker = Linker(encoder, mixed_kb(), index, k=2)
    (disease,) = linker.link(["cocaine"], types=[{"Disease"}])
    assert disease[0][0] == "D019970" and all("Disease" in TYPES[cid] for cid, _ in disease)
    (chemical,) = linker.link(["cocaine abuse"], types=[{"Chemical"}])
    assert chemical and all(TYPES[cid] == {"Chemical"} for cid, _ in chemical)
    # The rows returned are the best allowed rows of the whole ranking, as many as asked for.
    queries = encoder.encode(["cocaine", "heart attack", "crack"])
    rows = RowFilter(index.row_mask(lambda cid: "Disease" in TYPES[cid]))
    scores, found = index.search(queries, 3, rows)
    all_scores, all_rows = index.search(queries, len(index))
    for q in range(len(queries)):
        assert (found[q] >= 0).sum() == 3 and rows.mask[found[q]].all()
        allowed = [(s, r) for s, r in zip(all_scores[q], all_rows[q]) if r >= 0 and rows.mask[r]][:3]
        np.testing.assert_allclose(scores[q], [s for s, _ in allowed], rtol=1e-5, atol=1e-6)


def test_a_selector_search_that_comes_back_short_is_searched_again():
    """HNSW/IVF with a selector can miss allowed rows the graph or the probed lists do not reach."""
    import faiss

    vectors = np.eye(8, dtype=np.float32)
    real = faiss.IndexFlatIP(8)
    real.add(vectors)

    class Short:  # a selector search that finds one row only
        ntotal = 8

        def search(self, x, k, params=None):
            scores, found = real.search(x, k, params=params)
            if params is not None:
                scores[:, 1:], found[:, 1:] = -np.inf, -1
            return scores, found

    rows = RowFilter(np.array([True, False] * 4))
    scores, found = filtered_search(Short(), "flat", {}, vectors[[1]], 3, rows)
    assert (found >= 0).sum() == 3 and rows.mask[found[0]].all()
    empty = RowFilter(np.zeros(8, dtype=bool))
    assert (filtered_search(Short(), "flat", {}, vectors[[1]], 3, empty)[1] == -1).all()


def test_ivfpq_probes_every_list_when_its_lists_hold_too_few_allowed_rows():
    from spacy_sapbert.index.kinds import make_faiss_index

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((2000, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index, params = make_faiss_index("ivfpq", 16, vectors, {"nlist": 32, "nprobe": 1})
    index.add(vectors)
    rows = RowFilter(np.arange(2000) % 200 == 0)  # 10 rows, in a few of the 32 lists
    scores, found = filtered_search(index, "ivfpq", params, vectors[:20], 5, rows)
    assert (found >= 0).all() and rows.mask[found].all()


def test_type_sets_are_part_of_the_cache_key_and_one_call_encodes_once(encoder, flat):
    calls = []

    class Counting:
        def __getattr__(self, name):
            return getattr(encoder, name)

        def encode(self, texts, **kwargs):
            calls.append(list(texts))
            return encoder.encode(texts, **kwargs)

    linker = Linker(Counting(), mixed_kb(), flat, k=2)
    results = linker.link(["cocaine", "cocaine", "crack", "cocaine", "cocaine powder"],
                          types=[None, {"Disease"}, {"Disease"}, None, {"Disease"}])
    # one encoder call, each text once, whatever its types; KB names ("cocaine", "crack") take their stored vectors
    assert calls == [["cocaine powder"]]
    assert results[0] == results[3] and results[0][0][0] == "D003042" and results[1][0][0] == "D019970"
    assert linker.cache_info()["size"] == 4
    assert linker.link(["Cocaine"], types=[("Disease",)]) == [results[1]]  # same type set, other spelling
    assert len(calls) == 1 and linker.cache_info()["hits"] == 1


@pytest.mark.parametrize("types, message", [
    (["Disease"], "types of mention 0 must be a collection of type names or None, got 'Disease'"),
    ([set()], "types of mention 0 must be non-empty type names"),
    ([[None]], "types of mention 0 must be non-empty type names"),
    ([None, None], "types must hold one entry per mention \\(1\\)"),
])
def test_bad_types_are_refused(encoder, flat, types, message):
    with pytest.raises(InputError, match=message):
        Linker(encoder, mixed_kb(), flat).link(["cocaine"], types=types)


def test_types_no_concept_has_give_nothing_when_asked_for_directly(encoder, flat, caplog):
    linker = Linker(encoder, mixed_kb(), flat)
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert.linking.type_filter"):
        assert linker.link(["cocaine", "cocaine"], types=[{"Gene"}, None])[0] == []
        linker.link(["crack"], types=[{"Gene"}])
    (record,) = caplog.records  # the row filter is built, and warned about, once
    assert "['Gene']" in record.getMessage() and "'Chemical', 'Disease', 'Phenotype'" in record.getMessage()


# -- the pipe ------------------------------------------------------------------------
def make_nlp(minilm_path, kb_path, patterns, **config) -> spacy.Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": label, "pattern": text} for text, label in patterns])
    nlp.add_pipe("sapbert_linker", config={"model": str(minilm_path), "kb": str(kb_path), "k": 2, **config})
    return nlp


PATTERNS = [("cocaine", "DISEASE"), ("crack", "ENT"), ("hypotensive", "DISEASE"), ("aspirin", "CHEMICAL")]
TEXT = "After cocaine and crack she was hypotensive; aspirin was stopped."


def kb_ids(doc):
    return {e.text: e.kb_id_ for e in doc.ents}


def test_span_labels_pick_the_types_and_the_switch_turns_it_off(minilm_path, kb_path):
    nlp = make_nlp(minilm_path, kb_path, PATTERNS)
    pipe = nlp.get_pipe("sapbert_linker")
    assert pipe.label_to_types == DEFAULT_LABEL_TO_TYPES
    assert kb_ids(nlp(TEXT)) == {"cocaine": "D019970", "crack": "D016578", "hypotensive": "HP:0002615",
                                 "aspirin": "D001241"}  # ENT: not in the map, every concept
    pipe.label_to_types = None  # live: no reload
    assert kb_ids(nlp(TEXT))["cocaine"] == "D003042"
    pipe.label_to_types = {"DISEASE": ["Disease"]}
    assert kb_ids(nlp(TEXT))["hypotensive"] == "D007022"  # a phenotype no longer qualifies
    with pytest.raises(SettingError, match="setting 'label_to_types': expected null .* got {'DISEASE': 'Disease'}"):
        pipe.label_to_types = {"DISEASE": "Disease"}
    off = make_nlp(minilm_path, kb_path, PATTERNS, label_to_types=None)
    assert kb_ids(off(TEXT))["cocaine"] == "D003042" and off.get_pipe("sapbert_linker").label_to_types is None


def test_a_short_form_keeps_its_own_label(minilm_path, kb_path):
    import scispacy.abbreviation  # noqa: F401  (registers abbreviation_detector)

    patterns = [("crack cocaine", "CHEMICAL"), ("CC", "DISEASE")]
    nlp = make_nlp(minilm_path, kb_path, patterns)
    nlp.add_pipe("abbreviation_detector", before="sapbert_linker")
    doc = nlp("Use of crack cocaine (CC) rose; CC was common.")
    links = [(e.text, e.label_, e.kb_id_) for e in doc.ents]
    # both short forms are linked through "crack cocaine", but as DISEASE spans
    assert links == [("crack cocaine", "CHEMICAL", "D016578"), ("CC", "DISEASE", "D019970"),
                     ("CC", "DISEASE", "D019970")]


def test_a_label_whose_types_the_kb_lacks_is_warned_at_load_and_links_unfiltered(minilm_path, kb_path, caplog):
    mapping = {"GENE": ["Gene", "Protein"], "DISEASE": ["Disease"]}
    nlp = make_nlp(minilm_path, kb_path, [("cocaine", "GENE"), ("crack", "DISEASE")], label_to_types=mapping)
    with caplog.at_level(logging.WARNING, logger="spacy_sapbert"):
        nlp.get_pipe("sapbert_linker").initialize()  # nlp.initialize() would empty the ruler
        docs = [nlp("cocaine and crack"), nlp("crack, cocaine")]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, warnings  # once, at load, not per document
    assert "'GENE'" in warnings[0] and "['Gene', 'Protein']" in warnings[0]
    assert "its types: ['Chemical', 'Disease', 'Phenotype']" in warnings[0]
    assert kb_ids(docs[0]) == {"cocaine": "D003042", "crack": "D019970"}  # GENE: every concept


def test_saved_pipelines_keep_the_mapping(minilm_path, kb_path, tmp_path):
    custom = {"DISEASE": ["Disease"]}
    for name, mapping in (("custom", custom), ("off", None), ("default", DEFAULT_LABEL_TO_TYPES)):
        config = {} if name == "default" else {"label_to_types": mapping}
        nlp = make_nlp(minilm_path, kb_path, PATTERNS, **config)
        before = [(e.text, e.kb_id_, e._.kb_ents) for e in nlp(TEXT).ents]
        nlp.to_disk(tmp_path / name)
        loaded = spacy.load(tmp_path / name)
        # spaCy merges a config into the factory's defaults: the default map must not come back
        assert loaded.get_pipe("sapbert_linker").label_to_types == mapping, name
        assert [(e.text, e.kb_id_, e._.kb_ents) for e in loaded(TEXT).ents] == before
    overridden = spacy.load(tmp_path / "custom", config={"components": {"sapbert_linker": {"label_to_types": None}}})
    assert overridden.get_pipe("sapbert_linker").label_to_types is None
    assert kb_ids(overridden(TEXT))["cocaine"] == "D003042"
