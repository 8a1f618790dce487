"""`spacy package` turns a pipeline with the linker into an installable package that loads
in a fresh interpreter and links exactly as the pipeline it came from."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import spacy

from tests.linker_fixtures import write_small_kb

TEXT = "Plaquenil after a heart attack with renal failure; MS?"


def test_spacy_package_builds_an_installable_pipeline(tiny_bert, tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns(
        [{"label": "ENT", "pattern": p} for p in ("Plaquenil", "heart attack", "renal failure", "MS")])
    nlp.add_pipe("sapbert_linker", config={"model": str(tiny_bert), "kb": str(write_small_kb(tmp_path)),
                                           "pooling": "mean"})
    expected = [[e.text, e.kb_id_, [[c, s] for c, s in e._.kb_ents]] for e in nlp(TEXT).ents]
    nlp.to_disk(tmp_path / "pipeline")

    env = dict(os.environ, HF_HUB_OFFLINE="1")
    packages = tmp_path / "packages"
    packages.mkdir()
    built = subprocess.run(
        [sys.executable, "-m", "spacy", "package", str(tmp_path / "pipeline"), str(packages),
         "--name", "sapbert_test", "--version", "0.0.1", "--build", "sdist"],
        capture_output=True, text=True, env=env, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (sdist,) = (packages / "en_sapbert_test-0.0.1" / "dist").glob("*.tar.gz")
    meta = json.loads((packages / "en_sapbert_test-0.0.1" / "meta.json").read_text())
    assert any(r.startswith("spacy-sapbert") for r in meta["requirements"])

    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(sdist)], capture_output=True, text=True, env=env, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    requires = (next(target.glob("en_sapbert_test-*.dist-info")) / "METADATA").read_text()
    assert "Requires-Dist: spacy-sapbert" in requires

    script = textwrap.dedent(f"""
        import json, spacy
        nlp = spacy.load("en_sapbert_test")
        doc = nlp({TEXT!r})
        print(json.dumps([[e.text, e.kb_id_, [[c, s] for c, s in e._.kb_ents]] for e in doc.ents]))
    """)
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                            env=dict(env, PYTHONPATH=str(target)), cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert json.loads(loaded.stdout.strip().splitlines()[-1]) == expected
