"""Batch annotation: stream input records through a spaCy pipeline into resumable JSONL.

One output line per document::

    {"id": "...", "ordinal": 0, "text": "...", "meta": {...},      # meta: the input's other fields
     "entities": [{"start": 0, "end": 4, "text": "...", "label": "DISEASE",
                   "concept_id": "D003920", "concept_name": "Diabetes Mellitus", "score": 0.93,
                   "kb_ents": [["D003920", 0.93], ...],              # scispaCy's shape
                   "long_form": "...",                               # when linked through an abbreviation
                   "parts": [{"text": "...", "concept_id": "...", ...}]}],  # a split coordinated span
     "abbreviations": [{"short": "T2DM", "long": "...", "start": 10, "end": 14}]}

``concept_id`` is the concept the linker chose (``ent.kb_id_``), empty when none passed
its threshold. Memory stays flat on inputs of any size: records are read lazily, handed
to ``nlp.pipe`` in batches and written as they come back; the only state kept is the
set of finished ordinals (an int per document). What happens to a document the pipeline
cannot process, to long documents, and with several processes: see :mod:`.process`.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Union

from spacy.language import Language

from spacy_sapbert.annotate import process
from spacy_sapbert.annotate.identity import RunRecord, input_identity, pipeline_identity
from spacy_sapbert.annotate.output import ResumableJsonl, check_paths
from spacy_sapbert.annotate.readers import Malformed, Record, read_records
from spacy_sapbert.annotate.record import doc_to_record
from spacy_sapbert.errors import InputError
from spacy_sapbert.util.output_lock import output_lock

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


def reading_options(fmt: str, text_field: str, id_field: Optional[str]) -> Dict[str, Any]:
    return {"format": fmt, "text_field": text_field, "id_field": id_field}


def preflight(source: PathLike, output: PathLike, *, resume: bool = True, fmt: str = "auto",
              text_field: str = "text", id_field: Optional[str] = "id") -> Dict[str, Any]:
    """The checks that need no pipeline: run them before loading one (a CLI's first step).

    The input exists and is text, the output is not the input and can be written, and a
    resumed output was written from this same input read the same way. Returns the input's
    identity (what the output's record file keeps).
    """
    check_paths(source, output)
    read_records(source, fmt=fmt, text_field=text_field, id_field=id_field)  # format and binary checks
    current = {**input_identity(source), **reading_options(fmt, text_field, id_field)}
    output = Path(output)
    if resume and output.is_file() and output.stat().st_size > 0:
        RunRecord(output, {"input": current}).check_resume("input")
    return current


def annotate(nlp: Language, source: PathLike, output: PathLike, *, fmt: str = "auto", text_field: str = "text",
             id_field: Optional[str] = "id", batch_size: int = 32, n_process: int = 1, strict: bool = False,
             resume: bool = True, show_progress: bool = True) -> Summary:
    """Annotate every record of ``source`` with ``nlp`` into JSONL ``output``.

    Malformed records, and documents the pipeline fails on, are logged with their file and
    line and counted as skipped (with ``strict``, the first one raises :class:`InputError`).
    With ``resume`` (the default) an existing ``output`` of the same input and pipeline is
    continued: its documents are not annotated again. Without it, the new output replaces
    the old one only once it is complete. One run at a time writes an output: while another
    process holds its lock (:mod:`spacy_sapbert.util.output_lock`), :class:`InputError` names it.
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"expected an integer ≥ 1, got {batch_size!r}", field="batch_size")
    if not isinstance(n_process, int) or n_process < 1:
        raise InputError(f"expected an integer ≥ 1, got {n_process!r}", field="n_process")
    check_paths(source, output)  # before the lock: an output that cannot be written is reported as such
    with output_lock(output):  # one run at a time: a second one is refused here, having touched nothing
        source_identity = preflight(source, output, resume=resume, fmt=fmt, text_field=text_field,
                                    id_field=id_field)
        records = read_records(source, fmt=fmt, text_field=text_field, id_field=id_field)
        run = RunRecord(output, {"input": source_identity, "pipeline": pipeline_identity(nlp)})
        writer = ResumableJsonl(output, resume=resume, record=run)
        summary = Summary(output=str(output))
        if writer.done:
            logger.info("%s: resuming; %d documents are already there", output, len(writer.done))

        def skip(where: str, reason: str) -> None:
            if strict:
                raise InputError(reason, where)
            logger.warning("%s: skipped (%s)", where, reason)
            summary.skipped += 1

        def todo() -> Iterator[Record]:
            for item in records:
                summary.read += 1
                if isinstance(item, Malformed):
                    skip(item.where, f"malformed record: {item.reason}")
                elif item.ordinal in writer.done:
                    summary.already_done += 1
                else:
                    yield item

        with progress_bar(show_progress, desc="annotate", unit="doc") as progress, writer:
            for outcome in process.run(nlp, todo(), batch_size, n_process):
                if isinstance(outcome, process.Failed):
                    skip(outcome.where, outcome.reason)
                    continue
                writer.write_line(outcome.ordinal, outcome.line)
                summary.written += 1
                summary.entities += outcome.entities
                summary.linked += outcome.linked
                progress.update(1)
        return summary


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass


@contextlib.contextmanager
def progress_bar(show: bool, **tqdm_args: Any) -> Iterator[Any]:
    """A tqdm bar whose log lines are printed above it, not onto it (or nothing)."""
    if not show:
        yield _NoProgress()
        return
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(), tqdm(**tqdm_args) as bar:
        yield bar


__all__ = ["Summary", "annotate", "doc_to_record", "preflight"]
