"""``sapbert annotate --engine ray`` on a real local Ray cluster (``ray start`` on 2 CPUs):
the output equals the local engine's, and killed workers or a killed driver lose and
duplicate nothing once the same command is run again."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from spacy_sapbert.annotate import annotate
from spacy_sapbert.annotate.compare import compare_outputs

from tests.linker_fixtures import write_small_kb
from tests.annotate.test_annotate import TEXTS
from tests.pipes.test_component import make_nlp

pytestmark = pytest.mark.slow  # a Ray cluster to start, and each test runs for a minute or more

RAY = str(Path(sys.executable).with_name("ray"))
CLI = [sys.executable, "-m", "spacy_sapbert.cli", "annotate"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """A Ray head node on this machine, as a user starts one; its address for --address."""
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    port = free_port()
    # A cluster reachable from this machine only, so without Ray's token authentication: a driver that
    # connects by host:port to a cluster that has it must be given the token, which is not this test's subject.
    before = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", "--num-cpus", "2", f"--port={port}",
                    f"--temp-dir={temp}", "--include-dashboard=false", "--disable-usage-stats",
                    "--object-store-memory", "200000000"], check=True, capture_output=True)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)
        if before is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = before


@pytest.fixture(scope="module")
def pipeline(tiny_bert, tmp_path_factory):
    """The tiny test pipeline saved to disk (actors load it by path); and the same, loaded here."""
    folder = tmp_path_factory.mktemp("pipeline")
    nlp = make_nlp(tiny_bert, write_small_kb(folder))
    nlp.to_disk(folder / "nlp")
    return folder / "nlp", nlp


def write_docs(path: Path, count: int) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            handle.write(json.dumps({"id": f"d{i}", "text": f"{TEXTS[i % 4]} Case {i}.", "year": 2000 + i % 20}) + "\n")
            if i % 97 == 3:
                handle.write("{broken\n")
    return path


def ray_command(source, out, cluster, pipeline, *extra):
    return [*CLI, str(source), "-o", str(out), "--engine", "ray", "--address", cluster, "--pipeline", str(pipeline),
            "--batch-size", "8", *extra]


def reference(pipeline, source, folder) -> Path:
    out = folder / "local.jsonl"
    annotate(pipeline[1], source, out, batch_size=8, show_progress=False)
    return out


def test_ray_output_equals_the_local_engine(cluster, pipeline, tmp_path):
    source = write_docs(tmp_path / "docs.jsonl", 300)
    out = tmp_path / "out"
    done = subprocess.run(ray_command(source, out, cluster, pipeline[0], "--num-actors", "2", "--shard-mb", "0.004"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"written +300\n", done.stdout) and re.search(r"skipped \(malformed\) +4\n", done.stdout)
    assert "docs.jsonl:5: skipped (malformed record: invalid JSON" in done.stderr
    assert "documents/s" in done.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["shards"]) >= 4
    comparison = compare_outputs(reference(pipeline, source, tmp_path), out)
    assert comparison.same, comparison.line()
    # the same command again: everything is there, nothing is annotated twice
    again = subprocess.run(ray_command(source, out, cluster, pipeline[0], "--shard-mb", "0.004"),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"already done +304\n", again.stdout) and re.search(r"written +0\n", again.stdout)


def test_a_glob_of_gzip_files_and_clear_failures(cluster, pipeline, tmp_path):
    source = write_docs(tmp_path / "docs.jsonl", 20)
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    for name in ("pubmed01", "pubmed02"):
        (baseline / f"{name}.jsonl.gz").write_bytes(gzip.compress(source.read_bytes()))
    out = tmp_path / "from-glob"
    done = subprocess.run(ray_command(str(baseline / "*.jsonl.gz"), out, cluster, pipeline[0], "--num-actors", "2"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    shards = json.loads((out / "manifest.json").read_text())["shards"]
    assert [Path(s["path"]).name for s in shards] == ["pubmed01.jsonl.gz", "pubmed02.jsonl.gz"]
    local = reference(pipeline, source, tmp_path).read_bytes()
    assert [(out / s["part"]).read_bytes() for s in shards] == [local, local]

    strict = subprocess.run(ray_command(source, tmp_path / "out", cluster, pipeline[0], "--strict"),
                            capture_output=True, text=True, timeout=300)
    assert strict.returncode == 2 and "docs.jsonl:5: malformed record: invalid JSON" in strict.stderr
    refused = subprocess.run(ray_command(source, tmp_path / "docs.jsonl", cluster, pipeline[0]),
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "is a file" in refused.stderr


def map_workers() -> list:
    """PIDs of the Ray Data actors (their process title names the map operator)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"MapWorker" in cmdline and b"ShardAnnotator" in cmdline:
                pids.append(int(entry.name))
    return pids


def wait_for(condition, timeout=240.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def done_markers(markers: Path) -> list:
    """The shards' finished markers; a marker still being written is a hidden temporary file beside them."""
    return [p for p in markers.iterdir() if not p.name.startswith(".")] if markers.is_dir() else []


def test_killed_workers_and_driver_lose_and_duplicate_nothing(cluster, pipeline, tmp_path):
    source = write_docs(tmp_path / "docs.jsonl", 3000)
    out = tmp_path / "out"
    command = ray_command(source, out, cluster, pipeline[0], "--num-actors", "2", "--shard-mb", "0.01")
    markers = out / "_done"

    # 1. kill -9 an actor mid-run: Ray restarts it and retries its shard; the run completes
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: len(done_markers(markers)) >= 2), "no shard finished"
    workers = map_workers()
    assert workers, "no Ray Data actor process found"
    os.kill(workers[0], signal.SIGKILL)
    killed_at = len(done_markers(markers))
    stdout, stderr = driver.communicate(timeout=600)
    shards = len(json.loads((out / "manifest.json").read_text())["shards"])
    assert killed_at < shards, "the actor was killed after the last shard: nothing was tested"
    assert driver.returncode == 0, stderr[-3000:]
    expected = reference(pipeline, source, tmp_path)
    comparison = compare_outputs(expected, out)
    assert comparison.same, comparison.line()

    # 2. kill -9 the driver mid-run (its actors go with it), then run the same command again
    shutil.rmtree(out)
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for(lambda: len(done_markers(markers)) >= 3), "no shard finished"
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    # its actors go with it, but not at once: one may still finish a shard, so count once they are gone
    assert wait_for(lambda: not map_workers(), timeout=120), "the killed driver's actors are still running"
    finished = {p.name: (out / p.name).with_suffix(".jsonl").stat().st_ino for p in done_markers(markers)}
    assert 3 <= len(finished) < shards
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"({len(finished):,} finished before this run)" in again.stdout
    # what was finished before the kill is kept as it was, not annotated again
    assert {name: (out / name).with_suffix(".jsonl").stat().st_ino for name in finished} == finished
    comparison = compare_outputs(expected, out)
    assert comparison.same, comparison.line()
