"""`sapbert annotate` never loses what a user gave, never hangs, and refuses bad input clearly.

Each test reproduces a failure a user met (data lost, a hang, silently wrong output);
the tiny random BERT + entity ruler stand in for the real pipeline except where the
failure needs the real one (``--n-process 2``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from spacy.language import Language

from spacy_sapbert.annotate import annotate, preflight, process
from spacy_sapbert.annotate.identity import sidecar_path
from spacy_sapbert.errors import InputError

from tests.linker_fixtures import write_small_kb
from tests.pipes.test_component import make_nlp

TEXTS = [
    "Plaquenil (hydroxychloroquine) was stopped after a heart attack.",
    "Renal failure and kidney failure followed.",
    "No entity here at all.",
    "MS or a breast tumour? Diabetes.",
]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    return write_small_kb(tmp_path_factory.mktemp("kb"))


@pytest.fixture(scope="module")
def nlp(tiny_bert, kb):
    return make_nlp(tiny_bert, kb)


def write_jsonl(path: Path, texts) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)),
                    encoding="utf-8")
    return path


def read_jsonl(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- data lost -------------------------------------------------------------------------
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(nlp, tmp_path):
    source = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    before = source.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(source)
    os.link(source, tmp_path / "hard.jsonl")
    for target in (source, tmp_path / "link.jsonl", tmp_path / "hard.jsonl"):
        with pytest.raises(InputError, match="output is the input file"):
            annotate(nlp, source, target, resume=False, show_progress=False)
    assert source.read_bytes() == before


def test_overwrite_keeps_the_old_output_until_the_new_one_is_complete(tiny_bert, kb, nlp, tmp_path):
    source = write_jsonl(tmp_path / "docs.jsonl", TEXTS * 3)
    out = tmp_path / "out.jsonl"
    annotate(nlp, source, out, show_progress=False)
    old = out.read_bytes()

    @Language.component("interrupt_at_doc_5")
    def interrupt(doc):
        if doc.text == TEXTS[0] and interrupt.seen:
            raise KeyboardInterrupt  # what Ctrl-C does half-way through a run
        interrupt.seen = True
        return doc

    interrupt.seen = False
    dying = make_nlp(tiny_bert, kb)
    dying.add_pipe("interrupt_at_doc_5", first=True)
    with pytest.raises(KeyboardInterrupt):
        annotate(dying, source, out, resume=False, batch_size=1, show_progress=False)
    assert out.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "out.jsonl", sidecar_path(out).name]


def test_resume_refuses_another_input_or_pipeline(tiny_bert, kb, nlp, tmp_path):
    first = write_jsonl(tmp_path / "a.jsonl", TEXTS)
    second = write_jsonl(tmp_path / "b.jsonl", list(reversed(TEXTS)))
    out = tmp_path / "out.jsonl"
    annotate(nlp, first, out, show_progress=False)
    done = out.read_bytes()
    with pytest.raises(InputError, match=r"out.jsonl: cannot resume: this output was written from another input "
                                         r"\(path: '.*a.jsonl' then, '.*b.jsonl' now"):
        annotate(nlp, second, out, show_progress=False)
    with pytest.raises(InputError, match="another input"):
        preflight(second, out)  # the CLI's check, before any pipeline is loaded
    with pytest.raises(InputError, match=r"another input \(text_field: 'text' then, 'body' now"):
        annotate(nlp, first, out, text_field="body", show_progress=False)
    other = make_nlp(tiny_bert, kb, k=7)
    with pytest.raises(InputError, match=r"another pipeline \(config_sha256"):
        annotate(other, first, out, show_progress=False)
    assert out.read_bytes() == done
    summary = annotate(nlp, first, out, show_progress=False)  # the same input and pipeline resume
    assert (summary.already_done, summary.written) == (4, 0)
    sidecar_path(out).unlink()
    with pytest.raises(InputError, match="cannot resume: there is no record"):
        annotate(nlp, first, out, show_progress=False)
    assert annotate(nlp, second, out, resume=False, show_progress=False).written == 4
    assert [r["text"] for r in read_jsonl(out)] == list(reversed(TEXTS))


# -- one bad record ----------------------------------------------------------------------
def test_a_lone_surrogate_costs_only_its_record(nlp, tmp_path):
    source = tmp_path / "docs.jsonl"
    lines = [json.dumps({"text": t}) for t in TEXTS]
    lines.insert(2, '{"text": "a lone \\ud800 surrogate"}')
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = annotate(nlp, source, tmp_path / "out.jsonl", show_progress=False)
    assert (summary.read, summary.written, summary.skipped) == (5, 4, 1)
    assert [r["ordinal"] for r in read_jsonl(tmp_path / "out.jsonl")] == [0, 1, 3, 4]
    with pytest.raises(InputError, match=r"docs.jsonl:3: malformed record: field 'text' holds an unpaired "
                                         r"surrogate U\+D800 at character 7"):
        annotate(nlp, source, tmp_path / "strict.jsonl", strict=True, show_progress=False)


def test_a_document_the_pipeline_fails_on_costs_only_itself(tiny_bert, kb, tmp_path):
    @Language.component("fails_on_boom")
    def fails(doc):
        if "BOOM" in doc.text:
            raise ValueError("cannot digest BOOM")
        return doc

    nlp = make_nlp(tiny_bert, kb)
    nlp.add_pipe("fails_on_boom", first=True)
    source = write_jsonl(tmp_path / "docs.jsonl", [TEXTS[0], TEXTS[1], "BOOM " + TEXTS[0], TEXTS[3], TEXTS[1]])
    summary = annotate(nlp, source, tmp_path / "out.jsonl", batch_size=8, show_progress=False)
    assert (summary.written, summary.skipped) == (4, 1)
    records = read_jsonl(tmp_path / "out.jsonl")
    assert [r["ordinal"] for r in records] == [0, 1, 3, 4]
    assert [e["text"] for e in records[0]["entities"]] == ["Plaquenil", "hydroxychloroquine", "heart attack"]
    with pytest.raises(InputError, match=r"docs.jsonl:3: the pipeline failed on this document: ValueError: "
                                         r"cannot digest BOOM"):
        annotate(nlp, source, tmp_path / "strict.jsonl", strict=True, show_progress=False)


def test_long_documents_are_annotated_in_pieces_with_their_offsets(nlp, tmp_path, monkeypatch):
    text = "\n\n".join(" ".join(TEXTS * 2) for _ in range(6))  # paragraphs of 327 characters
    source = write_jsonl(tmp_path / "docs.jsonl", [text])
    annotate(nlp, source, tmp_path / "whole.jsonl", show_progress=False)
    monkeypatch.setattr(process, "PIECE_CHARS", 200)
    pieces = process.split_text(text, 200)
    assert "".join(p for _, p in pieces) == text and all(len(p) <= 200 for _, p in pieces) and len(pieces) >= 12
    assert all(text[o:o + len(p)] == p for o, p in pieces)
    annotate(nlp, source, tmp_path / "pieces.jsonl", show_progress=False)
    whole, split = read_jsonl(tmp_path / "whole.jsonl")[0], read_jsonl(tmp_path / "pieces.jsonl")[0]
    assert split["entities"] == whole["entities"] and len(whole["entities"]) == 12 * 8
    for ent in split["entities"]:
        assert text[ent["start"]:ent["end"]] == ent["text"]


def test_a_document_over_spacys_max_length_is_annotated_not_fatal(tiny_bert, kb, tmp_path):
    nlp = make_nlp(tiny_bert, kb)
    nlp.max_length = 150
    source = write_jsonl(tmp_path / "docs.jsonl", [TEXTS[1], " ".join(TEXTS * 2), TEXTS[0]])
    summary = annotate(nlp, source, tmp_path / "out.jsonl", show_progress=False)
    assert (summary.written, summary.skipped) == (3, 0)
    long_doc = read_jsonl(tmp_path / "out.jsonl")[1]
    assert len(long_doc["entities"]) == 2 * 8


# -- silently wrong ----------------------------------------------------------------------
def test_binary_input_is_refused(nlp, tmp_path):
    binary = tmp_path / "program.txt"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    for fmt in ("auto", "text", "jsonl", "pubtator"):
        with pytest.raises(InputError, match=r"program.txt: not a text file \(a NUL byte at offset 7"):
            annotate(nlp, binary, tmp_path / "out.jsonl", fmt=fmt, show_progress=False)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("".join(chr(c) for c in range(0xc0, 0x100)).encode("latin-1") * 20)
    with pytest.raises(InputError, match="are not UTF-8"):
        annotate(nlp, latin, tmp_path / "out.jsonl", show_progress=False)
    assert not (tmp_path / "out.jsonl").exists()
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text(TEXTS[0], encoding="utf-8")
    (folder / "b.txt").write_bytes(binary.read_bytes())
    summary = annotate(nlp, folder, tmp_path / "folder.jsonl", show_progress=False)
    assert (summary.written, summary.skipped) == (1, 1)


def test_gzip_input_is_read_like_the_plain_file(nlp, tmp_path):
    import gzip

    plain = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    packed = tmp_path / "docs.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    annotate(nlp, plain, tmp_path / "plain.out.jsonl", show_progress=False)
    annotate(nlp, packed, tmp_path / "packed.out.jsonl", show_progress=False)
    assert read_jsonl(tmp_path / "plain.out.jsonl") == read_jsonl(tmp_path / "packed.out.jsonl")


def test_an_unwritable_output_is_an_error_naming_it(nlp, tmp_path):
    source = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    with pytest.raises(InputError, match="docs.jsonl: cannot create the output's folder: a file of that name"):
        annotate(nlp, source, source / "out.jsonl", show_progress=False)
    with pytest.raises(InputError, match="/proc/out.jsonl: cannot write the output here"):
        annotate(nlp, source, "/proc/out.jsonl", show_progress=False)


# -- the command line, on the real default pipeline ----------------------------------------
def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "spacy_sapbert.cli", "annotate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_cli_checks_its_arguments_before_loading_a_pipeline(tmp_path):
    result = run_cli("missing.jsonl", "-o", "out.jsonl", "--pipeline", "/no/such/pipeline", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == "error: missing.jsonl: input not found"
    Path(tmp_path / "ls.bin").write_bytes(Path(sys.executable).read_bytes()[:4096])
    result = run_cli("ls.bin", "-o", "out.jsonl", "--pipeline", "/no/such/pipeline", cwd=tmp_path)
    assert result.returncode == 2 and "not a text file" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_cli_n_process_2_finishes_and_equals_1_with_clean_logs(tmp_path):
    """`--n-process 2` hung for 600 s (torch's thread pool after fork); logs must not land on the bar."""
    lines = [json.dumps({"id": i, "text": t}) for i, t in enumerate(TEXTS * 2)] + ['{"text": 5}']
    (tmp_path / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = run_cli("docs.jsonl", "-o", "one.jsonl", "--batch-size", "2", cwd=tmp_path)
    two = run_cli("docs.jsonl", "-o", "two.jsonl", "--batch-size", "2", "--n-process", "2", cwd=tmp_path)
    for result in (one, two):
        assert result.returncode == 0, result.stderr
        assert "Could not load library" not in result.stderr and "Traceback" not in result.stderr
        warnings = [line for line in result.stderr.splitlines() if "skipped" in line]
        assert len(warnings) == 1 and warnings[0].startswith("WARNING"), result.stderr
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    assert len(read_jsonl(tmp_path / "two.jsonl")) == 8


def test_nlp_pipe_n_process_after_torch_has_run_does_not_hang(tiny_bert, kb, tmp_path):
    """The parent ran torch (its OpenMP pool is up), then forks: the children used to wait forever."""
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from spacy.language import Language
        from tests.pipes.test_component import make_nlp

        @Language.component("torch_work")
        def torch_work(doc):
            x = torch.randn(256, 256)
            torch.nn.functional.layer_norm(x @ x, (256,))
            return doc

        torch.set_num_threads(2)
        nlp = make_nlp({str(tiny_bert)!r}, {str(kb)!r})
        nlp.add_pipe("torch_work", first=True)
        nlp("warm up: the encoder is built and torch's pool started")
        docs = list(nlp.pipe({TEXTS!r} * 4, n_process=2, batch_size=2))
        print(len(docs), sum(len(d.ents) for d in docs))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["16", str(4 * 8)]


@pytest.mark.slow
def test_cli_low_memory_writes_the_same_output(tmp_path):
    """`--low-memory` changes how freed memory is handed back (spacy_sapbert.util.heap), never what is written."""
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"id": i, "text": t}) for i, t in enumerate(TEXTS))
                                         + "\n", encoding="utf-8")
    plain = run_cli("docs.jsonl", "-o", "plain.jsonl", cwd=tmp_path)
    low = run_cli("docs.jsonl", "-o", "low.jsonl", "--low-memory", cwd=tmp_path)
    assert plain.returncode == 0 and low.returncode == 0, plain.stderr + low.stderr
    assert (tmp_path / "plain.jsonl").read_bytes() == (tmp_path / "low.jsonl").read_bytes()
    assert len(read_jsonl(tmp_path / "low.jsonl")) == len(TEXTS)


def test_cli_low_memory_is_refused_with_ray(tmp_path):
    result = run_cli("docs.jsonl", "-o", "out", "--engine", "ray", "--low-memory", cwd=tmp_path)
    assert result.returncode == 2 and "--low-memory: applies to the local engine" in result.stderr
