"""The embedded default: fp16 weights that match the index, the PQ index, the assembled
pipeline (tiny models), and the default pipeline that ships in the package."""
from __future__ import annotations

import json

import numpy as np
import pytest
import spacy
from safetensors import safe_open

import spacy_sapbert
from spacy_sapbert.encoder import Encoder
from spacy_sapbert.errors import InputError
from spacy_sapbert.index import NameIndex
from training.package import agreement, build_default_pipeline

from linker_fixtures import small_kb, write_small_kb


def test_rounded_weights_save_as_fp16_and_load_back_identical(tiny_bert, tmp_path):
    encoder = Encoder(tiny_bert, pooling="mean")
    with pytest.raises(InputError, match="not exactly representable in float16"):
        encoder.save(tmp_path / "fp16", weights_dtype="float16")
    encoder.round_weights("float16")
    folder = encoder.save(tmp_path / "fp16")
    with safe_open(str(folder / "model.safetensors"), "pt") as handle:
        dtypes = {str(handle.get_tensor(k).dtype) for k in handle.keys()}
    assert "torch.float16" in dtypes and "torch.float32" not in dtypes
    loaded = Encoder(folder)
    assert loaded.weights_dtype == "float16" and loaded.fingerprint == encoder.fingerprint
    texts = ["heart attack", "renal failure"]
    np.testing.assert_array_equal(loaded.encode(texts), encoder.encode(texts))
    again = loaded.save(tmp_path / "again")  # keeps float16 without being asked
    assert (again / "model.safetensors").stat().st_size == (folder / "model.safetensors").stat().st_size


def test_pq_conversion_agrees_with_exact_search(tiny_bert):
    encoder = Encoder(tiny_bert, pooling="mean")
    exact = NameIndex.build(small_kb(), encoder, show_progress=False)
    compact = exact.convert("pq", pq_m=8)
    assert compact.kind == "pq" and compact.names == exact.names and compact.manifest["params"]["pq_m"] == 8
    queries = encoder.encode(["heart attack", "kidney failure", "plaquenil"])
    report = agreement(exact, compact, queries, k=10)
    assert report["queries"] == 3 and 0.0 <= report["top1_agreement"] <= 1.0
    assert report["exact_top1_in_top10"] >= report["top1_agreement"]
    with pytest.raises(InputError, match="compressed codes"):
        compact.convert("flat")


def _blank_ner(folder):
    nlp = spacy.blank("en")
    ner = nlp.add_pipe("ner")
    for label in ("CHEMICAL", "DISEASE"):
        ner.add_label(label)
    nlp.initialize()
    nlp.to_disk(folder)
    return folder


def test_build_default_pipeline_writes_a_loadable_fp16_pipeline(tiny_bert, tmp_path):
    kb_path = write_small_kb(tmp_path)
    report = build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, kb_path, tmp_path / "default",
                                    probe_mentions=["heart attack", "plaquenil"], pq_m=8)
    out = tmp_path / "default"
    assert report["pq_vs_exact"]["queries"] == 2 and report["index_params"]["pq_m"] == 8
    assert (out / "README.md").read_text().count("Licences") == 1
    assert json.loads((out / "build.json").read_text())["kb"] == "small"
    nlp = spacy.load(out)
    assert nlp.pipe_names == ["ner", "abbreviation_entities", "sapbert_linker"]
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.index.kind == "pq" and linker.encoder.weights_dtype == "float16"
    from spacy_sapbert.index import IndexMismatchError
    from spacy_sapbert.kb import Concept, KnowledgeBase
    other = KnowledgeBase(list(small_kb()) + [Concept("D1", "extra name", [], [], None)], name="other")
    with pytest.raises(IndexMismatchError, match="KB"):
        linker.use(linker.encoder, other, linker.index)  # an index is only used with its own KB
    result = linker.linker.link(["heart attack"])[0]  # PQ over a tiny random model: approximate
    assert result and all(cid in linker.kb for cid, _ in result) and len(linker.index) == report["index_rows"]
    with pytest.raises(InputError, match="not a NER pipeline"):
        build_default_pipeline(_blank_tagger(tmp_path / "tagger"), tiny_bert, kb_path, tmp_path / "x")


def _blank_tagger(folder):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(folder)
    return folder


def test_embedded_default_links_offline():
    nlp = spacy_sapbert.load()
    doc = nlp("Hydroxychloroquine (HCQ) was given for lupus; HCQ retinopathy followed a myocardial infarction.")
    found = {(e.text, e.label_): e.kb_id_ for e in doc.ents}
    assert found[("Hydroxychloroquine", "CHEMICAL")].startswith("D006886")
    assert found[("HCQ", "CHEMICAL")].startswith("D006886")  # through the abbreviation's long form
    assert found[("myocardial infarction", "DISEASE")].startswith("D009203")
    # synonyms the KB spells differently: brand name, lay term, abbreviation
    links = nlp.get_pipe("sapbert_linker").linker.link(["Plaquenil", "heart attack", "T2DM", "high blood pressure"])
    assert [candidates[0][0].split("|")[0] for candidates in links] == ["D006886", "D009203", "D003924", "D006973"]
    blank = spacy.blank("en")
    linker = blank.add_pipe("sapbert_linker")  # no config: the embedded encoder, KB and index
    assert linker.index.kind == "pq" and linker.kb.name == "mesh-medic"
