"""scispaCy's linker index built once and reopened (training/evaluation/scispacy_peer.py): the reopened
generator answers as the freshly built one does, a second build of the same KB reuses the files, and a
folder of something else or an index of another KB is refused by name."""
from __future__ import annotations

import contextlib
import io

import pytest

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.training.evaluation.baselines import ScispacyCandidates
from spacy_sapbert.training.evaluation.scispacy_peer import build_peer_index, load_peer_generator, peer_manifest

STEMS = "breast ovarian renal hepatic cardiac gastric colonic pulmonary cerebral spinal dermal retinal".split()
ENDS = "cancer failure disease tumour syndrome infection injury fibrosis atrophy necrosis lesion cyst".split()
QUERIES = ["renal failure", "gastric cyst", "cardiac tumor", "lung fibrosis", "zebra"]


def kb_of(names):
    # every character 3-gram occurs in >= 10 names, so scispaCy's min_df=10 keeps them all
    return KnowledgeBase([Concept(f"C{i:03d}", name) for i, name in enumerate(names)])


def answers(generator):
    with contextlib.redirect_stdout(io.StringIO()):
        found = generator(QUERIES, 10)
    return [[(c.concept_id, round(max(c.similarities), 5)) for c in sorted(
        candidates, key=lambda c: (-max(c.similarities), c.concept_id))] for candidates in found]


def test_reopened_index_answers_as_the_built_one(tmp_path):
    kb = kb_of([f"{a} {b}" for a in STEMS for b in ENDS])
    built = ScispacyCandidates()
    built.prepare(kb)
    folder = build_peer_index(kb, tmp_path / "peer")
    reopened = load_peer_generator(kb, folder)
    assert answers(reopened) == answers(built._generator)
    assert answers(reopened)[0][0] == ("C025", 1.0)  # "renal failure" itself
    assert peer_manifest(folder)["aliases"] == 144 and peer_manifest(folder)["build_seconds"] > 0
    stamp = (folder / "hnsw.bin").stat().st_mtime_ns
    assert build_peer_index(kb, folder) == folder and (folder / "hnsw.bin").stat().st_mtime_ns == stamp


def test_other_kb_and_foreign_folder_are_refused(tmp_path):
    kb = kb_of([f"{a} {b}" for a in STEMS for b in ENDS])
    folder = build_peer_index(kb, tmp_path / "peer")
    other = kb_of([f"{b} {a}" for a in STEMS for b in ENDS])
    with pytest.raises(InputError, match="manifest.json.*kb_fingerprint|kb_fingerprint.*manifest.json"):
        load_peer_generator(other, folder)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(InputError, match="not a scispaCy peer index"):
        build_peer_index(kb, foreign)
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "keep me"
