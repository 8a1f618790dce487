"""BioSyn's data format: queries, dictionaries and their ID rules, read in one place.

BioSyn, SapBERT, ResCNN and GenBioEL publish their NCBI-disease / BC5CDR-disease figures on
BioSyn's preprocessed data, and their users keep their own datasets in the same shape: a
``processed_<split>/`` folder of ``<PMID>.concept`` files (one query a line,
``PMID||start|end||type||mention||CUI``, the abstract beside it in ``<split>/<PMID>.txt``) and a
dictionary file (``CUI||name`` a line). The evaluation harness, the re-ranker's and the
generative linker's data all read it through this module, so a query means the same thing to
each of them.

**IDs.** A query's CUI joins a composite's IDs with ``|`` or ``+`` and every one is gold
(:func:`gold_ids`); a dictionary entry's CUI is split on ``|`` only, as SapBERT's ``check_label``
splits a predicted label, so a ``+`` entry (``D009468+D030342``) is one ID, which a query's gold
(split on ``+``) never holds (:func:`dictionary_ids`). A candidate is right when the two meet: the
project's one gold rule, :func:`spacy_sapbert.kb.matching.is_gold` without a KB. A query's mention
splits the same way into sub-mentions, each searched alone (:func:`split_mention`).
Scoring compares these ID strings as written, as SapBERT does; building a knowledge base from a
dictionary (:mod:`spacy_sapbert.kb.sources.biosyn`, the same line grammar) turns them into the
project's ID grammar instead (``OMIM:613097``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.matching import concept_ids
from spacy_sapbert.kb.sources.biosyn import split_line

PathLike = Union[str, Path]


@dataclass(frozen=True)
class BiosynQuery:
    """One query line: its mention and CUI as written, ``where`` (``file:line``), the document
    (PMID, the file's stem) and its span field as written (``start|end``; SapBERT's scoring never
    reads it, so it is parsed only by what needs it: :func:`query_span`)."""

    mention: str
    cui: str
    where: str
    document: str = ""
    span: str = ""

    @property
    def file_and_line(self) -> Tuple[str, Optional[int]]:
        """``where`` as (file, line number), for errors about this query."""
        file, _, line = self.where.rpartition(":")
        return (file, int(line)) if line.isdigit() else (self.where, None)


def query_span(query: BiosynQuery) -> Tuple[int, int]:
    """``(start, end)`` of a query's span field, or an error naming its file, line and field."""
    try:
        start, end = (int(x) for x in query.span.split("|"))
    except ValueError as err:
        raise InputError(f"span {query.span!r} is not start|end", *query.file_and_line, "span") from err
    return start, end


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
            queries.append(BiosynQuery(fields[3].strip(), fields[4].strip(), f"{file}:{number}", file.stem,
                                       fields[1].strip()))
    return queries


def read_dictionary(path: PathLike) -> Tuple[List[str], List[str]]:
    """(names, CUIs) of a BioSyn dictionary file, one ``CUI||name`` a line, in file order, as written."""
    path = Path(path)
    if not path.is_file():
        raise InputError("dictionary file not found", path)
    names, cuis = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        cui, name = split_line(line, path, number)
        names.append(name.strip())
        cuis.append(cui.strip())
    return names, cuis


def split_mention(mention: str) -> List[str]:
    """The sub-mentions a query is searched as: its mention split on ``|`` and ``+``, as written
    (SapBERT's split; a part may keep a space at its edge, which tokenisation ignores)."""
    return mention.replace("+", "|").split("|")


def sub_mentions(queries: Sequence[BiosynQuery]) -> List[List[str]]:
    """:func:`split_mention` of every query."""
    return [split_mention(q.mention) for q in queries]


def id_list(cui: str) -> List[str]:
    """A query's (or a composite dictionary entry's) IDs in order, split on ``|`` and ``+``, spaces
    and empty parts dropped: what a reader of the IDs (training data, not the scoring) wants."""
    return [part.strip() for part in cui.replace("+", "|").split("|") if part.strip()]


def gold_ids(cui: str) -> set:
    """A query's gold IDs as SapBERT's scoring compares them: the CUI split on ``|`` and ``+``,
    as written (a composite's parts are each gold)."""
    return set(cui.replace("+", "|").split("|"))


def dictionary_ids(cui: str) -> frozenset:
    """A dictionary entry's IDs, split on ``|`` only, as SapBERT's ``check_label`` splits a predicted label
    (:func:`~spacy_sapbert.kb.matching.concept_ids` without a KB), for scoring that meets them with many golds."""
    return frozenset(concept_ids(cui, None))


__all__ = ["BiosynQuery", "dictionary_ids", "gold_ids", "id_list", "query_span", "read_dictionary",
           "read_queries", "split_mention", "sub_mentions"]
