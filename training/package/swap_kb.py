"""Replace the knowledge base of a built default pipeline, keeping its encoder and its NER.

A new KB (``sapbert kb-add-mentions`` adds the training mentions to mesh-medic) changes what
the linker searches, not how it encodes: this loads the earlier package, encodes the new KB's
names with the package's own (float16) encoder, builds the index kind the package had (same
parameters, but those ``index_params`` gives) and writes the package again (atomically, with the model card); the other
components are copied byte for byte and so is the encoder's folder.

The score calibration was fitted on the previous KB's scores (against a KB with more names they
are higher): with ``calibrate_on`` (a development corpus) it is fitted again on the new pipeline
and the threshold chosen for ``min_precision``, as ``sapbert calibrate`` does; without, the old
one is kept and the report and a warning say so. A default threshold chosen end to end for the
previous calibration (``package-ner --threshold``) does not hold for the new one: it is dropped,
unless ``threshold`` gives the one chosen for this KB.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Union

from spacy_sapbert.pipes.linker_parts import ENCODER_DIR
from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError

from .build import (agreement, check_exact_index, check_package_output, check_threshold, exact_index_for,
                    package_report, set_default_threshold, write_pipeline)

if TYPE_CHECKING:
    from spacy.language import Language

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


def replace_kb(pipeline: PathLike, kb_path: PathLike, output: PathLike, *, exact_index: Optional[PathLike] = None,
               reuse_exact: bool = False, calibrate_on: Optional[PathLike] = None, min_precision: float = 0.95,
               kb_description: Optional[str] = None, probe_mentions: Sequence[str] = (), card_extra: str = "",
               overwrite: bool = False, threshold: Optional[float] = None, threshold_reason: str = "",
               index_params: Optional[Dict[str, int]] = None, rescore_gap: Optional[float] = None) -> Dict[str, Any]:
    """Write ``pipeline`` with its linker searching ``kb_path`` to ``output`` (which may be ``pipeline``).
    With ``exact_index``, the exact (flat) index of the new KB is saved there too, or loaded from
    there with ``reuse_exact`` when it is one of this encoder and KB (fingerprints checked);
    ``probe_mentions`` measure the compact index against it, as ``package-default`` does; ``threshold``
    becomes the linker's default (:func:`~.build.set_default_threshold`); ``index_params`` replace the previous
    index's parameters of those names (``pq_m``, ``pq_bits``, ``refine_m``); ``rescore_gap`` the linker's."""
    import spacy

    from spacy_sapbert.kb.knowledge_base import KnowledgeBase

    started = time.perf_counter()
    pipeline = Path(pipeline)
    earlier = package_report(pipeline)
    check_package_output(Path(output), overwrite)  # before minutes of encoding, not after
    check_threshold(threshold)
    if exact_index:
        check_exact_index(Path(exact_index), overwrite)
    report = _carried_report(earlier, kb_path, kb_description)
    nlp = spacy.load(pipeline)
    if LINKER_PIPE not in nlp.pipe_names:
        raise InputError(f"no {LINKER_PIPE} component", pipeline)
    linker = nlp.get_pipe(LINKER_PIPE)
    encoder, previous = linker.encoder, linker.index
    kb = KnowledgeBase.from_jsonl(kb_path)
    exact = exact_index_for(kb, encoder, exact_index, reuse_exact, overwrite)
    kind, params = previous.manifest["kind"], dict(previous.manifest.get("params") or {})
    if index_params and kind == "flat":
        raise InputError(f"the package's index is flat: it takes no parameters, got {sorted(index_params)}",
                         field="index_params")
    params.update(index_params or {})
    compact = exact if kind == "flat" else _compact_index(previous, exact, kind, params)
    if probe_mentions:
        report["pq_vs_exact"] = agreement(exact, compact, encoder.encode(list(dict.fromkeys(probe_mentions))))
    calibration = linker.calibration
    # fitted on the scores of another KB; the same KB in a new index keeps its exactly re-scored best candidates
    stale_calibration = calibration is not None and previous.kb_fingerprint != exact.kb_fingerprint
    linker.use(encoder, kb, compact)
    linker.calibration = calibration
    if rescore_gap is not None:
        linker.configure(rescore_gap=rescore_gap)
    if stale_calibration or calibration is None:
        report.pop("calibration", None)  # measured on the previous KB's scores (or there is none)
    if calibrate_on is not None:
        report["calibration"] = _recalibrate(nlp, calibrate_on, min_precision)
        stale_calibration = False
        report.pop("default_threshold", None)
        linker.label_thresholds = None  # chosen on the old scores, as the default was
    set_default_threshold(nlp, report, threshold, threshold_reason)
    report.update({"kb": kb.name, "kb_file": str(kb_path), "kb_stats": kb.stats().as_dict(),
                   "index_rows": len(compact), "index_params": compact.manifest.get("params"),
                   "encode_seconds": exact.manifest["build"].get("encode_seconds"),
                   "names_per_second": exact.manifest["build"].get("names_per_second"),
                   "rescore_gap": linker.settings.rescore_gap,
                   "calibration_fitted_on_previous_kb": stale_calibration,
                   "kb_swap_seconds": round(time.perf_counter() - started, 1)})
    # the setting records where the KB came from; set last, as a changed setting (the threshold) writes the
    # pipe's settings, its old KB path included, back into the config
    nlp.get_pipe_config(LINKER_PIPE)["kb"] = str(kb_path)
    # the vocab too: linking the calibration corpus put its words into the string store
    keep = [n for n in [*nlp.pipe_names, "vocab"] if n != LINKER_PIPE and (pipeline / n).is_dir()]
    write_pipeline(nlp, report, output, card_extra, overwrite, keep_from=pipeline,
                   keep=keep + [f"{LINKER_PIPE}/{ENCODER_DIR}"])
    if stale_calibration:
        logger.warning("the calibration in %s was fitted on the previous KB's scores: fit it again "
                       "(--calibrate-on, or `sapbert calibrate`)", output)
    logger.info("KB of %s replaced by %s: %d index rows", output, kb_path, len(compact))
    return report


def _compact_index(previous: Any, exact: Any, kind: str, params: Dict[str, int]) -> Any:
    """``exact`` in an index of ``kind``: the previous index's codes kept when they would come out the same
    (same KB, model, kind and code parameters; refinement codes aside), so that adding refinement codes leaves
    ``index.faiss`` byte for byte (k-means over vectors encoded again could shift a centroid by the last bits)."""
    def codes_of(values: Dict[str, int]) -> Dict[str, int]:
        return {k: v for k, v in values.items() if k != "refine_m"}

    same = (previous.kind == kind == "pq" and previous.kb_fingerprint == exact.kb_fingerprint
            and previous.model_fingerprint == exact.model_fingerprint and previous.names == exact.names
            and previous.concept_ids == exact.concept_ids
            and codes_of(dict(previous.manifest.get("params") or {})) == codes_of(params))
    if not same:
        return exact.convert(kind, **params)
    logger.info("same KB, model and codes: the previous index's codes are kept")
    refine_m = int(params.get("refine_m") or 0)
    return previous.with_refine_codes(exact.vectors() if refine_m else None, refine_m)


def _carried_report(report: Dict[str, Any], kb_path: PathLike, kb_description: Optional[str]) -> Dict[str, Any]:
    """The package's build report (:func:`~.build.package_report`), less what belonged to the previous KB."""
    report.pop("pq_vs_exact", None)  # the previous index's: measured again, or left out
    report.setdefault("encoder_pairs_kb", report.get("kb"))  # the KB whose synonyms trained the encoder
    report["kb_description"] = kb_description or f"read from {Path(kb_path).name}"
    return report


def _recalibrate(nlp: Language, calibrate_on: PathLike, min_precision: float) -> Dict[str, Any]:
    """Fit the linker's calibration again on the gold spans of ``calibrate_on`` (as ``sapbert calibrate``
    does) and apply it with the threshold chosen for ``min_precision``: the build report's part."""
    from ..evaluation.abstention import apply_calibration, fit_and_report, link_gold_spans

    spans = link_gold_spans(nlp, calibrate_on)
    fitted_on = f"{Path(calibrate_on).name}: {len(spans)} gold spans"
    calibration, fitted = fit_and_report(spans, min_precision, fitted_on)
    part = {k: fitted[k] for k in ("fitted_on", "accuracy_without_threshold", "precision", "coverage",
                                   "cross_validated")}
    part["fitted_threshold"] = fitted["threshold"]
    part["threshold"] = apply_calibration(nlp, calibration, fitted["threshold"])
    return part
