"""Batch annotation: stream input records through a spaCy pipeline into resumable JSONL.

One output line per document::

    {"id": "...", "ordinal": 0, "text": "...", "meta": {...},      # meta: the input's other fields
     "entities": [{"start": 0, "end": 4, "text": "...", "label": "DISEASE",
                   "concept_id": "D003920", "concept_name": "Diabetes Mellitus", "score": 0.93,
                   "kb_ents": [["D003920", 0.93], ...],              # scispaCy's shape
                   "long_form": "..."}],                             # when linked through an abbreviation
     "abbreviations": [{"short": "T2DM", "long": "...", "start": 10, "end": 14}]}

``concept_id`` is the concept the linker chose (``ent.kb_id_``), empty when none passed
its threshold. Memory stays flat on inputs of any size: records are read lazily, handed
to ``nlp.pipe`` in batches and written as they come back; the only state kept is the
set of finished ordinals (an int per document).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span

from ..errors import InputError
from .output import ResumableJsonl
from .readers import Malformed, Record, read_records

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


@dataclass
class Summary:
    """What happened to the input's records; read = written + skipped + already_done."""

    read: int = 0
    written: int = 0
    skipped: int = 0
    already_done: int = 0
    entities: int = 0
    linked: int = 0
    output: str = ""

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def lines(self) -> List[str]:
        return [
            f"records read        {self.read:>9,}",
            f"written             {self.written:>9,}",
            f"skipped (malformed) {self.skipped:>9,}",
            f"already done        {self.already_done:>9,}",
            f"entities            {self.entities:>9,}",
            f"  with a concept    {self.linked:>9,}",
            f"output              {self.output}",
        ]


def _linkers(nlp: Language) -> List[Any]:
    from ..component import SapBertLinker

    return [pipe for _, pipe in nlp.pipeline if isinstance(pipe, SapBertLinker)]


def doc_to_record(doc: Doc, linkers: List[Any]) -> Dict[str, Any]:
    """The entities and abbreviations of ``doc`` as JSON-ready dicts."""
    primary = linkers[0] if linkers else None
    spans = list(primary.spans(doc)) if primary is not None else list(doc.ents)
    abbreviations = _abbreviations(doc)
    long_forms = {(a["start"], a["end"]): a["long"] for a in abbreviations}
    entities = []
    for span in spans:
        entities.append(_entity(span, linkers, long_forms))
    return {"entities": entities, "abbreviations": abbreviations}


def _entity(span: Span, linkers: List[Any], long_forms: Dict[Tuple[int, int], str]) -> Dict[str, Any]:
    entity: Dict[str, Any] = {"start": span.start_char, "end": span.end_char, "text": span.text,
                              "label": span.label_, "concept_id": span.kb_id_ or "", "concept_name": "",
                              "score": None}
    for number, linker in enumerate(linkers):
        candidates = [[cid, round(float(score), 4)] for cid, score in span._.get(linker.extension) or []]
        if number == 0:
            entity["kb_ents"] = candidates
            if entity["concept_id"]:
                concept = linker.kb.get(entity["concept_id"])
                entity["concept_name"] = concept.canonical_name if concept is not None else ""
                entity["score"] = next((s for c, s in candidates if c == entity["concept_id"]), None)
        else:
            entity[linker.extension] = candidates
    long_form = long_forms.get((span.start_char, span.end_char))
    if long_form:
        entity["long_form"] = long_form
    return entity


def _abbreviations(doc: Doc) -> List[Dict[str, Any]]:
    if not Doc.has_extension("abbreviations"):
        return []
    out = []
    for abbr in doc._.abbreviations or []:
        if isinstance(abbr, Span) and Span.has_extension("long_form") and abbr._.long_form is not None:
            long_form = abbr._.long_form
            out.append({"short": abbr.text, "long": getattr(long_form, "text", str(long_form)),
                        "start": abbr.start_char, "end": abbr.end_char})
    return out


def annotate(nlp: Language, source: PathLike, output: PathLike, *, fmt: str = "auto", text_field: str = "text",
             id_field: Optional[str] = "id", batch_size: int = 32, n_process: int = 1, strict: bool = False,
             resume: bool = True, show_progress: bool = True) -> Summary:
    """Annotate every record of ``source`` with ``nlp`` into JSONL ``output``.

    Malformed records are logged with their file and line and counted as skipped (with
    ``strict``, the first one raises :class:`InputError`). With ``resume`` (the default) an
    existing ``output`` is continued: its documents are not annotated again.
    """
    if batch_size < 1 or n_process < 1:
        raise InputError("batch_size and n_process must be positive", field="batch_size/n_process")
    records = read_records(source, fmt=fmt, text_field=text_field, id_field=id_field)
    writer = ResumableJsonl(output, resume=resume)
    summary = Summary(output=str(output))
    if writer.done:
        logger.info("%s: resuming; %d documents are already there", output, len(writer.done))
    linkers = _linkers(nlp)
    meta: Dict[int, Record] = {}

    def todo() -> Iterator[Tuple[str, int]]:
        for item in records:
            summary.read += 1
            if isinstance(item, Malformed):
                if strict:
                    raise InputError(f"malformed record: {item.reason}", item.where)
                logger.warning("%s: skipped, %s", item.where, item.reason)
                summary.skipped += 1
                continue
            if item.ordinal in writer.done:
                summary.already_done += 1
                continue
            meta[item.ordinal] = item
            yield item.text, item.ordinal

    progress = _progress(show_progress)
    with writer:
        for doc, ordinal in nlp.pipe(todo(), as_tuples=True, batch_size=batch_size, n_process=n_process):
            record = meta.pop(ordinal)
            annotations = doc_to_record(doc, linkers)
            line: Dict[str, Any] = {"id": record.id, "ordinal": record.ordinal, "text": record.text}
            if record.meta:
                line["meta"] = record.meta
            line.update(annotations)
            writer.write(line)
            summary.written += 1
            summary.entities += len(annotations["entities"])
            summary.linked += sum(1 for e in annotations["entities"] if e["concept_id"])
            if progress is not None:
                progress.update(1)
    if progress is not None:
        progress.close()
    return summary


def _progress(show: bool) -> Any:
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(desc="annotate", unit="doc")


__all__ = ["Summary", "annotate", "doc_to_record"]
