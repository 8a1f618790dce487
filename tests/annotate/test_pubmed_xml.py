"""PubMed/MEDLINE XML input (the format of PubMed's baseline files): one record per article."""
from __future__ import annotations

import gzip

from spacy_sapbert.annotate import annotate, detect_format, read_records
from spacy_sapbert.annotate.readers import Malformed, Record
from spacy_sapbert.annotate.shards import plan

HEAD = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" "https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">
<PubmedArticleSet>
"""
ARTICLES = """<PubmedArticle>
  <MedlineCitation Status="MEDLINE" Owner="NLM">
    <PMID Version="1">101</PMID>
    <Article PubModel="Print">
      <ArticleTitle>Renal failure after <i>hydroxychloroquine</i>.</ArticleTitle>
      <Abstract>
        <AbstractText Label="BACKGROUND" NlmCategory="BACKGROUND">A heart attack
          and kidney failure.</AbstractText>
        <AbstractText Label="RESULTS">Breast tumour &amp; diabetes.</AbstractText>
      </Abstract>
    </Article>
  </MedlineCitation>
  <PubmedData><ArticleIdList><ArticleId IdType="pubmed">101</ArticleId></ArticleIdList></PubmedData>
</PubmedArticle>
<PubmedArticle>
  <MedlineCitation><PMID Version="1">102</PMID><Article><ArticleTitle>No abstract here.</ArticleTitle></Article>
  </MedlineCitation>
</PubmedArticle>
<PubmedArticle>
  <MedlineCitation><Article><ArticleTitle>Lost its PMID.</ArticleTitle></Article></MedlineCitation>
</PubmedArticle>
<DeleteCitation><PMID Version="1">99</PMID></DeleteCitation>
<PubmedArticle>
  <MedlineCitation><PMID Version="1">104</PMID><Article><ArticleTitle>Last.</ArticleTitle>
  <Abstract><AbstractText>Diabetes.</AbstractText></Abstract></Article></MedlineCitation>
</PubmedArticle>
"""


def test_articles_become_records_with_lines_and_the_pubtator_text(tmp_path):
    path = tmp_path / "pubmed25n0001.xml.gz"
    path.write_bytes(gzip.compress((HEAD + ARTICLES + "</PubmedArticleSet>\n").encode("utf-8")))
    assert detect_format(path) == "pubmed"
    items = list(read_records(path))
    assert [(type(i).__name__, i.ordinal, i.where.rsplit(":", 1)[1]) for i in items] == [
        ("Record", 0, "4"), ("Record", 1, "18"), ("Malformed", 2, "22"), ("Record", 3, "26")]
    first = items[0]
    assert first.id == "101" and first.meta == {"title": "Renal failure after hydroxychloroquine."}
    assert first.text == ("Renal failure after hydroxychloroquine. A heart attack and kidney failure. "
                          "Breast tumour & diabetes.")
    assert items[1].text == "No abstract here." and "without a PMID" in items[2].reason
    assert len(plan(path, shard_bytes=10)) == 1  # an XML file is never cut


def test_a_truncated_file_is_a_malformed_record_at_the_line_it_broke(tmp_path):
    path = tmp_path / "cut.xml"
    path.write_text(HEAD + ARTICLES.split("<DeleteCitation>")[0] + "<PubmedArticle><MedlineCitation><PMID>7</PM",
                    encoding="utf-8")
    items = list(read_records(path))
    assert [type(i) for i in items] == [Record, Record, Malformed, Malformed]
    assert items[-1].where.endswith(":25") and "invalid XML" in items[-1].reason
    bad = tmp_path / "bad.xml"
    bad.write_text(HEAD + ARTICLES.replace("<PubmedData>", "<PubmedData", 1), encoding="utf-8")
    broken = list(read_records(bad))
    assert len(broken) == 1 and broken[0].where.endswith(":16") and "invalid XML" in broken[0].reason


def test_annotate_reads_pubmed_xml(tmp_path, tiny_bert):
    from tests.linker_fixtures import write_small_kb
    from tests.pipes.test_component import make_nlp

    path = tmp_path / "pubmed.xml"
    path.write_text(HEAD + ARTICLES + "</PubmedArticleSet>\n", encoding="utf-8")
    summary = annotate(make_nlp(tiny_bert, write_small_kb(tmp_path)), path, tmp_path / "out.jsonl",
                       show_progress=False)
    assert (summary.read, summary.written, summary.skipped) == (4, 3, 1)
    assert summary.entities > 0


def test_a_pubmed_file_named_otherwise_is_read_with_format_pubmed(tmp_path):
    path = tmp_path / "articles.data"
    path.write_text(HEAD + ARTICLES + "</PubmedArticleSet>\n", encoding="utf-8")
    assert detect_format(path) == "text"
    assert [i.id for i in read_records(path, "pubmed") if isinstance(i, Record)] == ["101", "102", "104"]
