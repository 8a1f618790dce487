"""The PubTator corpus reader (spacy_sapbert.training.corpora) on real NCBI disease and BC5CDR documents and on
bad input, and its gold IDs in the KBs' spelling (the grammar of spacy_sapbert.kb.ids)."""
from __future__ import annotations

from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.kb.ids import normalize_curie
from spacy_sapbert.training.corpora import Document, Mention, iter_mentions, pubtator_text, read_pubtator, split_ids


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


def test_split_ids() -> None:
    assert split_ids("D002318|D012131") == ("D002318", "D012131")
    assert split_ids("D007153+D040181") == ("D007153", "D040181")
    assert split_ids("OMIM:312080+OMIM:312920") == ("OMIM:312080", "OMIM:312920")
    assert split_ids("-1") == () and split_ids("D012640|-1") == ()
    assert split_ids("D006509,D015658") == ("D006509", "D015658")  # BioRED: a mention of two concepts
    assert split_ids("-") == ()  # BioRED's "no ID"
    assert split_ids("MESH:D012640") == ("D012640",) and split_ids(" D012640 ") == ("D012640",)
    with pytest.raises(InputError, match="unknown identifier") as err:
        split_ids("FOO:1", "f.txt", 3)
    assert (err.value.path, err.value.line, err.value.field) == ("f.txt", 3, "ids")


@pytest.mark.parametrize("raw, canonical", [
    ("CUI:C0011849", "UMLS:C0011849"),  # was kept as CUI:, which no KB writes
    ("MSH:D012174", "D012174"),  # was refused as an unknown prefix
    ("MESH:D012174", "D012174"),
    ("ORPHA:558", "Orphanet:558"),  # was refused as an unknown prefix
    ("ORDO:558", "Orphanet:558"),  # was kept as ORDO:
    ("DO:DOID:0060395", "DOID:0060395"),  # was kept as DO:DOID:
])
def test_gold_ids_are_spelled_as_the_kbs_spell_them(tmp_path: Path, raw: str, canonical: str) -> None:
    """One grammar: the corpus reader, the KB builders and KnowledgeBase.resolve give one answer."""
    path = tmp_path / "doc.txt"
    path.write_text(f"1|t|Heart attack.\n1|a|Text.\n1\t0\t12\tHeart attack\tDisease\t{raw}|D009203\n\n",
                    encoding="utf-8")
    (doc,) = list(read_pubtator(path))
    assert doc.mentions[0].ids == (canonical, "D009203") and normalize_curie(raw) == canonical
    kb = KnowledgeBase([Concept(canonical, "heart attack")])
    assert canonical in kb and kb.resolve(raw) == kb[canonical]


@pytest.mark.parametrize("raw, fragment", [
    ("C0011849", "unknown identifier"),  # a bare CUI is not MeSH (was read as a MeSH ID)
    ("D0123456", "unknown identifier"),  # MeSH IDs have 6 or 9 digits (7 were accepted)
    ("MESH:X12", "malformed MESH"),  # a known prefix with a broken local part (was kept as X12)
    ("SNOMEDCT_US:22298006", "unknown identifier"),
])
def test_ids_no_kb_can_hold_stop_at_their_line(tmp_path: Path, raw: str, fragment: str) -> None:
    path = tmp_path / "doc.txt"
    path.write_text(f"1|t|Heart attack.\n1|a|Text.\n1\t0\t5\tHeart\tDisease\t{raw}\n\n", encoding="utf-8")
    with pytest.raises(InputError, match=fragment) as err:
        list(read_pubtator(path))
    assert (err.value.line, err.value.field) == (3, "ids")


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
    ("1|t|Heart attack.\n1|a|Text.\n2\t0\t5\tHeart\tDisease\tD006331\n", 3, "annotation line of PMID 1"),
    ("1|t|Heart attack.\n1|a|Text.\n1\t0\t5\tHeart\tDisease\tXYZ:1\n", 3, "unknown identifier"),
    ("1\t0\t5\tHeart\tDisease\tD006331\n", 1, "starts with a 'PMID"),
    ("1|t|Heart attack.\n2|a|Text.\n", 2, "abstract line of PMID 2 inside the document of PMID 1"),
    ("1|t|Heart attack.\n1|a|Text.\n1|a|Again.\n", 3, "second abstract line"),
    ("1|t|Heart attack.\n1|a|Text.\n2|t|Next.\n", 3, "annotation line of PMID 1"),  # no blank line between
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


BIORED_LIKE = ("7\t0\t5\tBRCA1\tGeneOrGeneProduct\t672\n"  # a gene's Entrez ID: no vocabulary the project parses
               "7\t10\t23\tbreast cancer\tDiseaseOrPhenotypicFeature\tD001943,D010051\n"
               "7\tAssociation\t672\tD001943\tNovel\n")


def test_id_types_parse_the_ids_of_those_types_only(tmp_path: Path) -> None:
    path = tmp_path / "biored.txt"
    path.write_text("7|t|BRCA1 and breast cancer.\n7|a|Text.\n" + BIORED_LIKE + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="unknown identifier") as err:
        list(read_pubtator(path))  # every type's IDs: the gene's stops the run at its line
    assert err.value.line == 3
    (doc,) = list(read_pubtator(path, id_types={"DiseaseOrPhenotypicFeature"}))
    gene, disease = doc.mentions
    assert gene.ids == () and disease.ids == ("D001943", "D010051") and disease.is_composite


def test_pubtator_text_reads_back_the_same_documents(fixtures: Path, tmp_path: Path) -> None:
    docs = list(read_pubtator(fixtures / "sources/ncbi-disease.sample.PubTator.txt"))
    docs.append(Document("5", "No ID here.", "", [Mention(0, 2, "No", "Disease", (), 3)]))
    path = tmp_path / "again.txt"
    path.write_text(pubtator_text(docs), encoding="utf-8")
    again = list(read_pubtator(path))
    assert [(d.pmid, d.title, d.abstract) for d in again] == [(d.pmid, d.title, d.abstract) for d in docs]
    assert ([[(m.start, m.end, m.text, m.type, m.ids) for m in d.mentions] for d in again]
            == [[(m.start, m.end, m.text, m.type, m.ids) for m in d.mentions] for d in docs])
