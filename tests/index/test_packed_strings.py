"""A saved index's names read as one buffer: the same strings as json.loads gives, and a fallback for any
file the index writer would not have written."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from spacy_sapbert.index.packed_strings import PackedStrings, json_string_list

NAMES = ["heart attack", "naïve α-synuclein", "", "a", "x" * 300, "smörgåsbord 2", "β"]


def test_the_index_writers_json_is_packed_and_reads_back_every_name():
    raw = json.dumps(NAMES, ensure_ascii=False).encode("utf-8")
    packed = json_string_list(raw)
    assert isinstance(packed, PackedStrings)
    assert packed == NAMES and list(packed) == NAMES and len(packed) == len(NAMES)
    assert [packed[i] for i in range(len(NAMES))] == NAMES and packed[-1] == "β"
    assert packed[1:3] == NAMES[1:3] and packed[::-2] == NAMES[::-2]
    assert packed != NAMES[:-1] and packed != [*NAMES[:-1], "γ"]
    with pytest.raises(IndexError):
        packed[len(NAMES)]
    assert json_string_list(b"[]") == [] and json_string_list(b' ["one"]\n') == ["one"]


@pytest.mark.parametrize("value, raw", [
    (['say "hi"', "back\\slash", "tab\there"], None),                 # escapes: a backslash in the file
    (["caf\u00e9", "\u03b1"], json.dumps(["caf\u00e9", "\u03b1"]).encode()),  # ensure_ascii: \\u escapes
    (["a", "b"], b'["a","b"]'),                                           # other separators
    (["a", "b"], b'[\n  "a",\n  "b"\n]'),                                 # indented
])
def test_files_the_writer_would_not_make_are_read_by_json(value, raw):
    raw = raw if raw is not None else json.dumps(value, ensure_ascii=False).encode("utf-8")
    read = json_string_list(raw)
    assert not isinstance(read, PackedStrings) and read == value


def test_a_bad_table_is_still_a_json_error():
    with pytest.raises(ValueError):
        json_string_list(b'["a", "b"')


def test_a_saved_index_keeps_its_names_packed_and_saves_them_again_byte_for_byte(tmp_path):
    from spacy_sapbert.index.kinds import faiss_module
    from spacy_sapbert.index.name_index import NameIndex

    names = ["heart attack", "myocardial infarction", "gout", "naïve"]
    vectors = np.eye(4, 8, dtype=np.float32)
    index = faiss_module().IndexFlatIP(8)
    index.add(vectors)
    manifest = {"format_version": 1, "kind": "flat", "params": {}, "dim": 8, "rows": 4, "names": 4, "concepts": 4,
                "model_fingerprint": "m", "kb_fingerprint": "k", "kb_name": "tiny"}
    NameIndex(index, names, ["C1", "C1", "C2", "C3"], manifest).save(tmp_path / "a")
    loaded = NameIndex.load(tmp_path / "a")
    assert loaded.names == names and loaded.concept_ids == ["C1", "C1", "C2", "C3"]
    assert isinstance(loaded._tables[0], PackedStrings)
    assert loaded.search(vectors[2:3], k=1, texts=["gout"])[1].tolist() == [[2]]
    loaded.save(tmp_path / "b")
    for table in ("names.json.gz", "concepts.json.gz"):
        assert gzip.decompress((tmp_path / "b" / table).read_bytes()) == \
            gzip.decompress((tmp_path / "a" / table).read_bytes())
