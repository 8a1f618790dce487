"""The PubTator block parser (spacy_sapbert.formats.pubtator), and the two readers built on it agreeing."""
from __future__ import annotations

from pathlib import Path

import pytest

from spacy_sapbert.annotate.readers import Malformed, Record, read_records
from spacy_sapbert.errors import InputError
from spacy_sapbert.formats.pubtator import looks_like_pubtator, parse_block, read_blocks, split_blocks
from spacy_sapbert.training.corpora import read_pubtator

GOOD = ("1|t|Heart attack.\n1|a|Plaquenil then renal failure.\n1\t0\t12\tHeart attack\tDisease\tD009203\n"
        "1\tCID\tD000001\tD009203\n\n\n2|t|Title only\n")


def numbered(text: str):
    return list(enumerate(text.splitlines(), 1))


def test_blocks_title_abstract_and_annotation_lines() -> None:
    first, second = list(read_blocks(numbered(GOOD), "f.txt"))
    assert (first.pmid, first.title, first.abstract, first.line) == ("1", "Heart attack.",
                                                                     "Plaquenil then renal failure.", 1)
    assert first.text == "Heart attack. Plaquenil then renal failure."
    assert [n for n, _ in first.annotations] == [3, 4] and first.annotations[1][1].startswith("1\tCID")
    assert (second.pmid, second.abstract, second.text, second.line) == ("2", None, "Title only", 7)


def test_blank_lines_split_blocks() -> None:
    lines = [(1, "a"), (2, "  "), (3, ""), (4, "b"), (5, "c"), (6, "")]
    assert list(split_blocks(lines)) == [[(1, "a")], [(4, "b"), (5, "c")]]
    assert list(split_blocks([])) == []


@pytest.mark.parametrize("text, line, fragment", [
    ("1\t0\t5\tHeart\tDisease\tD1", 1, "starts with a 'PMID|t|title' line"),
    ("1|a|Abstract first", 1, "starts with a 'PMID|t|title' line"),
    ("1|t|T\n2|a|A", 2, "abstract line of PMID 2 inside the document of PMID 1 (missing blank line?)"),
    ("1|t|T\n1|a|A\n1|a|B", 3, "second abstract line for PMID 1"),
    ("1|t|T\n2\t0\t1\tT\tDisease\tD1", 2, "expected '1|a|…' or a tab-separated annotation line of PMID 1"),
    ("1|t|T\n1|a|A\n2|t|Next", 3, "found '2|t|Next'"),
    ("1|t|T\nfree text", 2, "found 'free text'"),
])
def test_broken_blocks_name_their_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        parse_block(numbered(text), "f.txt")
    assert fragment in err.value.problem and (err.value.path, err.value.line) == ("f.txt", line)


def test_format_sniffing() -> None:
    assert looks_like_pubtator("123|t|A title\n") and looks_like_pubtator("123|a|An abstract")
    assert not looks_like_pubtator("A sentence | with a bar") and not looks_like_pubtator("1\t0\t5\tx")


def test_training_and_annotation_read_the_same_documents(tmp_path: Path) -> None:
    path = tmp_path / "docs.pubtator"
    path.write_text(GOOD.replace("2|t|Title only\n", "2|t|Title only\n2|a|Second.\n"), encoding="utf-8")
    documents = list(read_pubtator(path))
    records = list(read_records(path, fmt="pubtator"))
    assert [(d.pmid, d.text) for d in documents] == [(r.id, r.text) for r in records]
    assert records[0].meta["pubtator_annotations"] == ["1\t0\t12\tHeart attack\tDisease\tD009203",
                                                       "1\tCID\tD000001\tD009203"]
    assert [m.ids for m in documents[0].mentions] == [("D009203",)]


def test_a_broken_block_stops_training_and_is_one_malformed_record(tmp_path: Path) -> None:
    path = tmp_path / "docs.pubtator"
    path.write_text("1|t|A\n1|a|B\n\n2|t|C\n2|a|D\n3|a|E\n\n4|t|F\n", encoding="utf-8")
    with pytest.raises(InputError, match="abstract line of PMID 3") as err:
        list(read_pubtator(path))
    items = list(read_records(path, fmt="pubtator"))
    assert [type(i) for i in items] == [Record, Malformed, Record] and [i.ordinal for i in items] == [0, 1, 2]
    assert items[1].where == f"{path}:{err.value.line}" == f"{path}:6" and items[1].reason == err.value.problem


def test_undecodable_lines_make_the_record_malformed(tmp_path: Path) -> None:
    path = tmp_path / "docs.pubtator"
    path.write_bytes(b"1|t|A\n1|a|caf\xe9\n\n2|t|B\n")
    first, second = list(read_records(path, fmt="pubtator"))
    assert isinstance(first, Malformed) and first.where == f"{path}:1" and first.reason.startswith("line 2: not UTF-8")
    assert isinstance(second, Record) and second.text == "B"
    with pytest.raises(InputError, match="not UTF-8") as err:
        list(read_pubtator(path))
    assert err.value.line == 2
