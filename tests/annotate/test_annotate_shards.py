"""The sharded run the Ray engine executes, tested without Ray: cutting inputs into shards
(every record once, numbered as in a whole read), parts and markers, resume, refusals."""
from __future__ import annotations

import gzip
import json
import sys

import pytest

from spacy_sapbert.annotate import annotate, read_records
from spacy_sapbert.annotate.compare import compare_outputs, output_lines
from spacy_sapbert.annotate.identity import pipeline_identity
from spacy_sapbert.annotate.readers import Malformed
from spacy_sapbert.annotate.record import linkers_of
from spacy_sapbert.annotate.sharded import annotate_shard, run_sharded
from spacy_sapbert.annotate.shards import input_files, plan
from spacy_sapbert.errors import InputError

from tests.linker_fixtures import write_small_kb
from tests.annotate.test_annotate import TEXTS, pubtator
from tests.pipes.test_component import make_nlp


@pytest.fixture(scope="module")
def nlp(tiny_bert, tmp_path_factory):
    return make_nlp(tiny_bert, write_small_kb(tmp_path_factory.mktemp("kb")))


def executor(nlp, calls=None, strict=False):
    """What the Ray actors do, in this process: annotate each shard handed over."""
    linkers = linkers_of(nlp)

    def execute(shards, folder):
        for shard in shards:
            if calls is not None:
                calls.append(shard.part)
            yield annotate_shard(nlp, linkers, shard, folder, batch_size=4, strict=strict)
    return execute


def items(records):
    return [(type(r).__name__, r.ordinal, r.where, getattr(r, "id", None), getattr(r, "text", None))
            for r in records]


def write_inputs(folder):
    """The same awkward records in each format: blank and whitespace-only lines, a broken record, non-ASCII."""
    lines = []
    for i in range(60):
        lines.append(json.dumps({"id": f"d{i}", "text": f"{TEXTS[i % 4]} Case {i} – é."}, ensure_ascii=False))
        if i % 7 == 0:
            lines.append("   ")
        if i % 13 == 5:
            lines.append("{not json")
    (folder / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "docs.txt").write_text("\n".join(TEXTS * 15 + ["\u00a0", "last"]) + "\n", encoding="utf-8")
    blocks = [pubtator(str(100 + i), f"Title {i}.", TEXTS[i % 4], [f"{100 + i}\t0\t5\tTitle\tDisease\tD1"])
              for i in range(30)]
    blocks.insert(4, "bad|x|line\n\n\n")
    (folder / "docs.pubtator").write_text("".join(blocks), encoding="utf-8")


@pytest.mark.parametrize("name", ["docs.jsonl", "docs.txt", "docs.pubtator"])
def test_shards_hold_every_record_once_numbered_as_a_whole_read(tmp_path, name):
    write_inputs(tmp_path)
    whole = items(read_records(tmp_path / name))
    shards = plan(tmp_path / name, shard_bytes=200, batch_size=2)
    assert len(shards) > 5
    assert [s.part for s in shards] == [f"part-{i:05d}.jsonl" for i in range(len(shards))]
    pieces = [r for s in shards for r in read_records(s.path, s.fmt, span=s.span)]
    assert items(pieces) == whole
    assert any(isinstance(r, Malformed) for r in pieces) == (name != "docs.txt")
    assert plan(tmp_path / name, shard_bytes=200, batch_size=2) == shards  # deterministic: same keys again
    # every shard starts a batch of the local engine (batches count readable records only)
    readable = [r.ordinal for r in pieces if not isinstance(r, Malformed)]
    for shard in shards[1:]:
        assert readable.index(shard.span.first_ordinal) % 2 == 0


def test_gzip_files_are_one_shard_each_and_folders_and_globs_list_files(tmp_path):
    write_inputs(tmp_path)
    data = tmp_path / "baseline"
    data.mkdir()
    for i in range(3):
        with gzip.open(data / f"pubmed{i}.jsonl.gz", "wt", encoding="utf-8") as handle:
            handle.write((tmp_path / "docs.jsonl").read_text(encoding="utf-8"))
    shards = plan(data, shard_bytes=100)
    assert [(s.path.rsplit("/", 1)[1], s.span.start, s.span.end) for s in shards] == [
        (f"pubmed{i}.jsonl.gz", 0, None) for i in range(3)]
    assert plan(str(data / "*.jsonl.gz"), shard_bytes=100) == shards
    assert items(read_records(shards[1].path, shards[1].fmt, span=shards[1].span)) == [
        (kind, ordinal, where.replace("docs.jsonl", "baseline/pubmed1.jsonl.gz"), i, t)
        for kind, ordinal, where, i, t in items(read_records(tmp_path / "docs.jsonl"))]
    texts = tmp_path / "texts"
    texts.mkdir()
    for i in range(7):
        (texts / f"{i:02d}.txt").write_text(TEXTS[i % 4], encoding="utf-8")
    assert input_files(texts) == ([texts], True)
    folder_shards = plan(texts, shard_bytes=50)
    assert [r.id for s in folder_shards for r in read_records(s.path, s.fmt, span=s.span)] == [
        f"{i:02d}.txt" for i in range(7)]
    with pytest.raises(InputError, match="no file matches"):
        plan(str(tmp_path / "nothing-*.jsonl"))


def test_sharded_output_equals_the_local_engine_and_resumes_only_missing_shards(nlp, tmp_path):
    write_inputs(tmp_path)
    source = tmp_path / "docs.jsonl"
    annotate(nlp, source, tmp_path / "local.jsonl", batch_size=4, show_progress=False)
    out = tmp_path / "out"
    summary = run_sharded(executor(nlp), source, out, pipeline_identity(nlp), shard_bytes=300, batch_size=4,
                          show_progress=False)
    assert summary.shards > 5 and summary.written == 60 and summary.skipped == 5
    comparison = compare_outputs(tmp_path / "local.jsonl", out)
    assert comparison.same, comparison.line()
    assert b"".join(p.read_bytes() for p in sorted(out.glob("part-*.jsonl"))) == (tmp_path / "local.jsonl").read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["summary"]["written"] == 60

    # a killed run: one part without its marker, one marker without its part, a worker's temporary file
    (out / "_done" / "part-00002.json").unlink()
    (out / "part-00004.jsonl").unlink()
    (out / ".part-00001.jsonl.tmp-1-abc").write_text("half a part")
    kept = {p.name: p.stat().st_ino for p in out.glob("part-*.jsonl")}
    calls = []
    again = run_sharded(executor(nlp, calls), source, out, pipeline_identity(nlp), shard_bytes=300, batch_size=4,
                        show_progress=False)
    assert calls == ["part-00002.jsonl", "part-00004.jsonl"]
    assert again.shards_before == summary.shards - 2 and again.read == 65
    assert not list(out.glob(".part-*"))
    assert {n: i for n, i in kept.items() if n != "part-00002.jsonl"} == {
        p.name: p.stat().st_ino for p in out.glob("part-*.jsonl") if p.name not in ("part-00002.jsonl",
                                                                                   "part-00004.jsonl")}
    assert compare_outputs(tmp_path / "local.jsonl", out).same


def test_a_folder_is_continued_only_by_the_same_run_and_never_clobbered(nlp, tmp_path):
    write_inputs(tmp_path)
    out = tmp_path / "out"
    run_sharded(executor(nlp), tmp_path / "docs.jsonl", out, pipeline_identity(nlp), shard_bytes=300,
                show_progress=False)
    with pytest.raises(InputError, match="cannot resume.*input.path"):
        run_sharded(executor(nlp), tmp_path / "docs.txt", out, pipeline_identity(nlp), shard_bytes=300,
                    show_progress=False)
    with pytest.raises(InputError, match="shard_bytes: 300 then, 400 now"):
        run_sharded(executor(nlp), tmp_path / "docs.jsonl", out, pipeline_identity(nlp), shard_bytes=400,
                    show_progress=False)
    summary = run_sharded(executor(nlp), tmp_path / "docs.txt", out, pipeline_identity(nlp), shard_bytes=300,
                          overwrite=True, show_progress=False)
    assert summary.written == 61 and len(list(output_lines(out))) == 61  # NBSP alone is a blank line
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("keep me")
    with pytest.raises(InputError, match="refusing to replace a folder that is not an annotation output"):
        run_sharded(executor(nlp), tmp_path / "docs.txt", mine, pipeline_identity(nlp), show_progress=False)
    with pytest.raises(InputError, match="is a file"):
        run_sharded(executor(nlp), tmp_path / "docs.txt", tmp_path / "docs.jsonl", pipeline_identity(nlp),
                    show_progress=False)
    assert (mine / "notes.md").read_text() == "keep me"


def test_strict_stops_at_the_first_malformed_record_with_its_line(nlp, tmp_path):
    write_inputs(tmp_path)
    with pytest.raises(InputError, match=r"docs.jsonl:8: .*invalid JSON"):
        run_sharded(executor(nlp, strict=True), tmp_path / "docs.jsonl", tmp_path / "out", pipeline_identity(nlp),
                    shard_bytes=300, show_progress=False)


def test_without_ray_the_engine_says_how_to_install_it(tmp_path, monkeypatch):
    from spacy_sapbert.annotate.ray_engine import annotate_with_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what an install without the [ray] extra looks like
    write_inputs(tmp_path)
    with pytest.raises(InputError, match=r"pip install 'spacy-sapbert\[ray\]'"):
        annotate_with_ray("default", tmp_path / "docs.jsonl", tmp_path / "out")
    assert not (tmp_path / "out").exists()
