"""The lay-language and gene-name check set (``benchmarks/ner_lay_language.jsonl``) for the NER models.

The corpora annotate the language of abstracts; users also write "heart attack" and "high blood
pressure". The check set is short sentences written for this project around consumer-health
synonyms that the KBs list (so a KB-aware model can know them), kept out of every training set,
plus sentences that name genes and proteins (CFTR, BRCA1, TP53…) beside a disease: a gene symbol
tagged as an entity is a false positive the corpora's scores would not show.

One JSON object per line: ``id``, ``kind`` (``lay`` or ``gene``), ``text``, ``entities``
(``start``, ``end``, ``label``, ``text``) and, for ``gene``, ``genes`` (``start``, ``end``, ``text``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple, Union

from spacy.language import Language

from spacy_sapbert.errors import InputError

from ..corpora import Document, Mention
from .scores import evaluate_corpus

PathLike = Union[str, Path]
LABEL_MAP = {"CHEMICAL": "CHEMICAL", "DISEASE": "DISEASE"}


def read_check_set(path: PathLike) -> Tuple[Dict[str, List[Document]], Dict[str, List[Tuple[int, int, str]]]]:
    """(documents per kind, gene spans per document id); offsets are checked against the text."""
    path = Path(path)
    by_kind: Dict[str, List[Document]] = {}
    genes: Dict[str, List[Tuple[int, int, str]]] = {}
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            text, doc_id = record["text"], record["id"]
            mentions = []
            for field in ("entities", "genes"):
                for item in record.get(field, []):
                    start, end = int(item["start"]), int(item["end"])
                    if text[start:end] != item["text"]:
                        raise InputError(f"{field}: offsets {start}-{end} give {text[start:end]!r}, not "
                                         f"{item['text']!r}", path, line=line_no, field=field)
                    if field == "entities":
                        if item["label"] not in LABEL_MAP:
                            raise InputError(f"unknown label {item['label']!r}", path, line=line_no, field="label")
                        mentions.append(Mention(start, end, item["text"], item["label"], (), line_no))
                    else:
                        genes.setdefault(doc_id, []).append((start, end, item["text"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            if isinstance(err, InputError):
                raise
            raise InputError(f"not a check-set record ({err!r})", path, line=line_no) from err
        by_kind.setdefault(record.get("kind", "lay"), []).append(Document(doc_id, text, "", mentions))
    return by_kind, genes


def evaluate_check_set(nlp: Language, path: PathLike) -> List[dict]:
    """One report per kind (strict spans, as ``ner-evaluate``), the gene report with the predicted
    entities that overlap a gene or protein name, and every miss and false positive by text."""
    by_kind, genes = read_check_set(path)
    reports = []
    for kind, documents in sorted(by_kind.items()):
        report = evaluate_corpus(nlp, documents, LABEL_MAP, name=f"{kind} check set")
        gold = {(d.pmid, m.start, m.end, m.type) for d in documents for m in d.mentions}
        found, gene_hits = set(), []
        for document, doc in zip(documents, nlp.pipe([d.text for d in documents])):
            for ent in doc.ents:
                found.add((document.pmid, ent.start_char, ent.end_char, ent.label_))
                for start, end, name in genes.get(document.pmid, []):
                    if ent.start_char < end and start < ent.end_char:
                        gene_hits.append(f"{name} -> {ent.text!r} {ent.label_}")
        text_of = {d.pmid: d.text for d in documents}
        report["missed"] = sorted(f"{text_of[k[0]][k[1]:k[2]]} ({k[3]})" for k in gold - found)
        report["false_positives"] = sorted(f"{text_of[k[0]][k[1]:k[2]]} ({k[3]})" for k in found - gold)
        if kind == "gene":
            report["gene_names"] = sum(len(v) for v in genes.values())
            report["gene_false_positives"] = gene_hits
        reports.append(report)
    return reports
