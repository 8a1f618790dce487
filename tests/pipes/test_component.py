"""The sapbert_linker spaCy pipe (tiny random BERT): config, batching, extensions,
abbreviations, serialisation and bad input."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.encoding.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import IndexMismatchError, NameIndex
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

from tests.linker_fixtures import small_kb, write_small_kb

PATTERNS = ["plaquenil", "hydroxychloroquine", "hcq", "heart attack", "renal failure", "kidney failure", "kf",
            "ms", "breast tumour", "diabetes"]
TEXTS = [
    "Plaquenil (hydroxychloroquine) was stopped after a heart attack.",
    "Renal failure and kidney failure (KF) followed; KF persisted.",
    "",
    "No entity here at all.",
    "MS or a breast tumour? Diabetes. Heart attack again, then renal failure.",
]


def make_nlp(model, kb_path, *, ruler: bool = True, abbreviations: bool = False, **config) -> spacy.Language:
    nlp = spacy.blank("en")
    if ruler:
        entity_ruler = nlp.add_pipe("entity_ruler")
        entity_ruler.add_patterns([{"label": "ENT", "pattern": [{"LOWER": w} for w in p.split()]} for p in PATTERNS])
    if abbreviations:
        import scispacy.abbreviation  # noqa: F401  (registers abbreviation_detector)

        nlp.add_pipe("abbreviation_detector")
    nlp.add_pipe("sapbert_linker", config={"model": str(model), "kb": str(kb_path), "pooling": "mean", **config})
    return nlp


def links(doc, extension="kb_ents"):
    return [(e.text, e.kb_id_, e._.get(extension)) for e in doc.ents]


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return write_small_kb(tmp_path_factory.mktemp("kb"))


@pytest.fixture(scope="module")
def nlp(tiny_bert, kb_path):
    return make_nlp(tiny_bert, kb_path)


def test_add_pipe_links_entities_immediately(nlp):
    doc = nlp("Heart attack after Plaquenil; MS.")
    assert [e.text for e in doc.ents] == ["Heart attack", "Plaquenil", "MS"]
    for ent in doc.ents:
        assert 1 <= len(ent._.kb_ents) <= 5
        assert all(isinstance(c, str) and isinstance(s, float) for c, s in ent._.kb_ents)
        assert ent.kb_id_ == ent._.kb_ents[0][0]
    assert doc.ents[0].kb_id_ == "D009203" and doc.ents[0]._.kb_ents[0][1] == pytest.approx(1.0, abs=1e-5)
    assert doc.ents[1].kb_id_ == "D006886"
    assert {c for c, _ in doc.ents[2]._.kb_ents[:2]} == {"D009103", "D009081"}
    assert nlp.get_pipe("sapbert_linker").is_ready


def test_factory_found_through_entry_point_in_a_fresh_interpreter(tiny_bert, kb_path):
    script = textwrap.dedent(f"""
        import json, sys, spacy
        nlp = spacy.blank("en")
        nlp.add_pipe("entity_ruler").add_patterns([{{"label": "X", "pattern": "Plaquenil"}}])
        nlp.add_pipe("sapbert_linker", config={{"model": {str(tiny_bert)!r}, "kb": {str(kb_path)!r},
                                                "pooling": "mean"}})
        doc = nlp("Plaquenil")
        assert "spacy_sapbert.pipes.linker" in sys.modules
        print(json.dumps([doc.ents[0].kb_id_, doc.ents[0]._.kb_ents[0][0]]))
    """)
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["D006886", "D006886"]


def test_config_options(tiny_bert, kb_path):
    nlp = make_nlp(tiny_bert, kb_path, k=3, max_entities_per_mention=1, threshold=0.999, cache_size=0,
                   max_length=8, index_kind="hnsw", encode_batch_size=2, device="cpu")
    linker = nlp.get_pipe("sapbert_linker")
    doc = nlp("heart attack and diabetes")
    heart, diabetes = doc.ents
    assert heart._.kb_ents == [("D009203", pytest.approx(1.0, abs=1e-5))]
    assert diabetes._.kb_ents == [] and diabetes.kb_id_ == ""  # nothing passes the threshold
    assert linker.linker.k == 3 and linker.index.kind == "hnsw"
    assert linker.encoder.max_length == 8 and linker.encoder.batch_size == 2 and linker.encoder.device == "cpu"
    assert linker.linker.cache_info()["size"] == 0
    no_ids = make_nlp(tiny_bert, kb_path, set_kb_id=False)
    doc = no_ids("heart attack")
    assert doc.ents[0].kb_id_ == "" and doc.ents[0]._.kb_ents[0][0] == "D009203"
    assert len(doc.ents[0]._.kb_ents) == 5
    pipe = no_ids.get_pipe("sapbert_linker")  # settings changed on a built pipe reach its linker
    pipe.max_entities_per_mention, pipe.k = 2, 4
    assert len(no_ids("heart attack").ents[0]._.kb_ents) == 2 and pipe.linker.k == 4
    pipe.threshold = 0.9999
    assert [c for c, _ in no_ids("heart attack").ents[0]._.kb_ents] == ["D009203"]
    with pytest.raises(InputError, match="index_kind"):
        make_nlp(tiny_bert, kb_path, index_kind="lsh")
    with pytest.raises(InputError, match="extension"):
        make_nlp(tiny_bert, kb_path, extension="not an identifier")


def test_spans_key_links_a_span_group(tiny_bert, kb_path):
    nlp = make_nlp(tiny_bert, kb_path, ruler=False, spans_key="sc")
    doc = nlp.make_doc("Plaquenil after a heart attack")
    doc.spans["sc"] = [Span(doc, 0, 1, label="CHEM"), Span(doc, 3, 5, label="DIS")]
    doc = nlp.get_pipe("sapbert_linker")(doc)
    assert [s.kb_id_ for s in doc.spans["sc"]] == ["D006886", "D009203"]
    assert doc.spans["sc"][1]._.kb_ents[0][0] == "D009203"
    assert doc.ents == ()
    empty = nlp.get_pipe("sapbert_linker")(nlp.make_doc("no span group"))
    assert "sc" not in empty.spans


def test_two_linkers_with_two_kbs_and_two_extensions(tiny_bert, kb_path, tmp_path):
    other = KnowledgeBase([Concept("HP:0001658", "Myocardial infarction", ["heart attack"]),
                           Concept("HP:0000083", "Renal insufficiency", ["renal failure"])], name="hp")
    other_path = other.to_jsonl(tmp_path / "hp.jsonl")
    nlp = make_nlp(tiny_bert, kb_path, extension="medic_ents")
    nlp.add_pipe("sapbert_linker", name="hp_linker", config={
        "model": str(tiny_bert), "kb": str(other_path), "pooling": "mean", "extension": "hp_ents", "set_kb_id": False})
    doc = nlp("A heart attack with renal failure.")
    assert [e._.medic_ents[0][0] for e in doc.ents] == ["D009203", "D051437"]
    assert [e._.hp_ents[0][0] for e in doc.ents] == ["HP:0001658", "HP:0000083"]
    assert [e.kb_id_ for e in doc.ents] == ["D009203", "D051437"]  # the second linker leaves kb_id alone


def test_pipe_batches_across_documents_and_equals_call(tiny_bert, kb_path):
    batched_nlp = make_nlp(tiny_bert, kb_path, cache_size=0)
    single_nlp = make_nlp(tiny_bert, kb_path, cache_size=0)
    linker = batched_nlp.get_pipe("sapbert_linker")
    calls = []
    encode = linker.encoder.encode
    linker.encoder.encode = lambda texts, **kw: calls.append(list(texts)) or encode(texts, **kw)
    batched = list(batched_nlp.pipe(TEXTS, batch_size=3))
    single = [single_nlp(t) for t in TEXTS]
    assert len(calls) == 2  # one encoder call per batch of 3 documents, not one per document
    assert len(calls[1]) == len(set(calls[1]))  # repeated mentions encoded once
    for a, b in zip(batched, single):
        assert [(t, i) for t, i, _ in links(a)] == [(t, i) for t, i, _ in links(b)]
        for (_, _, ca), (_, _, cb) in zip(links(a), links(b)):
            assert [c for c, _ in ca] == [c for c, _ in cb]
            assert [s for _, s in ca] == pytest.approx([s for _, s in cb], abs=1e-5)


def test_predict_then_set_annotations_is_spacys_contract(nlp):
    pipe = nlp.get_pipe("sapbert_linker")
    docs = [nlp.make_doc(text) for text in TEXTS[:2]]
    for doc in docs:
        doc.ents = [Span(doc, 0, 1, label="ENT")]
    predictions = pipe.predict(docs)
    assert [len(p) for p in predictions] == [1, 1] and all(d.ents[0]._.kb_ents == [] for d in docs)
    pipe.set_annotations(docs, predictions)
    assert [d.ents[0]._.kb_ents for d in docs] == [list(p[0]) for p in predictions]
    assert docs[0].ents[0].kb_id_ == "D006886"
    with pytest.raises(ValueError, match="1 predictions for 2 documents"):
        pipe.set_annotations(docs, predictions[:1])


def test_abbreviations_are_linked_through_their_long_form(tiny_bert, kb_path):
    text = "Renal failure and kidney failure (KF) followed; KF persisted."
    resolved = make_nlp(tiny_bert, kb_path, abbreviations=True)(text)
    by_text = {}
    for ent in resolved.ents:
        by_text.setdefault(ent.text, []).append(ent._.kb_ents)
    assert by_text["KF"][0] == by_text["KF"][1] == by_text["kidney failure"][0]
    assert resolved.ents[-1].kb_id_ == "D051437"
    raw = make_nlp(tiny_bert, kb_path, abbreviations=True, resolve_abbreviations=False)(text)
    assert [e._.kb_ents for e in raw.ents if e.text == "KF"][0] != by_text["kidney failure"][0]
    serializable = make_nlp(tiny_bert, kb_path, abbreviations=True)
    serializable.get_pipe("abbreviation_detector").make_serializable = True  # dicts instead of spans
    assert [e._.kb_ents for e in serializable(text).ents] == [e._.kb_ents for e in resolved.ents]


def test_to_disk_and_spacy_load_round_trip_bit_identical(tiny_bert, tmp_path):
    model_copy = shutil.copytree(tiny_bert, tmp_path / "model")
    kb_file = write_small_kb(tmp_path, "medic-small.jsonl.gz")
    nlp = make_nlp(model_copy, kb_file, abbreviations=True)
    before = [links(doc) for doc in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(model_copy)  # the saved pipeline must not need the original model or KB
    kb_file.unlink()
    loaded = spacy.load(tmp_path / "pipeline")
    after = [links(doc) for doc in loaded.pipe(TEXTS)]
    assert after == before  # same IDs and exactly the same float scores
    original, reloaded = nlp.get_pipe("sapbert_linker"), loaded.get_pipe("sapbert_linker")
    assert reloaded.kb.name == "medic-small" and reloaded.kb.fingerprint() == original.kb.fingerprint()
    assert reloaded.encoder.fingerprint == original.encoder.fingerprint
    assert reloaded.index.manifest == original.index.manifest
    saved = tmp_path / "pipeline" / "sapbert_linker"
    assert sorted(p.name for p in saved.iterdir()) == ["cfg.json", "encoder", "index", "kb.jsonl.gz"]
    assert not list(saved.rglob("*.bin")) and not list(saved.rglob("*.pkl"))
    assert any(r.startswith("spacy-sapbert") for r in loaded.meta["requirements"])
    reloaded.initialize()  # a loaded linker stays as it is (the configured paths are gone)
    assert [links(d) for d in loaded.pipe(TEXTS)] == before


def test_to_disk_and_from_disk_follow_exclude_and_write_only_what_is_read(nlp, tmp_path):
    pipe = nlp.get_pipe("sapbert_linker")
    pipe.to_disk(tmp_path / "all")
    kb_file = tmp_path / "all" / "kb.jsonl.gz"
    assert json.loads((tmp_path / "all" / "cfg.json").read_text()) == {
        "format_version": 1, "kb_name": "small",
        "kb_file": {"sha256": hashlib.sha256(kb_file.read_bytes()).hexdigest(), "fingerprint": pipe.kb.fingerprint()}}
    pipe.to_disk(tmp_path / "no-encoder", exclude=["encoder", "vocab"])
    assert sorted(p.name for p in (tmp_path / "no-encoder").iterdir()) == ["cfg.json", "index", "kb.jsonl.gz"]

    fresh = make_nlp(pipe.encoder.source, tmp_path / "unused.jsonl").get_pipe("sapbert_linker")
    fresh.from_disk(tmp_path / "all", exclude=["index"])  # the index is built again from the saved KB
    assert fresh.kb.name == "small" and fresh.index.names == pipe.index.names
    loaded = fresh.linker
    fresh.from_disk(tmp_path / "no-encoder", exclude=["encoder"])  # the loaded encoder is kept
    assert fresh.encoder is loaded.encoder and fresh.kb is not loaded.kb
    with pytest.raises(InputError, match="not a saved sapbert_linker component: no cfg.json"):
        fresh.from_disk(tmp_path / "nothing")


def test_the_recorded_kb_fingerprint_is_used_only_for_the_bytes_it_was_recorded_for(nlp, tmp_path, monkeypatch):
    """Loading a saved pipe takes the KB's fingerprint from cfg.json instead of hashing every concept,
    but only while kb.jsonl.gz holds the bytes it was recorded for: a KB edited after saving is
    hashed again, so a stale index is still refused."""
    pipe = nlp.get_pipe("sapbert_linker")
    pipe.to_disk(tmp_path / "saved")
    hashed = []
    real = KnowledgeBase.fingerprint

    def counting(kb):
        hashed.append(kb._fingerprint is None)
        return real(kb)

    monkeypatch.setattr(KnowledgeBase, "fingerprint", counting)
    fresh = make_nlp(pipe.encoder.source, tmp_path / "unused.jsonl").get_pipe("sapbert_linker")
    fresh.from_disk(tmp_path / "saved")
    assert fresh.kb.fingerprint() == pipe.kb._fingerprint and not any(hashed)  # nothing hashed
    assert list(fresh.kb) == list(pipe.kb) and all(fresh.kb.get(i) == pipe.kb.get(i) for c in pipe.kb for i in c.ids)
    cfg_path = tmp_path / "saved" / "cfg.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["kb_file"]["fingerprint"] = "0" * 16  # recorded for these bytes: believed, and then the index disagrees
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(IndexMismatchError, match="kb_fingerprint"):
        fresh.from_disk(tmp_path / "saved")
    edited = KnowledgeBase(list(pipe.kb) + [Concept("X:9", "zebra fever")], name="small")
    edited.to_jsonl(tmp_path / "saved" / "kb.jsonl.gz")  # other bytes: the record no longer applies
    cfg["kb_file"]["fingerprint"] = pipe.kb.fingerprint()
    cfg_path.write_text(json.dumps(cfg))
    hashed.clear()
    with pytest.raises(IndexMismatchError, match="kb_fingerprint"):
        fresh.from_disk(tmp_path / "saved")
    assert hashed and hashed[0]  # worked out from the concepts


def test_a_component_saved_by_an_earlier_version_loads(nlp, tmp_path):
    """cfg.json of earlier versions (the shipped default's among them) held settings and
    fingerprints that were never read back: they are still accepted, and still not read."""
    pipe = nlp.get_pipe("sapbert_linker")
    pipe.to_disk(tmp_path / "old")
    (tmp_path / "old" / "cfg.json").write_text(json.dumps({
        "format_version": 1, "kb_name": "medic-old", "model": "models/gone", "kb": "kbs/gone.jsonl.gz",
        "index_kind": "pq", "encoder_settings": {"pooling": "mean", "max_length": 25},
        "model_fingerprint": "0" * 16, "kb_fingerprint": "0" * 16}))
    loaded = make_nlp(pipe.encoder.source, tmp_path / "unused.jsonl").get_pipe("sapbert_linker")
    loaded.from_disk(tmp_path / "old")
    assert loaded.kb.name == "medic-old" and loaded.linker.link(["heart attack"])[0][0][0] == "D009203"


def test_prebuilt_index_is_used_and_checked(tiny_bert, kb_path, tmp_path):
    encoder = Encoder(tiny_bert, pooling="mean")
    folder = NameIndex.build(small_kb(), encoder, show_progress=False).save(tmp_path / "index")
    nlp = make_nlp(tiny_bert, kb_path, index=str(folder))
    nlp.get_pipe("sapbert_linker").initialize()  # (nlp.initialize() would also reset the entity ruler)
    assert nlp.get_pipe("sapbert_linker").index.manifest == json.loads((folder / "manifest.json").read_text())
    assert nlp("heart attack").ents[0].kb_id_ == "D009203"
    other_kb = KnowledgeBase([Concept("X:1", "heart attack")], name="other").to_jsonl(tmp_path / "other.jsonl")
    with pytest.raises(IndexMismatchError, match="KB"):
        make_nlp(tiny_bert, other_kb, index=str(folder))("heart attack")


def test_bad_input_gives_defined_results(nlp):
    linker = nlp.get_pipe("sapbert_linker")
    assert nlp("").ents == ()
    assert nlp("Nothing to link here.").ents == ()
    doc = nlp.make_doc("... ! \x07 心肌梗死 heart\u200battack")
    doc.ents = [Span(doc, i, i + 1, label="ENT") for i in range(len(doc))]
    doc = linker(doc)
    by_text = {e.text: e for e in doc.ents}
    assert set(by_text) == {"...", "!", "\x07", "心肌梗死", "heart\u200battack"}
    for text in ("...", "!", "\x07"):  # nothing left after normalisation: no candidates, no kb_id
        assert by_text[text]._.kb_ents == [] and by_text[text].kb_id_ == ""
    assert by_text["心肌梗死"]._.kb_ents  # non-Latin: encoded (to [UNK]s here), linked to something
    assert by_text["heart\u200battack"].kb_id_ == "D009203"  # a zero-width space acts as a space
    long_doc = nlp("heart attack " * 300)
    assert all(e._.kb_ents[0][0] == "D009203" for e in long_doc.ents)


def test_missing_kb_bad_kb_and_empty_kb_are_reported(tiny_bert, tmp_path):
    no_kb = spacy.blank("en")
    no_kb.add_pipe("sapbert_linker", config={"model": str(tiny_bert)})
    assert no_kb("no entities, no KB needed").ents == ()
    doc = no_kb.make_doc("heart attack")
    doc.ents = [Span(doc, 0, 2, label="ENT")]
    with pytest.raises(InputError, match="no knowledge base configured"):
        no_kb.get_pipe("sapbert_linker")(doc)
    with pytest.raises(InputError, match="missing.jsonl: knowledge base file not found"):
        make_nlp(tiny_bert, tmp_path / "missing.jsonl").initialize()
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"concept_id": "D1", "canonical_name": "a"}\n{oops\n')
    with pytest.raises(InputError, match="broken.jsonl:2: invalid JSON"):
        make_nlp(tiny_bert, broken).initialize()
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"concept_id": "D1", "canonical_name": "--"}\n')
    with pytest.raises(InputError, match="no names to index"):
        make_nlp(tiny_bert, empty).initialize()
    with pytest.raises(InputError, match="model folder not found"):
        make_nlp(tmp_path / "no-model", broken).initialize()


def test_split_composites_links_each_concept_of_a_coordinated_span(tiny_bert, tmp_path):
    kb = KnowledgeBase([Concept("D1", "Renal toxicity", [], ["Disease"]),
                        Concept("D2", "Hepatic toxicity", [], ["Disease"]),
                        Concept("D3", "Toxicity", [], ["Disease"])], name="tox").to_jsonl(tmp_path / "tox.jsonl")
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([
        {"label": "DISEASE", "pattern": "renal or hepatic toxicity"}, {"label": "DISEASE", "pattern": "toxicity"}])
    pipe = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(kb), "pooling": "mean"})
    text = "Watch for renal or hepatic toxicity and toxicity."
    assert [e._.kb_ents_parts for e in nlp(text).ents] == [[], []]  # off by default
    pipe.split_composites = True
    doc = nlp(text)
    coordinated, plain = doc.ents
    assert [(part, found[0][0]) for part, found in coordinated._.kb_ents_parts] == [
        ("renal toxicity", "D1"), ("hepatic toxicity", "D2")]
    assert coordinated._.kb_ents and plain._.kb_ents_parts == []
    from spacy_sapbert.annotate.record import doc_to_record

    record = doc_to_record(doc, [pipe])["entities"]
    assert [(p["text"], p["concept_id"], p["concept_name"]) for p in record[0]["parts"]] == [
        ("renal toxicity", "D1", "Renal toxicity"), ("hepatic toxicity", "D2", "Hepatic toxicity")]
    assert "parts" not in record[1]
    batched = next(nlp.pipe([text], batch_size=4)).ents[0]._.kb_ents_parts
    assert [p for p, _ in batched] == ["renal toxicity", "hepatic toxicity"]
    predictions = pipe.predict([nlp.make_doc(text)])
    assert predictions[0] == []  # a doc without entities: nothing to link

    pipe.extension = "tox_ents"  # another extension: its parts go to tox_ents_parts
    doc = nlp(text)
    assert [p for p, _ in doc.ents[0]._.tox_ents_parts] == ["renal toxicity", "hepatic toxicity"]
    pipe.configure(extension="kb_ents", spans_key="sc")  # a span group, as doc.ents
    doc = nlp.make_doc(text)
    doc.spans["sc"] = [Span(doc, 2, 6, label="DISEASE")]  # "renal or hepatic toxicity"
    pipe(doc)
    assert [p for p, _ in doc.spans["sc"][0]._.kb_ents_parts] == ["renal toxicity", "hepatic toxicity"]


def test_label_thresholds_replace_the_threshold_for_their_labels_only(tiny_bert, kb_path):
    nlp = make_nlp(tiny_bert, kb_path, threshold=None, cache_size=0)
    pipe = nlp.get_pipe("sapbert_linker")
    before = [links(nlp(text)) for text in TEXTS]
    scores = sorted(s for doc in before for _, _, found in doc for _, s in found)
    cut = scores[len(scores) // 2]
    pipe.label_thresholds = {"OTHER": 0.99}  # another label's: nothing changes
    assert [[(t, i, [c for c, _ in f]) for t, i, f in links(nlp(text))] for text in TEXTS] == \
        [[(t, i, [c for c, _ in f]) for t, i, f in doc] for doc in before]
    pipe.label_thresholds = {"ENT": cut}
    for text, old in zip(TEXTS, before):
        for (_, _, found), (_, _, was) in zip(links(nlp(text)), old):
            assert [c for c, _ in found] == [c for c, s in was if s >= cut]
    pipe.configure(threshold=0.99, label_thresholds={"ENT": cut})  # lower than the threshold: its own still rules
    assert [c for c, _ in links(nlp(TEXTS[0]))[0][2]] == [c for c, s in before[0][0][2] if s >= cut]
    assert nlp.config["components"]["sapbert_linker"]["label_thresholds"] == {"ENT": cut}
