"""BioSyn-format evaluation, scored exactly as SapBERT's ``evaluation/utils.py`` scores it.

The published NCBI-disease / BC5CDR-disease Acc@k figures (BioSyn, SapBERT, ResCNN, GenBioEL)
are computed on BioSyn's preprocessed data: a folder of ``<PMID>.concept`` files (one query a
line, ``PMID||start|end||type||mention||CUI``) and a dictionary file (``CUI||name`` a line).
Users of those systems have the same format for their own datasets, so it is read as it is.

The scoring follows SapBERT's code, not our PubTator protocol: every query line counts (no
de-duplication, CUI-less ``-1`` queries included); a query's mention is split on ``|`` (and
``+``) into sub-mentions, each searched alone over every dictionary name; a candidate is right
when its ``|``-split CUIs intersect the gold CUIs; a query is right at k when every sub-mention
has a right candidate among its first k names. SapBERT ranks by the raw inner product of the
pooled vectors (``dot``); the product ranks by cosine (``cosine``): both are reported.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union

import numpy as np

from spacy_sapbert.encoder import Encoder
from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
SCORINGS = ("cosine", "dot")


@dataclass(frozen=True)
class BiosynQuery:
    mention: str
    cui: str
    where: str


def read_queries(folder: PathLike) -> List[BiosynQuery]:
    """Every query line of the ``*.concept`` files of ``folder``, in file-name order."""
    folder = Path(folder)
    files = sorted(folder.glob("*.concept"))
    if not files:
        raise InputError("no *.concept files: not a BioSyn processed_<split> folder", folder)
    queries = []
    for file in files:
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            fields = line.split("||")
            if len(fields) != 5:
                raise InputError(f"expected 5 '||'-separated fields (PMID, span, type, mention, CUI), found "
                                 f"{len(fields)}", file, number)
            queries.append(BiosynQuery(fields[3].strip(), fields[4].strip(), f"{file}:{number}"))
    return queries


def read_dictionary(path: PathLike) -> Tuple[List[str], List[str]]:
    """(names, CUIs) of a BioSyn dictionary file, one ``CUI||name`` a line, in file order."""
    path = Path(path)
    if not path.is_file():
        raise InputError("dictionary file not found", path)
    names, cuis = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        cui, sep, name = line.partition("||")
        if not sep:
            raise InputError("expected 'CUI||name'", path, number)
        names.append(name.strip())
        cuis.append(cui.strip())
    return names, cuis


def _is_right(candidate_cui: str, gold_cuis: set) -> bool:
    return bool(set(candidate_cui.split("|")) & gold_cuis)


def top_candidates(query_vectors: np.ndarray, name_vectors: np.ndarray, k: int, chunk: int = 256) -> np.ndarray:
    """Row numbers of the ``k`` best-scoring names of each query (exact search, best first)."""
    out = np.empty((len(query_vectors), k), dtype=np.int64)
    for start in range(0, len(query_vectors), chunk):
        scores = query_vectors[start:start + chunk] @ name_vectors.T
        part = np.argpartition(-scores, kth=min(k, scores.shape[1] - 1), axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
        out[start:start + chunk] = np.take_along_axis(part, order, axis=1)
    return out


def score(encoder: Encoder, queries: Sequence[BiosynQuery], names: Sequence[str], cuis: Sequence[str],
          scorings: Sequence[str] = SCORINGS, k: int = 5) -> Dict[str, Dict[str, float]]:
    """Acc@1..k of ``encoder`` per scoring, as SapBERT's ``evaluate_topk_acc`` computes them."""
    for scoring in scorings:
        if scoring not in SCORINGS:
            raise InputError(f"unknown scoring {scoring!r}: use {', '.join(SCORINGS)}", field="scoring")
    parts = [q.mention.replace("+", "|").split("|") for q in queries]
    flat = [p for mention_parts in parts for p in mention_parts]
    results: Dict[str, Dict[str, float]] = {}
    raw_names = encoder.encode(list(names), show_progress=True, normalize=False)
    raw_queries = encoder.encode(flat, normalize=False)
    for scoring in scorings:
        name_vectors, query_vectors = raw_names, raw_queries
        if scoring == "cosine":
            name_vectors = raw_names / np.maximum(np.linalg.norm(raw_names, axis=1, keepdims=True), 1e-12)
            query_vectors = raw_queries / np.maximum(np.linalg.norm(raw_queries, axis=1, keepdims=True), 1e-12)
        best = top_candidates(query_vectors, name_vectors, k)
        first_right = np.full(len(flat), k, dtype=np.int64)  # rank of the first right candidate (k: none)
        row = 0
        for query, mention_parts in zip(queries, parts):
            gold = set(query.cui.replace("+", "|").split("|"))
            for _ in mention_parts:
                hits = [rank for rank, name in enumerate(best[row]) if _is_right(cuis[name], gold)]
                first_right[row] = hits[0] if hits else k
                row += 1
        per_query = np.maximum.reduceat(first_right, np.cumsum([0] + [len(p) for p in parts[:-1]]))
        results[scoring] = {f"acc@{i}": round(100.0 * float(np.mean(per_query < i)), 2) for i in range(1, k + 1)}
    return results


__all__ = ["BiosynQuery", "SCORINGS", "read_dictionary", "read_queries", "score", "top_candidates"]
