"""``ner-evaluate``: a NER pipeline scored on BC5CDR dev, NCBI test and dev, and the lay-language check set.

The scoring rules are in :mod:`.scores` and the check set in :mod:`.lay`; this module only runs them
(kept apart so that ``lay`` can use ``scores`` without an import circle).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional, Union

from ..corpora import read_pubtator
from .data import BC5CDR_LABELS, DISEASE, NCBI_LABELS
from .lay import evaluate_check_set
from .scores import check_report_path, evaluate_corpus, write_report

PathLike = Union[str, Path]
logger = logging.getLogger(__name__)


def evaluate_ner(model: PathLike, bc5cdr_dev: Optional[PathLike] = None, ncbi_test: Optional[PathLike] = None,
                 output: Optional[PathLike] = None, check_set: Optional[PathLike] = None,
                 style: Optional[str] = None, ncbi_dev: Optional[PathLike] = None, overwrite: bool = False
                 ) -> List[dict]:
    """Score a NER pipeline on BC5CDR dev (CHEMICAL, DISEASE), NCBI test and dev (DISEASE only) and, given
    ``check_set``, the lay-language and gene-name sentences of :mod:`.lay`. ``style`` is the
    annotation style a ``sapbert_ner`` pipe tags in (see :mod:`spacy_sapbert.ner.features`).

    Returns the reports (and writes them as JSON to ``output`` when given); ``format_report``
    turns one into the table ``ner-evaluate`` prints. An existing ``output`` is replaced only with
    ``overwrite``, and never when it is a file read.
    """
    import spacy

    check_report_path(output, overwrite, [bc5cdr_dev, ncbi_test, ncbi_dev, check_set, model])

    nlp = spacy.load(model, config={"components": {"sapbert_ner": {"style": style}}} if style else {})
    reports = []
    if bc5cdr_dev is not None:
        docs = list(read_pubtator(bc5cdr_dev))
        reports.append(evaluate_corpus(nlp, docs, BC5CDR_LABELS, name="BC5CDR dev"))
    if ncbi_test is not None:
        docs = list(read_pubtator(ncbi_test))
        reports.append(evaluate_corpus(nlp, docs, NCBI_LABELS, labels=[DISEASE], name="NCBI test"))
    if ncbi_dev is not None:
        docs = list(read_pubtator(ncbi_dev))
        reports.append(evaluate_corpus(nlp, docs, NCBI_LABELS, labels=[DISEASE], name="NCBI dev"))
    if check_set is not None:
        reports.extend(evaluate_check_set(nlp, check_set))
    for report in reports:
        scores = report["scores"]["ALL"]
        logger.info("%s: P %.2f R %.2f F1 %.2f", report["corpus"], scores["p"], scores["r"], scores["f"])
    if output is not None:
        write_report(reports, output, {"model": str(model), "pipeline": nlp.pipe_names, "style": style,
                                       "tokenizer": dict(nlp.config["nlp"]["tokenizer"])})
    return reports
