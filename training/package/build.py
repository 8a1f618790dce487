"""Assemble the embedded default pipeline: our NER → abbreviation_entities → sapbert_linker.

The encoder's weights are rounded to float16 first, so the shipped fp16 safetensors are
exactly the model the index was built with; every KB name is encoded once into an exact
index, which is then converted (no re-encoding) into the compact product-quantised index
that ships. How much the compression costs is measured on the development mentions
(agreement of the top concept with exact search) and written into the model card
(:mod:`.card`).
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Union

import numpy as np

from spacy_sapbert.util.atomic import atomic_dir, check_replaceable, remove_stale_temps
from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import is_index_folder

from .card import CONFIG_SENTENCES, model_card

if TYPE_CHECKING:
    from spacy.language import Language

    from spacy_sapbert.index.name_index import NameIndex

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]

PIPELINE_NAME = "sapbert_default"
BUILD_FILE = "build.json"
MARKER_KEY = "sapbert_package"
"""The key of build.json that marks a folder as this writer's output, which a later run may replace."""
PACKAGE_FORMAT = 1
_REMEDY = "Choose a new or empty folder for {option}, or pass --overwrite to replace it and everything in it"
LEGACY_BUILD_KEYS = ("kb", "index_rows", "size_mb")
"""build.json of packages written before the marker existed (the shipped default among them)."""
DEFAULT_PQ_M = 128
"""128 sub-quantisers of 4-bit codes (:data:`DEFAULT_PQ_BITS`): 64 bytes per name, which keeps the whole default
under 80 MB. On the 2,922 distinct BC5CDR/NCBI dev mentions, 64 8-bit codes returned exact search's best concept
first for 90.9% (in its top 10: 99.8%), 96 for 93.2% (100%) at +4.3 MB; 10- and 12-bit codes gained under 1 point.
128 4-bit codes are searched by FAISS's fast-scan kernels: 1,500 queries over the default's 180,068 names in 0.42 s
against 6.5 s for 64 8-bit codes, their best row exact search's best for 87.1% of them against 84.1%."""
DEFAULT_PQ_BITS = 4
REFINE_DIMS = 6
"""Dimensions per byte of residual codes (:mod:`spacy_sapbert.index.refine`): 64 bytes a name at 384 dimensions
(+11.9 MB for the default's 180,068 rows) bring the candidates' scores within ~0.013 of exact (96 bytes: ~0.009),
so :data:`DEFAULT_RESCORE_GAP` can be narrow."""


def default_refine_m(dim: int) -> int:
    """Residual sub-quantisers for vectors of ``dim`` dimensions: ``dim`` / :data:`REFINE_DIMS`, or the nearest
    count that divides ``dim``."""
    return next(m for m in (dim // REFINE_DIMS, dim // 4, dim // 2, dim, 1) if m >= 1 and dim % m == 0)
DEFAULT_RESCORE_GAP = 0.03
"""Candidates within 0.03 of a span's best refined score are scored exactly by encoding their names
(:mod:`spacy_sapbert.index.exact_rescore`). On the 2,572 distinct gold mention texts of BC5CDR dev and NCBI
test the best concept is then exact search's for all of them, 2,713 candidates re-scored, where the 4-bit codes
alone needed a gap of 0.1 and 10,374 candidates for 99.96% (a gap of 0.05: 5,342, 99.77%)."""


def agreement(exact: NameIndex, compact: NameIndex, queries: np.ndarray, k: int = 10) -> Dict[str, float]:
    """How often the compact index's best concept equals exact search's (and is in its top k)."""
    _, exact_rows = exact.search(queries, 1)
    _, compact_rows = compact.search(queries, k)
    top = [exact.concept_ids[r] for r in exact_rows[:, 0]]
    same1 = [compact.concept_ids[rows[0]] == t for rows, t in zip(compact_rows, top)]
    in_k = [t in {compact.concept_ids[r] for r in rows if r >= 0} for rows, t in zip(compact_rows, top)]
    return {"queries": len(top), "top1_agreement": float(np.mean(same1)) if top else 0.0,
            f"exact_top1_in_top{k}": float(np.mean(in_k)) if top else 0.0}


def _read_json_object(path: Path) -> Optional[Dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_package_output(folder: PathLike) -> bool:
    """Whether ``folder`` was written by this packager, so that a new build may replace it.

    The mark is build.json's ``sapbert_package`` key; packages written before the key existed
    (the shipped default among them) are recognised by their build report and meta.json."""
    folder = Path(folder)
    build = _read_json_object(folder / BUILD_FILE)
    if build is None:
        return False
    if isinstance(build.get(MARKER_KEY), dict):
        return True
    return all(key in build for key in LEGACY_BUILD_KEYS) and (folder / "meta.json").is_file()


def package_report(pipeline: Path) -> Dict[str, Any]:
    """The build report of a packaged default, less what describes the package as written (its marker, sizes):
    what a ``package-*`` step that writes it again starts from."""
    build_file = Path(pipeline) / BUILD_FILE
    if not build_file.is_file():
        raise InputError(f"not a packaged default pipeline ({BUILD_FILE} missing)", pipeline)
    return {k: v for k, v in json.loads(build_file.read_text(encoding="utf-8")).items()
            if k not in (MARKER_KEY, "size_mb", "components_mb")}


def check_package_output(output: Path, overwrite: bool) -> None:
    """Refuse ``output`` unless it is new, empty, an earlier package, or ``overwrite`` is given."""
    check_replaceable(output, is_package_output, f"an earlier package-default output (no {BUILD_FILE} with a "
                      f"{MARKER_KEY!r} marker)", _REMEDY.format(option="--output"), "--output", overwrite)


def check_exact_index(folder: Path, overwrite: bool) -> None:
    """Refuse ``folder`` unless it is new, empty, an earlier saved index, or ``overwrite`` is given."""
    check_replaceable(folder, is_index_folder, "a saved name index (no manifest.json)",
                      _REMEDY.format(option="--exact-index"), "--exact-index",
                      overwrite)


def _clean_leftovers(folder: Path) -> None:
    """Temporary siblings of killed runs (a half-built or a replaced package) hold tens of MB."""
    removed = remove_stale_temps(folder.parent, folder.name) if folder.parent.is_dir() else 0
    if removed:
        logger.info("removed %d temporary folder(s) left beside %s by an interrupted run", removed, folder)


def save_index(index: NameIndex, folder: PathLike, overwrite: bool = False) -> Path:
    """Save ``index`` to ``folder`` so that a killed run leaves the earlier index, or the new one, whole."""
    folder = Path(folder)
    check_exact_index(folder, overwrite)
    _clean_leftovers(folder)
    with atomic_dir(folder) as tmp:
        index.save(tmp)
    return folder


def exact_index_for(kb: Any, encoder: Any, folder: Optional[PathLike] = None, reuse: bool = False,
                    overwrite: bool = False) -> NameIndex:
    """The exact (flat) index of ``kb`` by ``encoder``: with ``reuse``, the one saved in ``folder``
    when it is theirs (fingerprints checked; another one is encoded again), else every name
    encoded, and saved to ``folder`` when given (an earlier index there is replaced; any other
    non-empty folder only with ``overwrite``)."""
    from spacy_sapbert.index.name_index import IndexMismatchError, NameIndex

    if reuse and folder and is_index_folder(folder):
        try:
            return NameIndex.load(folder, encoder=encoder, kb=kb)
        except IndexMismatchError as err:
            logger.info("not reusing %s (%s): encoding the names again", folder, err)
    exact = NameIndex.build(kb, encoder, kind="flat")
    if folder:
        save_index(exact, folder, overwrite)
    return exact


def check_threshold(threshold: Optional[float]) -> None:
    """A default threshold is a calibrated probability (or a cosine): refused outside [0, 1], before any work."""
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise InputError(f"must be between 0 and 1, got {threshold}", field="--threshold")


def set_default_threshold(nlp: Language, report: Dict[str, Any], threshold: Optional[float], reason: str = "",
                          linker: str = LINKER_PIPE) -> None:
    """Make ``threshold`` the linker's default (its config and the build report, which the model card
    reads): the end-to-end choice made on dev (`sapbert ner-e2e --sweep`), beside the calibration's
    high-precision one. ``None`` leaves both as they are."""
    if threshold is None:
        return
    check_threshold(threshold)
    nlp.get_pipe(linker).threshold = threshold
    nlp.get_pipe_config(linker)["threshold"] = threshold
    labels = (report.get("default_threshold") or {}).get("labels")  # per-label choices stay with the pipe's
    report["default_threshold"] = {"value": threshold, "chosen_for": reason, **({"labels": labels} if labels else {})}


def write_pipeline(nlp: Language, report: Dict[str, Any], output: PathLike, card_extra: str = "",
                   overwrite: bool = False, started: Optional[float] = None,
                   keep_from: Optional[PathLike] = None, keep: Sequence[str] = ()) -> Dict[str, Any]:
    """Write ``nlp``, build.json (with the package marker) and the model card to ``output``.

    The package is built in a temporary sibling and swapped in whole, so a run killed at any
    moment leaves the earlier package or the new one, never a mix or nothing; ``report`` gains
    the package's sizes, and with ``started`` (a ``time.perf_counter()``) the build's seconds.
    The component folders (or folders and files inside them) named in ``keep`` are copied byte for byte from the package
    ``keep_from`` instead of being saved again."""
    import shutil

    output = Path(output)
    check_package_output(output, overwrite)
    _clean_leftovers(output)
    with atomic_dir(output) as tmp:
        nlp.to_disk(tmp)
        for name in keep:
            source = Path(keep_from) / name  # type: ignore[arg-type]
            if source.is_dir():
                shutil.rmtree(tmp / name)
                shutil.copytree(source, tmp / name)
            else:
                shutil.copy2(source, tmp / name)
        if started is not None:
            report["seconds"] = round(time.perf_counter() - started, 1)
        report["size_mb"] = round(sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) / 1e6, 1)
        report["components_mb"] = {
            p.name: round(sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6, 1)
            for p in tmp.iterdir() if p.is_dir()}
        build = {MARKER_KEY: {"format": PACKAGE_FORMAT, "pipeline": nlp.meta.get("name", PIPELINE_NAME)}, **report}
        (tmp / BUILD_FILE).write_text(json.dumps(build, indent=1) + "\n", encoding="utf-8")
        linker = nlp.get_pipe(LINKER_PIPE) if LINKER_PIPE in nlp.pipe_names else None
        settings = {setting: getattr(linker, setting, None) for setting in CONFIG_SENTENCES}
        (tmp / "README.md").write_text(model_card(report, nlp.meta, card_extra, settings), encoding="utf-8")
        check_package_output(output, overwrite)  # the build took minutes: the folder may have changed meanwhile
    return report


NER_PIPES = ("sapbert_ner", "ner")
"""The NER components a default pipeline can start with: the transformer NER, or spaCy's (tok2vec + ner)."""


def build_default_pipeline(ner: PathLike, model: PathLike, kb_path: PathLike, output: PathLike, *,
                           probe_mentions: Sequence[str] = (), pq_m: Optional[int] = DEFAULT_PQ_M,
                           pq_bits: int = DEFAULT_PQ_BITS, refine_m: Optional[int] = None,
                           version: str = "0.1.0", card_extra: str = "", device: str = "cpu",
                           exact_index: Optional[PathLike] = None, reuse_exact: bool = False,
                           overwrite: bool = False) -> Dict[str, Any]:
    """Write the default pipeline to ``output``; return what was measured. With
    ``exact_index``, the exact (flat) index is saved there too (for benchmarks and the demo);
    with ``reuse_exact`` as well, an exact index already there (same model and KB: the
    fingerprints are checked) is loaded instead of encoding every name again.

    An earlier package in ``output`` (and an earlier index in ``exact_index``) is replaced;
    any other non-empty folder only with ``overwrite``. Both are checked before the build,
    and written so that a killed run leaves the old folder or the complete new one."""
    import spacy

    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase

    started = time.perf_counter()
    output = Path(output)
    check_package_output(output, overwrite)
    if exact_index:
        check_exact_index(Path(exact_index), overwrite)
    nlp = spacy.load(ner)
    ner_pipe = next((name for name in NER_PIPES if name in nlp.pipe_names), None)
    if ner_pipe is None:
        raise InputError(f"not a NER pipeline (no {' or '.join(repr(n) for n in NER_PIPES)} component)", ner)
    if "abbreviation_entities" not in nlp.pipe_names:
        nlp.add_pipe("abbreviation_entities", after=ner_pipe)
    encoder = Encoder(model, device=device)
    encoder.round_weights("float16")
    kb = KnowledgeBase.from_jsonl(kb_path)
    exact = exact_index_for(kb, encoder, exact_index, reuse_exact, overwrite)
    params = {"pq_m": pq_m, "pq_bits": pq_bits} if pq_m else {"pq_bits": pq_bits}
    compact = exact.convert("pq", **params, refine_m=default_refine_m(exact.dim) if refine_m is None else refine_m)
    report: Dict[str, Any] = {"ner_pipe": ner_pipe, "kb": kb.name, "kb_stats": kb.stats().as_dict(),
                              "index_rows": len(compact),
                              "index_params": compact.manifest["params"], "rescore_gap": DEFAULT_RESCORE_GAP,
                              "encode_seconds": exact.manifest["build"]["encode_seconds"],
                              "names_per_second": exact.manifest["build"]["names_per_second"]}
    if probe_mentions:
        queries = encoder.encode(list(dict.fromkeys(probe_mentions)))
        report["pq_vs_exact"] = agreement(exact, compact, queries)
    linker = nlp.add_pipe(LINKER_PIPE, config={"model": str(model), "kb": str(kb_path), "device": "auto",
                                                    "rescore_gap": DEFAULT_RESCORE_GAP})
    linker.use(encoder, kb, compact)
    nlp.meta.update({
        "name": PIPELINE_NAME, "version": version,
        "description": "Biomedical CHEMICAL/DISEASE NER, scispaCy's abbreviation detector, and entity linking to "
                       "MeSH 2024 + MEDIC with a self-aligned (SapBERT-style) MiniLM encoder over a FAISS index.",
        "license": "Apache-2.0 (code, encoder); see README.md for the vocabularies' terms",
        "url": "https://github.com/spacy-sapbert/spacy-sapbert",
        "author": "spacy-sapbert",
        "sources": [{"name": "BC5CDR"}, {"name": "NCBI disease"}, {"name": "MeSH 2024"}, {"name": "CTD MEDIC"},
                    {"name": "all-MiniLM-L6-v2"}],
    })
    write_pipeline(nlp, report, output, card_extra, overwrite, started=started)
    logger.info("default pipeline written to %s: %s", output, json.dumps(report))
    return report


__all__ = ["build_default_pipeline", "agreement", "check_exact_index", "check_package_output", "exact_index_for",
           "is_package_output", "save_index", "write_pipeline"]
