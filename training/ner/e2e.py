"""End-to-end NER + linking on whole documents: P/R/F1 of (span, concept ID) pairs, and the per-type
table of :mod:`.e2e_table` (NER, linked mentions, document-level concepts).

The NER pipeline finds the spans in raw text, the ``sapbert_linker`` pipe gives each one a
concept (``ent.kb_id_``; a coordinated span its parts' concepts), and a predicted pair counts only if a gold mention has exactly
that character span and that concept. IDs are compared through the knowledge base
(:func:`spacy_sapbert.kb.matching.concept_key`, the rule the Acc@k evaluation uses too), so a
gold ``OMIM:…`` that the KB merged into a MeSH concept matches that concept. A composite gold
mention contributes one pair per part; gold mentions without an ID (``-1``) are left out and
predictions on their spans are ignored.

Next to it, the same linker is run on the gold spans (the NER model's errors taken out):
its top-1 accuracy over the single-concept mentions, so the two numbers show how much the
NER step costs.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc
import spacy.util
from spacy.util import filter_spans

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.matching import concept_key
from ..corpora import Document
from .e2e_table import collect_runs, gold_sets, own_thresholds, score, stated, sweep, table_rows, thresholds_at
from .scores import PRF, check_report_path

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
NER_PIPE = "sapbert_ner"
ABBREVIATION_PIPE = "abbreviation_detector"
ABBREVIATION_ENTITIES_PIPE = "abbreviation_entities"
Pair = Tuple[str, int, int, str]
"""(pmid, start_char, end_char, concept key)."""


def gold_pairs(documents: Iterable[Document], label_map: Mapping[str, str], kb: Optional[KnowledgeBase]
               ) -> Tuple[Set[Pair], Set[Tuple[str, int, int]]]:
    """Gold (span, concept) pairs of the mentions with IDs, and the spans of mentions without one
    (:func:`.e2e_table.gold_sets` without the labels)."""
    return _unlabelled(gold_sets(documents, label_map, kb))


def _unlabelled(gold: Tuple[Set[tuple], Set[tuple], Set[tuple], Set[tuple]]
                ) -> Tuple[Set[Pair], Set[Tuple[str, int, int]]]:
    _, pairs, _, no_id = gold
    linked = {(p, s, e, c) for p, s, e, _, c in pairs}
    return linked, {(p, s, e) for p, s, e, _ in no_id} - {pair[:3] for pair in linked}


def score_pairs(gold: Set[Pair], predicted: Set[Pair], ignore_spans: Set[Tuple[str, int, int]] = frozenset()) -> PRF:
    """Exact (span, concept) matching; predictions on ``ignore_spans`` count neither way."""
    predicted = {p for p in predicted if p[:3] not in ignore_spans}
    tp = len(gold & predicted)
    return PRF(tp, len(predicted) - tp, len(gold) - tp)


@dataclass
class E2EResult:
    corpus: str
    documents: int
    gold_pairs: int
    pairs: PRF
    """(span, concept) pairs from raw text: the NER spans, then the linker."""
    gold_span_accuracy: float
    """Top-1 accuracy of the linker on the gold spans of single-concept mentions (percent)."""
    gold_span_mentions: int
    threshold: Optional[float] = None
    """The linker's threshold the pairs and the table are scored at."""
    table: Optional[Dict[str, Dict[str, PRF]]] = None
    """Label (and ALL) → NER / mentions / documents P/R/F1 (:mod:`.e2e_table`)."""
    sweep: Optional[List[Tuple[float, PRF]]] = None
    """Pooled document-level P/R/F1 at each threshold asked for (one threshold for every label)."""
    label_thresholds: Optional[Dict[str, float]] = None
    """The linker's per-label thresholds over ``threshold`` (``label_thresholds``), if it has any."""

    def to_dict(self) -> dict:
        out = {"corpus": self.corpus, "documents": self.documents, "gold_pairs": self.gold_pairs,
               "pairs": self.pairs.to_dict(), "gold_span_acc1": round(self.gold_span_accuracy, 2),
               "gold_span_mentions": self.gold_span_mentions, "threshold": self.threshold,
               **({"label_thresholds": self.label_thresholds} if self.label_thresholds else {})}
        if self.table is not None:
            out["table"] = {label: {level: prf.to_dict() for level, prf in levels.items()}
                            for label, levels in self.table.items()}
        if self.sweep is not None:
            out["sweep"] = [{"threshold": t, **prf.to_dict()} for t, prf in self.sweep]
        return out

    def summary(self) -> str:
        p = self.pairs
        lines = [f"{self.corpus}: (span, concept) P {p.precision:.2f} R {p.recall:.2f} F1 {p.f1:.2f} "
                 f"[tp {p.tp} fp {p.fp} fn {p.fn}, {self.gold_pairs} gold pairs]; linker on gold spans: "
                 f"Acc@1 {self.gold_span_accuracy:.2f} over {self.gold_span_mentions} single-concept mentions"]
        if self.table is not None:
            at = f"{self.threshold}" + (f" ({self.label_thresholds})" if self.label_thresholds else "")
            lines += [f"threshold {at}: | type | NER P / R / F1 | mentions P / R / F1 | "
                      "documents P / R / F1 |", *table_rows(self.table)]
        for t, prf in self.sweep or []:
            lines.append(f"  threshold {t:.3f}: documents P {prf.precision:.2f} R {prf.recall:.2f} F1 {prf.f1:.2f}")
        return "\n".join(lines)


def _abbreviation_detector(nlp: Language) -> Optional[Callable[[Doc], Doc]]:
    """scispaCy's detector from the pipeline: its own pipe, or the one inside abbreviation_entities."""
    if ABBREVIATION_PIPE in nlp.pipe_names:
        return nlp.get_pipe(ABBREVIATION_PIPE)
    if ABBREVIATION_ENTITIES_PIPE in nlp.pipe_names:
        return nlp.get_pipe(ABBREVIATION_ENTITIES_PIPE).detector
    return None


def _linker_kb(nlp: Language) -> Optional[KnowledgeBase]:
    return nlp.get_pipe(LINKER_PIPE).kb if LINKER_PIPE in nlp.pipe_names else None


def gold_span_accuracy(nlp: Language, documents: Sequence[Document], label_map: Mapping[str, str],
                       kb: Optional[KnowledgeBase]) -> Tuple[float, int]:
    """Link the gold spans (no NER) and return (top-1 accuracy in percent, mentions counted).

    Only mentions with exactly one gold concept count (a composite needs several answers and
    one span gets one); a mention whose offsets fall inside a token is linked on the smallest
    token span that covers it. The linker's thresholds are off meanwhile (restored after): this is
    the accuracy of its best answer, not of what it keeps.
    """
    linker = nlp.get_pipe(LINKER_PIPE)
    docs: List[Doc] = []
    wanted: List[List[Tuple[int, int, str]]] = []
    for document in documents:
        doc = nlp.make_doc(document.text)
        spans, keys = [], []
        for m in document.mentions:
            if m.type not in label_map or len(m.ids) != 1:
                continue
            span = doc.char_span(m.start, m.end, label=label_map[m.type], alignment_mode="expand")
            if span is not None:
                spans.append(span)
                keys.append((span.start, span.end, concept_key(m.ids[0], kb)))
        kept = filter_spans(spans)
        kept_keys = {(s.start, s.end) for s in kept}
        doc.set_ents(kept, default="outside")
        docs.append(doc)
        wanted.append([k for k in keys if (k[0], k[1]) in kept_keys])
    detector = _abbreviation_detector(nlp)
    if detector is not None:  # long forms for the linker, as in the full pipeline
        docs = [detector(doc) for doc in docs]
    hits = total = 0
    with thresholds_at(linker, None):
        for doc, keys in zip(linker.pipe(docs), wanted):
            linked = {(e.start, e.end): concept_key(e.kb_id_, kb) if e.kb_id_ else None for e in doc.ents}
            for start, end, key in keys:
                total += 1
                hits += linked.get((start, end)) == key
    return (100.0 * hits / total if total else 0.0), total


def evaluate_e2e(nlp: Language, documents: Sequence[Document], label_map: Mapping[str, str],
                 labels: Optional[Sequence[str]] = None, name: str = "",
                 thresholds: Sequence[float] = ()) -> E2EResult:
    """Score a NER + ``sapbert_linker`` pipeline on one corpus (see the module docstring), with the
    per-type table of :mod:`.e2e_table` at the pipe's threshold and the document-level F1 at ``thresholds``."""
    if LINKER_PIPE not in nlp.pipe_names:
        raise ValueError(f"the pipeline has no {LINKER_PIPE!r} pipe: {nlp.pipe_names}")
    labels = list(labels) if labels is not None else sorted(set(label_map.values()))
    kb = _linker_kb(nlp)
    wanted = {k: v for k, v in label_map.items() if v in labels}
    gold_table = gold_sets(documents, wanted, kb)
    gold, no_id = _unlabelled(gold_table)
    pipe = nlp.get_pipe(LINKER_PIPE)
    threshold, label_thresholds = pipe.threshold, pipe.label_thresholds
    at = own_thresholds(pipe, labels)
    # at the pipe's thresholds, then at each of the sweep's
    entities, *swept = collect_runs(nlp, documents, labels, kb, LINKER_PIPE, (False,), at_thresholds=thresholds)
    predicted = {(e.pmid, e.start, e.end, concept) for e in entities for concept in stated(e, at)}
    accuracy, counted = gold_span_accuracy(nlp, documents, wanted, kb)
    result = E2EResult(name, len(documents), len(gold), score_pairs(gold, predicted, no_id), accuracy, counted,
                       threshold, score(entities, gold_table, labels, at),
                       sweep(swept, gold_table, labels, thresholds) if thresholds else None, label_thresholds)
    logger.info("%s", result.summary())
    return result


def ner_linker_pipeline(ner_model: PathLike, linker: Optional[PathLike], model: Optional[str] = None,
                        abbreviations: bool = True, linker_config: Optional[Dict[str, object]] = None) -> Language:
    """The NER pipeline with a ``sapbert_linker`` after it.

    ``linker`` is either a saved pipeline folder holding a ``sapbert_linker`` pipe (encoder,
    KB and index inside; ``model`` is then ignored) or a KB file, linked with the encoder
    ``model`` (the pipe's default when None; the name index is built on first use); None (or
    ``ner_model`` itself) keeps the linker that ``ner_model`` holds, with whatever runs before it. With
    ``abbreviations``, scispaCy's abbreviation detector runs first so that "HCQ" is linked as
    its long form (unless the NER pipeline already runs it: ``abbreviation_entities``).
    """
    import spacy

    nlp = spacy.load(ner_model)
    if linker is None or Path(linker).resolve() == Path(ner_model).resolve():
        if LINKER_PIPE not in nlp.pipe_names:
            raise InputError(f"no linker given and the pipeline has no {LINKER_PIPE!r}", ner_model)
        linker = None  # the whole pipeline as it is (the embedded default: NER, ruler, abbreviations, linker)
    elif LINKER_PIPE in nlp.pipe_names:
        nlp.remove_pipe(LINKER_PIPE)
    if abbreviations and _abbreviation_detector(nlp) is None:
        import scispacy.abbreviation  # noqa: F401  (registers the "abbreviation_detector" factory)

        nlp.add_pipe(ABBREVIATION_PIPE)
    if linker is None:
        pass
    elif Path(linker).is_dir():
        nlp.add_pipe(LINKER_PIPE, source=spacy.load(linker))
    else:
        config: Dict[str, object] = {"kb": str(linker), **(linker_config or {})}
        if model is not None:
            config["model"] = str(model)
        nlp.add_pipe(LINKER_PIPE, config=config)
    return nlp


def _has_linker(pipeline: PathLike) -> bool:
    config = Path(pipeline) / "config.cfg"
    return config.is_file() and LINKER_PIPE in spacy.util.load_config(config)["nlp"]["pipeline"]


def run_e2e(ner_model: PathLike, bc5cdr_dev: Optional[PathLike], ncbi_test: Optional[PathLike],
            bc5cdr_linker: Optional[PathLike] = None, ncbi_linker: Optional[PathLike] = None,
            model: Optional[str] = None, abbreviations: bool = True,
            output: Optional[PathLike] = None, thresholds: Sequence[float] = (), overwrite: bool = False
            ) -> List[E2EResult]:
    """BC5CDR dev (CHEMICAL + DISEASE; a MeSH KB) and NCBI test (DISEASE; MEDIC), each with its
    own linker: a KB file or a saved pipeline with a ``sapbert_linker`` (see ner_linker_pipeline),
    or, where none is given, the linker of ``ner_model`` when it holds one (the embedded default).
    An existing ``output`` is replaced only with ``overwrite``, and never when it is a file read."""
    import json

    from spacy_sapbert.util.atomic import atomic_write_text

    from ..corpora import read_pubtator
    from .data import BC5CDR_LABELS, DISEASE, NCBI_LABELS

    check_report_path(output, overwrite, [bc5cdr_dev, ncbi_test, ner_model, bc5cdr_linker, ncbi_linker])
    jobs = [("BC5CDR dev", bc5cdr_dev, bc5cdr_linker, BC5CDR_LABELS, None),
            ("NCBI test", ncbi_test, ncbi_linker, NCBI_LABELS, [DISEASE])]
    results = []
    ner_precision = None
    whole = _has_linker(ner_model)
    for name, corpus, linker, label_map, labels in jobs:
        if corpus is None or (linker is None and not whole):
            logger.info("%s: skipped (no corpus or no KB/linker given)", name)
            continue
        nlp = ner_linker_pipeline(ner_model, linker, model=model, abbreviations=abbreviations)
        results.append(evaluate_e2e(nlp, list(read_pubtator(corpus)), label_map, labels, name=name,
                                    thresholds=thresholds))
        tagging = getattr(nlp.get_pipe(NER_PIPE), "tagging", None) if NER_PIPE in nlp.pipe_names else None
        if tagging is not None:  # what the NER computed in here (`precision: auto` depends on the machine)
            ner_precision = tagging.dtype
    if output is not None:
        settings = {"ner_model": str(ner_model), "model": model, "abbreviations": abbreviations,
                    "bc5cdr_linker": str(bc5cdr_linker) if bc5cdr_linker else None,
                    "ncbi_linker": str(ncbi_linker) if ncbi_linker else None, "ner_precision": ner_precision}
        atomic_write_text(output, json.dumps({"settings": settings, "results": [r.to_dict() for r in results]},
                                             indent=2) + "\n")
    return results
