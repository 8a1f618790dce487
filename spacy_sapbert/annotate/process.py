"""Records → output lines, one batch at a time, so that one bad document costs only itself.

``nlp.pipe`` over a batch is fast, but an exception inside it loses the whole batch and,
on a re-run, happens again at the same place. So a batch that raises is processed again
one document at a time, and a document that still fails becomes a :class:`Failed`
outcome (logged with its file:line, counted as skipped) while the rest are written.

Long documents are split into pieces of at most :data:`PIECE_CHARS` characters at
paragraph, line, sentence or word boundaries, annotated piece by piece and merged back
with their character offsets shifted, so memory stays bounded (a 999,000-character
document took 3.9 GB and 185 s in one piece). An abbreviation defined in one piece is
not expanded in the next.

With ``n_process > 1`` batches go to forked worker processes that inherit the loaded
pipeline (no reload, nothing pickled but the records); results come back in input order.
"""
from __future__ import annotations

import json
import logging
import multiprocessing
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Deque, Dict, Iterable, Iterator, List, Tuple

from spacy.language import Language

from spacy_sapbert.annotate.readers import Record
from spacy_sapbert.annotate.record import doc_to_record, linkers_of
from spacy_sapbert.util.threads import single_thread_in_child

logger = logging.getLogger(__name__)
PIECE_CHARS = 100_000
"""Documents longer than this are annotated in pieces (see the module's docstring)."""
_BOUNDARIES = ("\n\n", "\n", ". ", " ")


@dataclass
class Done:
    """A document annotated: its output line (UTF-8 JSON with the newline) and counts."""

    ordinal: int
    line: bytes
    entities: int
    linked: int


@dataclass
class Failed:
    """A document the pipeline could not annotate, with where and why."""

    ordinal: int
    where: str
    reason: str


Outcome = Any  # Done | Failed


def split_text(text: str, limit: int = PIECE_CHARS) -> List[Tuple[int, str]]:
    """(offset, piece) pairs covering ``text``, each piece at most ``limit`` characters."""
    pieces, start = [], 0
    while len(text) - start > limit:
        window = text[start:start + limit]
        cut = 0
        for boundary in _BOUNDARIES:
            found = window.rfind(boundary, limit // 2)
            if found > 0:
                cut = found + len(boundary)
                break
        cut = cut or limit
        pieces.append((start, text[start:start + cut]))
        start += cut
    pieces.append((start, text[start:]))
    return pieces


def piece_limit(nlp: Language) -> int:
    """The longest text given to ``nlp`` in one piece: PIECE_CHARS, or less if ``nlp.max_length`` is."""
    return max(1, min(PIECE_CHARS, nlp.max_length))


def _shifted(annotations: Dict[str, List[Dict[str, Any]]], offset: int) -> Dict[str, List[Dict[str, Any]]]:
    for key in ("entities", "abbreviations"):
        for item in annotations[key]:
            item["start"] += offset
            item["end"] += offset
    return annotations


def _line(record: Record, annotations: Dict[str, Any]) -> Done:
    line: Dict[str, Any] = {"id": record.id, "ordinal": record.ordinal, "text": record.text}
    if record.meta:
        line["meta"] = record.meta
    line.update(annotations)
    data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
    entities = annotations["entities"]
    linked = sum(1 for e in entities if e["concept_id"] or any(p["concept_id"] for p in e.get("parts", [])))
    return Done(record.ordinal, data, len(entities), linked)  # a split span counts when a part has a concept


def _one(nlp: Language, linkers: List[Any], record: Record) -> Outcome:
    """Annotate one document on its own (in pieces when long); a failure is an outcome, not a raise."""
    try:
        merged: Dict[str, List[Dict[str, Any]]] = {"entities": [], "abbreviations": []}
        for offset, piece in split_text(record.text, piece_limit(nlp)):
            part = _shifted(doc_to_record(nlp(piece), linkers), offset)
            merged["entities"].extend(part["entities"])
            merged["abbreviations"].extend(part["abbreviations"])
        return _line(record, merged)
    except Exception as err:  # noqa: BLE001 - any failure of the user's pipeline on this document
        return Failed(record.ordinal, record.where, f"the pipeline failed on this document: "
                                                    f"{err.__class__.__name__}: {str(err)[:300]}")


def process_batch(nlp: Language, linkers: List[Any], records: List[Record], batch_size: int) -> List[Outcome]:
    """Annotate ``records``: all at once through ``nlp.pipe``, or one by one if that raises.

    The linkers' caches are cleared first: a cached mention keeps the vector of the batch
    it was first encoded in, which differs in the last bits (bf16) from the vector another
    batch gives, so without this the output would depend on ``n_process`` and on where a
    killed run was resumed.
    """
    for linker in linkers:
        linker.linker.clear_cache()
    limit = piece_limit(nlp)
    short = [r for r in records if len(r.text) <= limit]
    outcomes: Dict[int, Outcome] = {}
    try:
        docs = list(nlp.pipe([r.text for r in short], batch_size=batch_size))
        for record, doc in zip(short, docs):
            outcomes[record.ordinal] = _line(record, doc_to_record(doc, linkers))
    except Exception as err:  # noqa: BLE001 - isolate the document that caused it below
        logger.debug("batch of %d failed (%s); annotating its documents one by one", len(short), err)
        outcomes.clear()
    for record in records:
        if record.ordinal not in outcomes:
            outcomes[record.ordinal] = _one(nlp, linkers, record)
    return [outcomes[r.ordinal] for r in records]


_WORKER: Dict[str, Any] = {}


def _work(records: List[Record], batch_size: int) -> List[Outcome]:
    return process_batch(_WORKER["nlp"], _WORKER["linkers"], records, batch_size)


def _batches(records: Iterable[Record], size: int) -> Iterator[List[Record]]:
    batch: List[Record] = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run(nlp: Language, records: Iterable[Record], batch_size: int, n_process: int) -> Iterator[Outcome]:
    """Outcomes for ``records`` in input order, from this process or ``n_process`` forked workers."""
    linkers = linkers_of(nlp)
    if n_process == 1:
        for batch in _batches(records, batch_size):
            yield from process_batch(nlp, linkers, batch, batch_size)
        return
    _WORKER.update(nlp=nlp, linkers=linkers)
    context = multiprocessing.get_context("fork")
    pending: Deque[Future] = deque()
    try:
        with ProcessPoolExecutor(n_process, mp_context=context, initializer=single_thread_in_child) as pool:
            for batch in _batches(records, batch_size):
                pending.append(pool.submit(_work, batch, batch_size))
                while len(pending) >= 2 * n_process:  # bounded: the input is never read ahead of the workers
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
    except BrokenProcessPool as err:
        raise RuntimeError("a worker process died (killed, or out of memory?); what was written so far is kept: "
                           "run the same command again to resume") from err
    finally:
        _WORKER.clear()


__all__ = ["Done", "Failed", "PIECE_CHARS", "process_batch", "run", "split_text"]
