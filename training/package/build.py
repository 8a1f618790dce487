"""Assemble the embedded default pipeline: our NER → abbreviation_entities → sapbert_linker.

The encoder's weights are rounded to float16 first, so the shipped fp16 safetensors are
exactly the model the index was built with; every KB name is encoded once into an exact
index, which is then converted (no re-encoding) into the compact product-quantised index
that ships. How much the compression costs is measured on the development mentions
(agreement of the top concept with exact search) and written into the model card.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

import numpy as np

from spacy_sapbert.util.atomic import atomic_dir, check_replaceable, remove_stale_temps
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import is_index_folder


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
DEFAULT_PQ_M = 64
"""64 bytes per name: keeps the whole default under 80 MB. On the 2,922 distinct BC5CDR/NCBI dev
mentions, PQ64 returned exact search's best concept first for 90.9% (in its top 10: 99.8%),
PQ96 for 93.2% (100%) at +4.3 MB; 10- and 12-bit codes gained under 1 point."""
DEFAULT_RESCORE_GAP = 0.1
"""Candidates within 0.1 of a span's best PQ score are scored exactly by encoding their names
(:mod:`spacy_sapbert.index.exact_rescore`): on BC5CDR and NCBI dev gold spans the PQ64 index then links
as exact search does (81.85 / 80.69 Acc@1; without re-scoring 81.22 / 80.43), encoding ~4 names
per distinct mention."""
LICENCES = "\n".join([
    "Code: Apache-2.0. Encoder: fine-tuned from sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0).",
    "",
    "| used for | corpus or vocabulary | licence |",
    "|---|---|---|",
    "| KB, gazetteer | MeSH 2024 descriptors (NLM) | public domain; NLM terms: "
    "https://www.nlm.nih.gov/databases/download/terms_and_conditions.html |",
    "| KB, gazetteer | CTD's MEDIC (2012 and 2017) | © MDI Biological Laboratory and NC State University; free for "
    "research and education: https://ctdbase.org/about/legal.jsp |",
    "| KB (mesh-medic-chem), gazetteer | MeSH supplementary records from gilda 1.6.1's mesh_mappings.tsv | "
    "BSD-2-Clause (gilda); names from MeSH (NLM) and ChEBI (CC BY 4.0) |",
    "| KB (mesh-medic-chem), gazetteer | DrugBank open vocabulary | CC0 1.0 |",
    "| gazetteer (open-biomed) | Human Disease Ontology | CC0 |",
    "| gazetteer (open-biomed) | Orphanet Rare Disease Ontology, NCI Thesaurus, MONDO mappings | CC BY 4.0 |",
    "| gazetteer (open-biomed) | Human Phenotype Ontology | HPO licence (free use, cite HPO) |",
    "| encoder, KB names, NER | BC5CDR train (BioCreative V CDR) | public domain mark |",
    "| encoder, KB names, NER | NCBI disease corpus, train | public domain (US Government work) |",
    "| NER | BioRED (documents of BC5CDR dev/test and NCBI dev/test removed) | NCBI, US Government work |",
    "| NER | BioNLP13CG, BioNLP13PC (MTL-Bioinformatics-2016 IOB) | CC BY-SA 3.0 |",
    "| NER | BioNLP11ID (MTL-Bioinformatics-2016 IOB) | GENIA Project License |",
    "| NER | CRAFT chemicals (MTL-Bioinformatics-2016 IOB) | CC BY 4.0 (repository); CRAFT's own terms |",
    "| NER (genes as negatives) | BC2GM (MTL-Bioinformatics-2016 IOB) | CC BY 4.0 (repository) |",
])


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


def write_pipeline(nlp: Language, report: Dict[str, Any], output: PathLike, card_extra: str = "",
                   overwrite: bool = False, started: Optional[float] = None,
                   keep_from: Optional[PathLike] = None, keep: Sequence[str] = ()) -> Dict[str, Any]:
    """Write ``nlp``, build.json (with the package marker) and the model card to ``output``.

    The package is built in a temporary sibling and swapped in whole, so a run killed at any
    moment leaves the earlier package or the new one, never a mix or nothing; ``report`` gains
    the package's sizes, and with ``started`` (a ``time.perf_counter()``) the build's seconds.
    The component folders (or folders inside them) named in ``keep`` are copied byte for byte from the package
    ``keep_from`` instead of being saved again."""
    import shutil

    output = Path(output)
    check_package_output(output, overwrite)
    _clean_leftovers(output)
    with atomic_dir(output) as tmp:
        nlp.to_disk(tmp)
        for name in keep:
            shutil.rmtree(tmp / name)
            shutil.copytree(Path(keep_from) / name, tmp / name)  # type: ignore[arg-type]
        if started is not None:
            report["seconds"] = round(time.perf_counter() - started, 1)
        report["size_mb"] = round(sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) / 1e6, 1)
        report["components_mb"] = {
            p.name: round(sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 1e6, 1)
            for p in tmp.iterdir() if p.is_dir()}
        build = {MARKER_KEY: {"format": PACKAGE_FORMAT, "pipeline": nlp.meta.get("name", PIPELINE_NAME)}, **report}
        (tmp / BUILD_FILE).write_text(json.dumps(build, indent=1) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(model_card(report, nlp.meta, card_extra), encoding="utf-8")
        check_package_output(output, overwrite)  # the build took minutes: the folder may have changed meanwhile
    return report


KB_DESCRIPTION = "MeSH 2024 chemical and disease descriptors merged with MEDIC by shared IDs"
"""What the default's KB is, for the model card (``kb_description`` in a build report says otherwise)."""
NER_PIPES = ("sapbert_ner", "ner")
"""The NER components a default pipeline can start with: the transformer NER, or spaCy's (tok2vec + ner)."""
NER_CARD = {
    "sapbert_ner": "- `sapbert_ner`: CHEMICAL and DISEASE, the project's MiniLM fine-tuned as a token tagger with "
                   "KB-name features (MeSH with its supplementary records, DrugBank, MEDIC, open-biomed: "
                   "mesh-medic-chem and open-biomed), trained by `spacy project run ner` on BC5CDR train "
                   "+ NCBI disease train; scispaCy's tokenizer with hyphen splitting.",
    "ner": "- `tok2vec` + `ner`: CHEMICAL and DISEASE, trained by `spacy project run ner-train-tok2vec` "
           "(configs/ner.cfg) on BC5CDR train + NCBI disease train; scispaCy's tokenizer with hyphen splitting.",
}


def build_default_pipeline(ner: PathLike, model: PathLike, kb_path: PathLike, output: PathLike, *,
                           probe_mentions: Sequence[str] = (), pq_m: Optional[int] = DEFAULT_PQ_M,
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
    params = {"pq_m": pq_m} if pq_m else {}
    compact = exact.convert("pq", **params)
    report: Dict[str, Any] = {"ner_pipe": ner_pipe, "kb": kb.name, "kb_stats": kb.stats().as_dict(),
                              "index_rows": len(compact),
                              "index_params": compact.manifest["params"], "rescore_gap": DEFAULT_RESCORE_GAP,
                              "encode_seconds": exact.manifest["build"]["encode_seconds"],
                              "names_per_second": exact.manifest["build"]["names_per_second"]}
    if probe_mentions:
        queries = encoder.encode(list(dict.fromkeys(probe_mentions)))
        report["pq_vs_exact"] = agreement(exact, compact, queries)
    linker = nlp.add_pipe("sapbert_linker", config={"model": str(model), "kb": str(kb_path), "device": "auto",
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


def _threshold_sentence(report: Dict[str, Any], cal: Dict[str, Any]) -> str:
    """The card's word on the threshold: the calibration's high-precision one, or a default chosen since."""
    chosen = report.get("default_threshold")
    if not chosen:
        return f" Scores are calibrated probabilities and the threshold is {cal['threshold']} (see Calibration)."
    return (f" Scores are calibrated probabilities; the threshold is {chosen['value']}"
            + (f" ({chosen['chosen_for']})" if chosen.get("chosen_for") else "")
            + f"; {cal['threshold']} gives {100 * cal['precision']:.0f}% link precision (see Calibration).")


def model_card(report: Dict[str, Any], meta: Dict[str, Any], extra: str = "") -> str:
    pq, cal = report.get("pq_vs_exact", {}), report.get("calibration")
    lines: List[str] = [
        f"# {meta['name']} {meta['version']} — the embedded default pipeline of spacy-sapbert", "",
        "`spacy_sapbert.load()` (or `spacy.load(spacy_sapbert.DEFAULT_PIPELINE)`) gives this pipeline; "
        "`nlp.add_pipe(\"sapbert_linker\")` with no config uses its encoder, KB and index.", "",
        "## Components", "",
        NER_CARD[report.get("ner_pipe", "ner")] + (
            f" Its encoder keeps the first {report['ner_layers']} layers." if report.get("ner_layers") else "") + (
            " Its word-piece table, kept frozen in training, is the linker encoder's and is stored once."
            if report.get("ner_shares_word_embeddings") else ""),
        "- `abbreviation_entities`: scispaCy's AbbreviationDetector; short forms take their long form's label, and "
        "the linker links the long form.",
        f"- `sapbert_linker`: all-MiniLM-L6-v2 fine-tuned by self-alignment (Multi-Similarity loss, online hard "
        f"pairs) on BC5CDR/NCBI train mentions and {report.get('encoder_pairs_kb', report['kb'])} synonym pairs, "
        "mean pooling, weights stored in "
        f"float16; KB `{report['kb']}` ({report['kb_stats']['concepts']:,} concepts, "
        f"{report['kb_stats']['names']:,} names: {report.get('kb_description', KB_DESCRIPTION)}); FAISS "
        f"product-quantised index of {report['index_rows']:,} rows "
        f"({report['index_params']['pq_m']} bytes per name)" + (
            f"; the candidates within {report['rescore_gap']:g} of a span's best score are scored exactly by "
            "encoding their names (`rescore_gap`)" if report.get("rescore_gap") is not None else "") + "." + (
            _threshold_sentence(report, cal) if cal else ""), "",
        "## Build", "",
        "```bash\nspacy project run kb && spacy project run ner\n"
        "spacy project run default-finetune && spacy project run package" + (
            "\nspacy project run kb-train && spacy project run package-kb" if "kb_swap_seconds" in report else "")
        + "\n```", "",
        f"Encoding the KB's names took {report['encode_seconds']:.0f} s ({report['names_per_second']:.0f} names/s); "
        f"the whole build {report['seconds']:.0f} s" + (
            " (later swaps: " + "; ".join(f"the {part}, {report[key]:.0f} s" for part, key in
                                          (("NER", "ner_swap_seconds"), ("KB", "kb_swap_seconds")) if key in report)
            + ")" if "ner_swap_seconds" in report or "kb_swap_seconds" in report else "")
        + f". Size on disk: {report['size_mb']} MB "
        f"({', '.join(f'{k} {v} MB' for k, v in report['components_mb'].items())}).", "",
    ]
    if pq:
        lines += [f"Compression check: on {pq['queries']:,} distinct BC5CDR/NCBI development mentions the PQ index "
                  f"returns the exact index's best concept first for {100 * pq['top1_agreement']:.2f}% and within "
                  f"its top 10 for {100 * pq['exact_top1_in_top10']:.2f}%.", ""]
    if report.get("calibration_fitted_on_previous_kb"):
        lines += ["## Calibration", "", "The calibration and threshold in `sapbert_linker` were fitted on the "
                  "previous KB's scores and not fitted again after the KB was swapped (`sapbert calibrate`, or "
                  "`sapbert package-kb --calibrate-on`, fits them on this one).", ""]
    if cal:
        cv = cal["cross_validated"]
        lines += ["## Calibration", "",
                  "`kb_ents` scores are P(right link) from the best candidate's cosine and its margin over the next "
                  "concept (logistic regression, `sapbert_linker/cfg.json`), fitted as `sapbert calibrate` fits it "
                  f"({cal['fitted_on']}). Their Acc@1 without a threshold is "
                  f"{100 * cal['accuracy_without_threshold']:.2f}%. At the "
                  f"{'high-precision ' if report.get('default_threshold') else ''}threshold, {cal['threshold']}, "
                  f"{100 * cal['coverage']:.1f}% of those spans are linked at {100 * cal['precision']:.1f}% precision "
                  f"(2-fold by document: {100 * cv['precision']:.1f}% at {100 * cv['coverage']:.1f}%). "
                  "`threshold = null` links every span.", ""]
    if extra:
        lines += [extra.strip(), ""]
    lines += ["## Licences", "", LICENCES, ""]
    return "\n".join(lines)


__all__ = ["build_default_pipeline", "agreement", "check_exact_index", "check_package_output", "exact_index_for",
           "is_package_output", "model_card", "save_index", "write_pipeline"]
