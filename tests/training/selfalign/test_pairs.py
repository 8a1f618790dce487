"""Pretraining and fine-tuning pairs, and the pairs TSV reader."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import MAX_PAIRS_PER_CONCEPT, Concept, KnowledgeBase
from spacy_sapbert.training.corpora import Document, Mention
from spacy_sapbert.training.common.fingerprint import file_fingerprint
from spacy_sapbert.training.selfalign.pairs import (Pair, kb_header, kb_pairs, mention_pairs, read_header, read_pairs,
                                                    write_pairs)


def _kb() -> KnowledgeBase:
    return KnowledgeBase([
        Concept("D000001", "Big Concept", [f"big name {i}" for i in range(14)]),   # 15 names: 105 pairs -> 50
        Concept("D000002", "Heart attack", ["Myocardial infarction", "MI", "heart-attack"]),  # 4 raw, 3 normalised
        Concept("D000003", "Lonely disease"),                                       # one name: no pairs
        Concept("D000004|OMIM:100100", "Renal failure", ["Kidney failure"]),
    ], name="synthetic")


def test_kb_pairs_cap_counts_and_membership():
    kb = _kb()
    pairs = kb_pairs(kb, seed=1)
    per_concept = Counter(p.concept_id for p in pairs)
    assert per_concept == {"D000001": MAX_PAIRS_PER_CONCEPT, "D000002": 3, "D000004|OMIM:100100": 1}
    assert len(pairs) == kb.stats().positive_pairs  # `sapbert kb stats` counts the same pairs
    assert "D000003" not in per_concept
    for pair in pairs:
        names = kb.normalized_names(kb[pair.concept_id])
        assert pair.name_a in names and pair.name_b in names and pair.name_a != pair.name_b
    # no unordered pair twice
    assert len({(p.concept_id, frozenset((p.name_a, p.name_b))) for p in pairs}) == len(pairs)
    # names are normalised: "heart-attack" and "Heart attack" are one name
    assert not any("-" in p.name_a or "-" in p.name_b or p.name_a != p.name_a.lower() for p in pairs)


def test_kb_pairs_deterministic_and_shuffled():
    kb = _kb()
    assert kb_pairs(kb, seed=7) == kb_pairs(kb, seed=7)
    assert kb_pairs(kb, seed=7) != kb_pairs(kb, seed=8)
    order = [p.concept_id for p in kb_pairs(kb, seed=7)]
    assert order != sorted(order, key=lambda c: [x.concept_id for x in kb].index(c))  # not in KB order


def test_concept_with_one_name_gives_no_pairs():
    kb = KnowledgeBase([Concept("D1", "Only", ["only", "ONLY!"])])  # one normalised name
    assert kb_pairs(kb) == []


def test_write_read_roundtrip_with_header(tmp_path: Path):
    kb = _kb()
    pairs = kb_pairs(kb, seed=3)
    path = write_pairs(pairs, tmp_path / "pairs.tsv", kb_header(kb, "kb:test", 3))
    assert read_pairs(path) == pairs
    header = read_header(path)
    assert header["kb"] == "synthetic" and header["kb_fingerprint"] == kb.fingerprint() and header["seed"] == "3"
    assert len(file_fingerprint(path)) == 16


@pytest.mark.parametrize("line, problem", [
    ("D1\tonly two", "expected 3 tab-separated fields"),
    ("D1\ta\tb\tc", "found 4"),
    ("D1\t\tb", "'name_a'"),
    ("\ta\tb", "'concept_id'"),
])
def test_malformed_pairs_line_names_file_and_line(tmp_path: Path, line: str, problem: str):
    path = tmp_path / "bad.tsv"
    path.write_text("# source=test\nD1\tx\ty\n\n" + line + "\nD2\tu\tv\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_pairs(path)
    assert info.value.line == 4 and info.value.path == str(path)
    assert problem in str(info.value)


def test_pairs_file_without_pairs_is_an_error(tmp_path: Path):
    path = tmp_path / "empty.tsv"
    path.write_text("# source=nothing\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no pairs"):
        read_pairs(path)
    with pytest.raises(InputError, match="not found"):
        read_pairs(tmp_path / "missing.tsv")


def test_mention_pairs_counts_every_skipped_mention():
    kb = _kb()
    mentions = [
        Mention(0, 5, "heart attacks", "Disease", ("D000002",)),
        Mention(0, 5, "Heart Attacks", "Disease", ("D000002",)),         # duplicate after normalisation
        Mention(0, 5, "MI", "Disease", ("D000002",)),                    # identical to a name: that name skipped
        Mention(0, 5, "kidney and heart failure", "Disease", ("D000004", "D000002")),  # composite
        Mention(0, 5, "renal insufficiency", "Disease", ("OMIM:100100",)),  # alternative ID of a KB concept
        Mention(0, 5, "some thing", "Disease", ("D999999",)),            # ID the KB lacks
        Mention(0, 5, "unlinked", "Disease", ()),                        # -1
        Mention(0, 5, "aspirin", "Chemical", ("D000001",)),              # filtered by type
    ]
    docs = [Document("1", "t", "a", mentions)]
    pairs, stats = mention_pairs(docs, kb, seed=0, types=["Disease"])
    assert (stats.mentions, stats.used, stats.duplicate, stats.composite, stats.id_not_in_kb, stats.no_id) == \
        (7, 3, 1, 1, 1, 1)
    assert stats.missing_ids == {"D999999": 1}
    assert stats.identical_names_skipped == 1
    by_mention = Counter(p.name_a for p in pairs)
    assert by_mention == {"heart attacks": 3, "mi": 2, "renal insufficiency": 2}
    assert {p.concept_id for p in pairs if p.name_a == "renal insufficiency"} == {"D000004|OMIM:100100"}
    assert all(p.name_a != p.name_b for p in pairs)
    assert stats.pairs == len(pairs) == 7


def test_mention_pairs_are_capped_per_mention():
    kb = _kb()
    docs = [Document("1", "t", "a", [Mention(0, 3, "big", "Disease", ("D000001",))])]
    pairs, _ = mention_pairs(docs, kb, max_pairs_per_mention=4)
    assert len(pairs) == 4 and all(isinstance(p, Pair) for p in pairs)


def test_mention_pairs_from_ncbi_train(mirror: Path):
    """The real corpus reads and pairs with a KB built from its own IDs (no KB file needed)."""
    from spacy_sapbert.training.corpora import read_pubtator

    docs = list(read_pubtator(mirror / "corpora/ncbi-disease/NCBItrainset_corpus.txt"))
    ids = Counter(i for d in docs for m in d.mentions for i in m.ids)
    top = [cid for cid, _ in ids.most_common(20)]
    kb = KnowledgeBase([Concept(cid, f"name of {cid}", [f"other name {cid}"]) for cid in top])
    pairs, stats = mention_pairs(docs, kb)
    assert stats.mentions == sum(len(d.mentions) for d in docs)
    assert stats.composite > 0 and stats.id_not_in_kb > 0 and stats.used > 0
    assert stats.used + stats.duplicate + stats.composite + stats.id_not_in_kb + stats.no_id + stats.empty_text \
        == stats.mentions
    assert {p.concept_id for p in pairs} <= set(top)
