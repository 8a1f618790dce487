"""The PubTator reader (training.corpora) on real NCBI disease and BC5CDR documents and on bad input."""
from __future__ import annotations

from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from training.corpora import iter_mentions, normalize_id, read_pubtator, split_ids


def test_ncbi_documents(fixtures: Path) -> None:
    docs = list(read_pubtator(fixtures / "sources/ncbi-disease.sample.PubTator.txt"))
    assert [d.pmid for d in docs] == ["9674906", "7574457"]
    first = docs[0]
    assert first.title.startswith("Schwartz-Jampel syndrome type 2") and first.abstract.startswith("Recent studies")
    for mention in first.mentions:  # offsets index title + " " + abstract
        assert first.text[mention.start:mention.end] == mention.text
    sjs = first.mentions[0]
    assert (sjs.start, sjs.end, sjs.type, sjs.ids) == (0, 31, "SpecificDisease", ("C537502",))
    skeletal = next(m for m in first.mentions if m.text == "skeletal dysplasia")
    assert skeletal.ids == ("C535662",)  # written MESH:C535662 in the test set; MeSH IDs are bare
    composite = next(m for m in docs[1].mentions if m.is_composite)
    assert composite.ids == ("D020279", "D035583") and composite.type == "DiseaseClass"
    assert docs[1].mentions[0].ids == ("OMIM:312080",)


def test_bc5cdr_document(fixtures: Path) -> None:
    (doc,) = list(read_pubtator(fixtures / "sources/bc5cdr.sample.PubTator.txt"))
    composite = next(m for m in doc.mentions if m.text == "cardiovascular, and respiratory depression")
    assert composite.ids == ("D002318", "D012131") and composite.is_composite  # 7th column (parts) ignored
    assert {m.type for m in doc.mentions} == {"Chemical", "Disease"}
    assert len(list(iter_mentions([doc]))) == len(doc.mentions)


def test_split_and_normalize_ids() -> None:
    assert split_ids("D002318|D012131") == ("D002318", "D012131")
    assert split_ids("D007153+D040181") == ("D007153", "D040181")
    assert split_ids("OMIM:312080+OMIM:312920") == ("OMIM:312080", "OMIM:312920")
    assert split_ids("-1") == () and split_ids("D012640|-1") == ()
    assert normalize_id("MESH:D012640") == "D012640" and normalize_id("D012640") == "D012640"
    with pytest.raises(InputError, match="unknown concept ID"):
        normalize_id("FOO:1", "f.txt", 3)


def test_mentions_without_id_are_kept_but_flagged(tmp_path: Path) -> None:
    path = tmp_path / "doc.txt"
    path.write_text("1|t|Excitotoxicity in rats.\n1|a|No abstract.\n1\t0\t14\tExcitotoxicity\tDisease\t-1\n"
                    "1\tCID\tD000001\tD000002\n\n", encoding="utf-8")
    (doc,) = list(read_pubtator(path))
    assert not doc.mentions[0].has_id and list(iter_mentions([doc], with_id_only=True)) == []


@pytest.mark.parametrize("body, line, fragment", [
    ("1|t|Heart attack.\n1|a|Text.\n1\t0\t5\tHeart\tDisease\n", 3, "at least 6"),
    ("1|t|Heart attack.\n1|a|Text.\n1\tzero\t5\tHeart\tDisease\tD1\n", 3, "offsets must be integers"),
    ("1|t|Heart attack.\n1|a|Text.\n1\t6\t12\tHeart\tDisease\tD006331\n", 3, "does not match the text"),
    ("1|t|Heart attack.\n1|a|Text.\n1\t5\t5\tHeart\tDisease\tD006331\n", 3, "bad span"),
    ("1|t|Heart attack.\n1|a|Text.\n2\t0\t5\tHeart\tDisease\tD006331\n", 3, "inside document 1"),
    ("1|t|Heart attack.\n1|a|Text.\n1\t0\t5\tHeart\tDisease\tXYZ:1\n", 3, "unknown concept ID"),
    ("1\t0\t5\tHeart\tDisease\tD006331\n", 1, "before any title"),
    ("1|t|Heart attack.\n2|a|Text.\n", 2, "without its title"),
])
def test_bad_pubtator_lines(tmp_path: Path, body: str, line: int, fragment: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_pubtator(path))
    assert err.value.line == line and err.value.path == str(path)


def test_bad_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="empty"):
        list(read_pubtator(empty))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("1|t|Sjögren syndrome.\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8") as err:
        list(read_pubtator(latin))
    assert err.value.line == 1
    with pytest.raises(InputError, match="not found"):
        list(read_pubtator(tmp_path / "missing.txt"))


@pytest.mark.parametrize("name, documents, mentions", [
    ("ncbi-disease/NCBItrainset_corpus.txt", 593, 5145),
    ("ncbi-disease/NCBIdevelopset_corpus.txt", 100, 787),
    ("ncbi-disease/NCBItestset_corpus.txt", 100, 960),
    ("bc5cdr/CDR_TrainingSet.PubTator.txt", 500, None),
    ("bc5cdr/CDR_DevelopmentSet.PubTator.txt", 500, None),
])
def test_whole_mirror_corpora_parse_with_text_checks(mirror: Path, name: str, documents: int, mentions) -> None:
    docs = list(read_pubtator(mirror / "corpora" / name))
    assert len(docs) == documents
    if mentions is not None:  # the counts the NCBI disease corpus paper gives
        assert sum(len(d.mentions) for d in docs) == mentions
