"""``sapbert package-default``, ``package-ner``, ``package-kb``, ``package-annotations`` and ``package-settings``:
assemble the embedded default pipeline, swap its NER or its KB, add its training annotations, or set the linker
settings chosen on dev (see spacy_sapbert.training.package.build)."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from spacy_sapbert.errors import InputError, exit_on_input_error

logger = logging.getLogger(__name__)

# Options the three commands share (same flags, same help).
ProbeOption = Annotated[Optional[List[Path]], typer.Option(
    "--probe", help="PubTator file(s) whose mentions measure the compact index against exact search (development "
    "sets).")]
SwapOutputOption = Annotated[Path, typer.Option("--output", "-o", help="Pipeline folder to write (may be --pipeline).")]
CardOption = Annotated[Optional[Path], typer.Option("--card-extra", help="Markdown appended to the model card "
                                                    "(e.g. the evaluation table).")]
ThresholdOption = Annotated[Optional[float], typer.Option(
    "--threshold", help="The linker's new default threshold (e.g. the best document-level F1 of `sapbert ner-e2e "
    "--sweep` on dev).")]
ThresholdReasonOption = Annotated[str, typer.Option("--threshold-reason", help="What --threshold was chosen for "
                                                    "(model card).")]
SwapOverwriteOption = Annotated[bool, typer.Option("--overwrite", help="Replace --output even when it is not an "
                                                   "earlier package, with everything in it.")]


def _probe_mentions(files: Optional[List[Path]]) -> List[str]:
    from ..corpora import read_pubtator

    return [m.text for path in files or [] for doc in read_pubtator(path) for m in doc.mentions]


def package_default(
    ner: Path = typer.Option(..., "--ner", help="Trained NER pipeline (training_runs/ner/model-best)."),
    model: str = typer.Option(..., "--model", "-m", help="Self-aligned encoder folder (models/sapbert-default)."),
    kb: Path = typer.Option(..., "--kb", help="KB of the linker (kbs/mesh-medic.jsonl.gz)."),
    output: Path = typer.Option(..., "--output", "-o", help="Pipeline folder to write. An earlier package there is "
                                "replaced; any other non-empty folder only with --overwrite."),
    probe: ProbeOption = None,
    pq_m: int = typer.Option(128, "--pq-m", help="Sub-quantisers of the PQ index (codes of --pq-bits each)."),
    pq_bits: int = typer.Option(4, "--pq-bits", help="Bits per PQ code: 4 is searched by FAISS's fast-scan kernels."),
    refine_m: Optional[int] = typer.Option(None, "--refine-m", help="Bytes of residual codes per name (default: one "
                                           "per 6 dimensions, 64 at 384; 0: none): scores close to exact, so fewer "
                                           "names are encoded again for re-scoring."),
    reuse_exact: bool = typer.Option(False, "--reuse-exact-index", help="Load the exact index from --exact-index "
                                     "when it is there (fingerprints checked) instead of encoding the KB again."),
    exact_index: Optional[Path] = typer.Option(None, "--exact-index", help="Also save the exact (flat) index "
                                               "here (benchmarks, demo comparisons)."),
    card: CardOption = None,
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --output (and --exact-index) even when it "
                                   "is not an earlier package (index), with everything in it."),
) -> None:
    """Build the embedded default pipeline: NER → abbreviation_entities → sapbert_linker (fp16, PQ index)."""
    from .build import build_default_pipeline

    with exit_on_input_error():
        try:
            mentions = _probe_mentions(probe)
            extra = card.read_text(encoding="utf-8") if card else ""
            report = build_default_pipeline(ner, model, kb, output, probe_mentions=mentions, pq_m=pq_m,
                                            pq_bits=pq_bits, refine_m=refine_m,
                                            card_extra=extra, exact_index=exact_index, reuse_exact=reuse_exact,
                                            overwrite=overwrite)
        except OSError as err:  # a folder that cannot be read or written is the user's to fix, as bad input is
            raise InputError(err.strerror or str(err), err.filename) from err
    typer.echo(json.dumps(report, indent=1))


def package_ner(
    ner: Path = typer.Option(..., "--ner", help="Trained NER pipeline (training_runs/ner-tagger/model-best)."),
    pipeline: Path = typer.Option(Path("spacy_sapbert/data/default"), "--pipeline",
                                  help="The packaged default whose linker is kept."),
    output: SwapOutputOption = ...,
    card: CardOption = None,
    overwrite: SwapOverwriteOption = False,
    threshold: ThresholdOption = None,
    threshold_reason: ThresholdReasonOption = "",
) -> None:
    """Swap the NER of a packaged default pipeline for a newly trained one; the linker stays as it is
    (its threshold too, unless --threshold sets a new one)."""
    from .swap_ner import replace_ner

    with exit_on_input_error():
        extra = card.read_text(encoding="utf-8") if card else ""
        report = replace_ner(pipeline, ner, output, card_extra=extra, overwrite=overwrite, threshold=threshold,
                             threshold_reason=threshold_reason)
    typer.echo(json.dumps(report, indent=1))


def package_kb(
    kb: Path = typer.Option(..., "--kb", help="The new KB of the linker (kbs/mesh-medic-train.jsonl.gz)."),
    pipeline: Path = typer.Option(Path("spacy_sapbert/data/default"), "--pipeline",
                                  help="The packaged default whose encoder and NER are kept."),
    output: SwapOutputOption = ...,
    exact_index: Optional[Path] = typer.Option(None, "--exact-index", help="Also save the exact (flat) index of "
                                               "the new KB here."),
    reuse_exact: bool = typer.Option(False, "--reuse-exact-index", help="Load the exact index from --exact-index "
                                     "when it is one of this encoder and KB instead of encoding the KB again."),
    calibrate_on: Optional[Path] = typer.Option(None, "--calibrate-on", help="PubTator development file: fit the "
                                                "score calibration and threshold again on the new KB (as sapbert "
                                                "calibrate does)."),
    min_precision: float = typer.Option(0.95, "--min-precision", help="With --calibrate-on: precision of linked "
                                        "mentions the threshold must reach."),
    kb_description: Optional[str] = typer.Option(None, "--kb-description", help="What the KB is, for the model "
                                                 "card."),
    probe: ProbeOption = None,
    card: CardOption = None,
    overwrite: SwapOverwriteOption = False,
    threshold: ThresholdOption = None,
    threshold_reason: ThresholdReasonOption = "",
    pq_m: Optional[int] = typer.Option(None, "--pq-m", help="Sub-quantisers of the new PQ index (default: the "
                                       "package's)."),
    pq_bits: Optional[int] = typer.Option(None, "--pq-bits", help="Bits per code of the new PQ index (default: "
                                          "the package's; 4 is searched by FAISS's fast-scan kernels)."),
    refine_m: Optional[int] = typer.Option(None, "--refine-m", help="Bytes of residual codes per name of the new PQ "
                                           "index (default: the package's; 0: none). With the KB and codes "
                                           "unchanged, the index file stays byte for byte and only these are added."),
    rescore_gap: Optional[float] = typer.Option(None, "--rescore-gap", help="The linker's rescore_gap (default: "
                                                "the package's): candidates within this of a span's best are "
                                                "encoded and scored exactly."),
) -> None:
    """Swap the KB (and index) of a packaged default pipeline; its encoder and NER stay byte for byte. With
    --calibrate-on the threshold becomes the calibration's high-precision one, unless --threshold sets another."""
    from .swap_kb import replace_kb

    with exit_on_input_error():
        extra = card.read_text(encoding="utf-8") if card else ""
        mentions = _probe_mentions(probe)
        if calibrate_on is not None and not 0 < min_precision < 1:
            raise InputError(f"must be between 0 and 1, got {min_precision}", field="--min-precision")
        report = replace_kb(pipeline, kb, output, exact_index=exact_index, reuse_exact=reuse_exact,
                            calibrate_on=calibrate_on, min_precision=min_precision,
                            kb_description=kb_description, probe_mentions=mentions, card_extra=extra,
                            overwrite=overwrite, threshold=threshold, threshold_reason=threshold_reason,
                            rescore_gap=rescore_gap,
                            index_params={k: v for k, v in (("pq_m", pq_m), ("pq_bits", pq_bits),
                                                            ("refine_m", refine_m)) if v is not None})
    typer.echo(json.dumps(report, indent=1))


def package_annotations(
    names: Path = typer.Option(..., "--names", help="Annotated-names table (`sapbert annotated-names`)."),
    patterns: Path = typer.Option(..., "--patterns", help="Dictionary patterns (`sapbert ner-dictionary`)."),
    pipeline: Path = typer.Option(Path("spacy_sapbert/data/default"), "--pipeline",
                                  help="The packaged default whose NER and linker are kept."),
    output: SwapOutputOption = ...,
    card: CardOption = None,
    overwrite: SwapOverwriteOption = False,
    extend: bool = typer.Option(True, "--extend/--no-extend", help="Let a listed wording also replace NER "
                                "entities it covers whole and outgrows (\"high blood pressure\" over \"high\")."),
    exclusions: Optional[Path] = typer.Option(None, "--exclusions", help="Wordings annotators seldom tag "
                                              "(`sapbert ner-dictionary --exclusions`, LABEL<TAB>wording lines): NER entities that are "
                                              "exactly one are removed."),
    grow_names: Optional[Path] = typer.Option(None, "--grow-names", help="KB names a NER entity inside one grows "
                                              "to (`sapbert ner-dictionary --grow-names`, LABEL<TAB>tokens lines)."),
    exact_names: Optional[Path] = typer.Option(None, "--exact-names", help="The linker's table of names its KB "
                                               "lacks (`sapbert kb exact-names`); without it, the pipeline's own stays."),
) -> None:
    """Add the training annotations to a packaged default: the dictionary_entities pipe after the NER and the linker's
    annotated names; the NER, encoder, KB and index are copied byte for byte."""
    from .swap_annotations import add_annotations

    with exit_on_input_error():
        extra = card.read_text(encoding="utf-8") if card else ""
        report = add_annotations(pipeline, names, patterns, output, card_extra=extra, overwrite=overwrite,
                                 extend=extend, exclusions=exclusions, grow_names=grow_names,
                                 exact_names=exact_names)
    typer.echo(json.dumps(report, indent=1))


def _key_values(items: Optional[List[str]], option: str, as_json: bool) -> dict:
    """``KEY=VALUE`` items as a dict (the values parsed as JSON with ``as_json``); an error names the item."""
    found = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {item!r}", field=option)
        try:
            found[key] = json.loads(value) if as_json else value
        except json.JSONDecodeError as err:
            raise InputError(f"{key}: {value!r} is not JSON ({err.msg})", field=option) from None
    return found


def package_settings(
    settings: List[str] = typer.Option(..., "--set", help="A linker setting as KEY=JSON (repeat), e.g. "
                                       "'head_fallback=[\"DISEASE\"]' or 'label_thresholds={\"CHEMICAL\": 0.9}'."),
    pipeline: Path = typer.Option(Path("spacy_sapbert/data/default"), "--pipeline",
                                  help="The packaged default whose parts are kept."),
    output: SwapOutputOption = ...,
    label_reasons: Optional[List[str]] = typer.Option(None, "--label-reason", help="LABEL=TEXT: what that label's "
                                                      "threshold was chosen for (model card; repeat)."),
    card: CardOption = None,
    overwrite: SwapOverwriteOption = False,
) -> None:
    """Set linker settings of a packaged default (those a loaded pipe follows, such as split_composites,
    label_thresholds, head_fallback, skip_newer_mesh): its config, build report and model card are written again, every part is
    copied byte for byte."""
    from .settings import set_linker_settings

    with exit_on_input_error():
        extra = card.read_text(encoding="utf-8") if card else ""
        report = set_linker_settings(pipeline, _key_values(settings, "--set", True), output,
                                     _key_values(label_reasons, "--label-reason", False), card_extra=extra,
                                     overwrite=overwrite)
    typer.echo(json.dumps(report["linker_settings"], indent=1))


def register(app: typer.Typer) -> None:
    app.command("package-default")(package_default)
    app.command("package-annotations")(package_annotations)
    app.command("package-ner")(package_ner)
    app.command("package-kb")(package_kb)
    app.command("package-settings")(package_settings)
