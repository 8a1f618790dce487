"""scispaCy's linker over one of our KBs, built once and reopened by every benchmark process.

What a scispaCy user links with is its ``EntityLinker``: character 3-gram TF-IDF vectors of every
alias in an nmslib HNSW graph (M=100, efConstruction=2000, efSearch=200). Building that graph
over the embedded default's KB takes minutes on two cores, so the pipeline benchmark builds it
once (:func:`build_peer_index`) and each measured process reopens it (:func:`load_peer_generator`),
as scispaCy's own linkers do with their downloaded files.

scispaCy saves its vectoriser with joblib (a pickle); nothing here writes or reads one: the
vectoriser is rebuilt from its vocabulary (JSON) and IDF weights (``.npy``), and the reopened
one is checked against the saved TF-IDF rows of the first aliases.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

import numpy as np

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
FORMAT = "scispacy-peer/1"
EF_SEARCH = 200
"""What scispaCy sets when it opens one of its indexes (nmslib's own default is 20)."""
VECTORIZER = {"analyzer": "char_wb", "ngram_range": (3, 3), "min_df": 10}
"""scispaCy's TF-IDF settings (``create_tfidf_ann_index``)."""


def scispacy_kb(dictionary: KnowledgeBase) -> Tuple[Any, Dict[str, int]]:
    """scispaCy's ``KnowledgeBase`` of our concepts (normalised names; the first is canonical) and each
    concept's position in ours, which breaks score ties the way our KB orders concepts."""
    from scispacy.linking_utils import Entity
    from scispacy.linking_utils import KnowledgeBase as ScispacyKB

    entities = []
    order: Dict[str, int] = {}
    for concept in dictionary:
        names = [n for n in KnowledgeBase.normalized_names(concept) if n]
        if not names:
            continue
        order[concept.concept_id] = len(order)
        entities.append(Entity(concept.concept_id, names[0], names[1:], list(concept.types), concept.definition))
    return ScispacyKB(entities), order


def build_peer_index(dictionary: KnowledgeBase, folder: PathLike) -> Path:
    """scispaCy's TF-IDF + HNSW index over ``dictionary``, written to ``folder`` (replaced whole, or
    left as it was if the build fails). Reused as it is when it was built from the same KB."""
    from .baselines import _scispacy_build_patches
    import scipy.sparse
    from scispacy.candidate_generation import create_tfidf_ann_index

    folder = Path(folder)
    if peer_manifest(folder).get("kb_fingerprint") == dictionary.fingerprint():
        logger.info("%s: scispaCy's index of KB %r is there already", folder, dictionary.name)
        return folder
    if folder.exists() and not (folder / "manifest.json").is_file():
        raise InputError("exists and is not a scispaCy peer index; choose an empty or new folder", str(folder))
    started = time.perf_counter()
    kb, _ = scispacy_kb(dictionary)
    logger.info("scispaCy: building its TF-IDF + HNSW index over %d aliases (minutes)", len(kb.alias_to_cuis))
    with _scispacy_build_patches():
        aliases, vectorizer, ann_index = create_tfidf_ann_index(None, kb)
    build_seconds = time.perf_counter() - started
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        (work / "aliases.json").write_text(json.dumps(aliases), encoding="utf-8")
        (work / "vocabulary.json").write_text(json.dumps({k: int(v) for k, v in vectorizer.vocabulary_.items()}),
                                              encoding="utf-8")
        np.save(work / "idf.npy", vectorizer.idf_.astype(np.float64))
        scipy.sparse.save_npz(work / "tfidf.npz", vectorizer.transform(aliases).astype(np.float32).tocsr())
        ann_index.saveIndex(str(work / "hnsw.bin"), save_data=False)
        manifest = {"format": FORMAT, "kb_name": dictionary.name, "kb_fingerprint": dictionary.fingerprint(),
                    "aliases": len(aliases), "hnsw": {"M": 100, "efConstruction": 2000}, "ef_search": EF_SEARCH,
                    "build_seconds": round(build_seconds, 3)}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        os.chmod(work, 0o755)  # mkdtemp makes it private; the index is an ordinary folder
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(work, folder)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return folder


def peer_manifest(folder: PathLike) -> Dict[str, Any]:
    """What :func:`build_peer_index` recorded (KB, aliases, build seconds); empty for another folder."""
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) and manifest.get("format") == FORMAT else {}


def load_peer_generator(dictionary: KnowledgeBase, folder: PathLike) -> Any:
    """scispaCy's ``CandidateGenerator`` reopened from :func:`build_peer_index`'s files."""
    import nmslib
    import scipy.sparse
    from scispacy.candidate_generation import CandidateGenerator
    from sklearn.feature_extraction.text import TfidfVectorizer

    folder = Path(folder)
    manifest = peer_manifest(folder)
    if manifest.get("kb_fingerprint") != dictionary.fingerprint():
        raise InputError(f"is not scispaCy's index of KB {dictionary.name!r} (build it with build_peer_index)",
                         str(folder / "manifest.json"), field="kb_fingerprint")
    aliases: List[str] = json.loads((folder / "aliases.json").read_text(encoding="utf-8"))
    vocabulary = json.loads((folder / "vocabulary.json").read_text(encoding="utf-8"))
    vectorizer = TfidfVectorizer(vocabulary=vocabulary, dtype=np.float32, **VECTORIZER)
    vectorizer.idf_ = np.load(folder / "idf.npy", allow_pickle=False)
    tfidf = scipy.sparse.load_npz(folder / "tfidf.npz").astype(np.float32)
    probe = min(len(aliases), 50)
    if probe and abs(vectorizer.transform(aliases[:probe]) - tfidf[:probe]).max() > 1e-5:
        raise InputError("the rebuilt TF-IDF vectoriser does not reproduce the saved vectors", str(folder))
    index = nmslib.init(method="hnsw", space="cosinesimil_sparse", data_type=nmslib.DataType.SPARSE_VECTOR)
    index.addDataPointBatch(tfidf)
    index.loadIndex(str(folder / "hnsw.bin"))
    index.setQueryTimeParams({"efSearch": EF_SEARCH})
    kb, _ = scispacy_kb(dictionary)
    return CandidateGenerator(index, vectorizer, aliases, kb)


__all__ = ["EF_SEARCH", "build_peer_index", "load_peer_generator", "peer_manifest", "scispacy_kb"]
