"""Batch annotation (``sapbert annotate``): the three input formats, resume after a killed
run, torn output lines, malformed records, empty input (tiny random BERT + entity ruler)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from spacy_sapbert.annotate import ResumableJsonl, annotate, read_records
from spacy_sapbert.annotate.readers import Malformed, Record
from spacy_sapbert.errors import InputError

from tests.linker_fixtures import write_small_kb
from tests.pipes.test_component import make_nlp

TEXTS = [
    "Plaquenil (hydroxychloroquine) was stopped after a heart attack.",
    "Renal failure and kidney failure followed.",
    "No entity here at all.",
    "MS or a breast tumour? Diabetes.",
]


@pytest.fixture(scope="module")
def nlp(tiny_bert, tmp_path_factory):
    return make_nlp(tiny_bert, write_small_kb(tmp_path_factory.mktemp("kb")))


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def pubtator(pmid, title, abstract, annotations=()):
    lines = [f"{pmid}|t|{title}", f"{pmid}|a|{abstract}", *annotations]
    return "\n".join(lines) + "\n\n"


def test_three_formats_round_trip(nlp, tmp_path):
    text_file = tmp_path / "docs.txt"
    text_file.write_text("\n".join([TEXTS[0], "", TEXTS[1]]) + "\n", encoding="utf-8")
    jsonl_file = tmp_path / "docs.jsonl"
    jsonl_file.write_text("\n".join(json.dumps({"doc": t, "pmid": f"P{i}", "year": 2000 + i})
                                    for i, t in enumerate(TEXTS)) + "\n", encoding="utf-8")
    pubtator_file = tmp_path / "docs.pubtator"
    pubtator_file.write_text(pubtator("111", "Heart attack.", "Plaquenil then renal failure.",
                                      ["111\t0\t12\tHeart attack\tDisease\tD009203"])
                             + pubtator("222", "Diabetes", "No more."), encoding="utf-8")

    summary = annotate(nlp, text_file, tmp_path / "text.out.jsonl", show_progress=False)
    assert (summary.read, summary.written, summary.skipped) == (2, 2, 0)
    out = read_jsonl(tmp_path / "text.out.jsonl")
    assert [r["id"] for r in out] == ["1", "3"] and [r["text"] for r in out] == [TEXTS[0], TEXTS[1]]
    first = out[0]["entities"]
    assert [e["text"] for e in first] == ["Plaquenil", "hydroxychloroquine", "heart attack"]
    for ent in first:
        assert TEXTS[0][ent["start"]:ent["end"]] == ent["text"] and ent["label"] == "ENT"
        assert ent["concept_id"] == ent["kb_ents"][0][0] and ent["score"] == ent["kb_ents"][0][1]
        assert ent["concept_name"] and isinstance(ent["score"], float)
    assert first[0]["concept_id"] == "D006886" and first[0]["concept_name"] == "Hydroxychloroquine"

    summary = annotate(nlp, jsonl_file, tmp_path / "jsonl.out.jsonl", text_field="doc", id_field="pmid",
                       show_progress=False)
    out = read_jsonl(tmp_path / "jsonl.out.jsonl")
    assert summary.written == 4 and [r["id"] for r in out] == ["P0", "P1", "P2", "P3"]
    assert out[2]["entities"] == [] and out[3]["meta"] == {"year": 2003}  # other fields kept

    summary = annotate(nlp, pubtator_file, tmp_path / "pt.out.jsonl", show_progress=False)
    out = read_jsonl(tmp_path / "pt.out.jsonl")
    assert [r["id"] for r in out] == ["111", "222"]
    assert out[0]["text"] == "Heart attack. Plaquenil then renal failure."
    assert out[0]["meta"]["pubtator_annotations"] == ["111\t0\t12\tHeart attack\tDisease\tD009203"]
    assert [e["text"] for e in out[0]["entities"]] == ["Heart attack", "Plaquenil", "renal failure"]
    assert out[0]["entities"][0]["start"] == 0 and out[0]["entities"][0]["concept_id"] == "D009203"


def test_folder_of_text_files(nlp, tmp_path):
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text(TEXTS[0], encoding="utf-8")
    (folder / "sub" / "b.txt").write_text(TEXTS[3], encoding="utf-8")
    (folder / "ignored.md").write_text("heart attack", encoding="utf-8")
    annotate(nlp, folder, tmp_path / "out.jsonl", show_progress=False)
    assert [r["id"] for r in read_jsonl(tmp_path / "out.jsonl")] == ["a.txt", "sub/b.txt"]


def test_malformed_records_are_counted_or_fatal(nlp, tmp_path):
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b'{"text": "Heart attack."}\n'
                       b'{"text": 5}\n'
                       b'not json\n'
                       b'["a list"]\n'
                       b'{"title": "no text"}\n'
                       b'{"text": "caf\xe9 latin-1"}\n'
                       b'{"text": "Diabetes."}\n')
    summary = annotate(nlp, source, tmp_path / "out.jsonl", show_progress=False)
    assert (summary.read, summary.written, summary.skipped) == (7, 2, 5)
    assert [r["ordinal"] for r in read_jsonl(tmp_path / "out.jsonl")] == [0, 6]
    reasons = {item.where.rsplit(":", 1)[1]: item.reason for item in read_records(source)
               if isinstance(item, Malformed)}
    assert set(reasons) == {"2", "3", "4", "5", "6"}
    assert "not a string" in reasons["2"] and "invalid JSON" in reasons["3"] and "missing" in reasons["5"]
    assert "not UTF-8" in reasons["6"]
    with pytest.raises(InputError, match=r"bad.jsonl:2: malformed record: field 'text' is int"):
        annotate(nlp, source, tmp_path / "strict.jsonl", strict=True, show_progress=False)

    broken = tmp_path / "broken.pubtator"
    broken.write_text(pubtator("1", "Heart attack", "x") + "2|a|abstract without title\n\n"
                      + pubtator("3", "Diabetes", "y"), encoding="utf-8")
    summary = annotate(nlp, broken, tmp_path / "pt.jsonl", show_progress=False)
    assert (summary.read, summary.written, summary.skipped) == (3, 2, 1)
    bad = [item for item in read_records(broken) if isinstance(item, Malformed)]
    assert bad[0].where.endswith("broken.pubtator:4") and "PMID|t|title" in bad[0].reason


def test_empty_input_and_missing_input(nlp, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    summary = annotate(nlp, empty, tmp_path / "out.jsonl", show_progress=False)
    assert (summary.read, summary.written, summary.skipped) == (0, 0, 0)
    assert (tmp_path / "out.jsonl").read_text() == ""
    with pytest.raises(InputError, match="input not found"):
        annotate(nlp, tmp_path / "nope.txt", tmp_path / "x.jsonl", show_progress=False)
    with pytest.raises(InputError, match="unknown input format"):
        list(read_records(empty, fmt="xml"))


def test_resume_skips_finished_documents_and_cuts_a_torn_line(nlp, tmp_path):
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    annotate(nlp, source, out, show_progress=False)
    complete = out.read_text(encoding="utf-8")
    lines = complete.splitlines(keepends=True)
    out.write_text(lines[0] + lines[1] + lines[2][: len(lines[2]) // 2], encoding="utf-8")  # crash mid-line
    summary = annotate(nlp, source, out, show_progress=False)
    assert (summary.already_done, summary.written) == (2, 2)
    assert out.read_text(encoding="utf-8") == complete
    again = annotate(nlp, source, out, show_progress=False)
    assert (again.already_done, again.written) == (4, 0) and out.read_text(encoding="utf-8") == complete
    fresh = annotate(nlp, source, out, resume=False, show_progress=False)
    assert fresh.written == 4 and out.read_text(encoding="utf-8") == complete
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"no": "ordinal"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="foreign.jsonl:1: cannot resume"):
        ResumableJsonl(foreign)


@pytest.mark.slow
def test_killed_run_resumes_without_duplicates_or_gaps(tiny_bert, tmp_path):
    """SIGKILL a real `annotate` process mid-run, run it again, compare with an uninterrupted run."""
    kb = write_small_kb(tmp_path)
    source = tmp_path / "docs.jsonl"
    with source.open("w", encoding="utf-8") as handle:
        for i in range(400):
            handle.write(json.dumps({"id": f"d{i}", "text": TEXTS[i % len(TEXTS)] + f" Case {i}."}) + "\n")
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.dirname(__file__)))!r})
        from spacy.language import Language
        from tests.pipes.test_component import make_nlp
        from spacy_sapbert.annotate import annotate

        @Language.component("slow")
        def slow(doc):
            time.sleep(float(sys.argv[2]))
            return doc

        nlp = make_nlp({str(tiny_bert)!r}, {str(kb)!r})
        nlp.add_pipe("slow", first=True)
        annotate(nlp, {str(source)!r}, sys.argv[1], batch_size=4, show_progress=False)
    """), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([sys.executable, str(script), str(out), "0.01"])
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_bytes().splitlines()) < 20):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(out.read_bytes().splitlines())
    assert 20 <= partial < 400, "the run should have been killed part-way"
    subprocess.run([sys.executable, str(script), str(out), "0"], check=True)
    reference = tmp_path / "reference.jsonl"
    subprocess.run([sys.executable, str(script), str(reference), "0"], check=True)
    records = read_jsonl(out)
    assert sorted(r["ordinal"] for r in records) == list(range(400))
    assert sorted(records, key=lambda r: r["ordinal"]) == read_jsonl(reference)


def test_n_process_gives_the_same_output(nlp, tmp_path):
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(TEXTS * 5) + "\n", encoding="utf-8")
    annotate(nlp, source, tmp_path / "one.jsonl", show_progress=False)
    summary = annotate(nlp, source, tmp_path / "two.jsonl", n_process=2, batch_size=2, show_progress=False)
    assert summary.written == 20
    assert read_jsonl(tmp_path / "two.jsonl") == read_jsonl(tmp_path / "one.jsonl")


def test_reader_records_carry_ordinals_and_ids(tmp_path):
    source = tmp_path / "docs.jsonl"
    source.write_text('{"text": "a"}\n\n{"text": "b", "id": 7}\n', encoding="utf-8")
    items = list(read_records(source))
    assert all(isinstance(i, Record) for i in items)
    assert [(i.ordinal, i.id, i.where.rsplit(":", 1)[1]) for i in items] == [(0, "1", "1"), (1, "7", "3")]
