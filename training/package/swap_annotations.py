"""Give a built default pipeline what its training corpora's annotators did: ``dictionary_entities``
after the NER with the wordings they tag nearly everywhere (``sapbert ner-dictionary``) and, given,
the wordings they seldom tag (its exclusions: NER entities that are exactly one are removed) and the KB
names entities grow to, and the
linker's annotated-names table (``sapbert annotated-names``). Nothing is retrained or re-encoded:
the NER, the encoder, the KB and the index are copied byte for byte.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Dict, Optional, Union

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.annotated_names import AnnotatedNames
from spacy_sapbert.linking.exact_names import ExactNames
from spacy_sapbert.ner.name_growth import NameGrowth, read_grow_names
from spacy_sapbert.pipes.dictionary import read_exclusions, read_patterns

from .build import NER_PIPES, package_report, write_pipeline

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
RULER = "dictionary_entities"
LINKER_KEPT = ("encoder", "index", "kb.jsonl.gz", "cfg.json")
"""The linker's parts that stay byte for byte (the table is the one new file)."""


def add_annotations(pipeline: PathLike, names: PathLike, patterns: PathLike, output: PathLike,
                    card_extra: str = "", overwrite: bool = False, extend: bool = True,
                    exclusions: Optional[PathLike] = None, grow_names: Optional[PathLike] = None,
                    exact_names: Optional[PathLike] = None) -> Dict[str, Any]:
    """Write ``pipeline`` with the dictionary of ``patterns`` after its NER and the table ``names`` in its
    linker to ``output`` (which may be ``pipeline`` itself); an earlier dictionary or table is replaced,
    any other pipe (a user's own ``entity_ruler`` too) is kept. ``extend``: the dictionary may also replace NER
    entities a longer listed wording covers whole (measured better on BC5CDR dev: docs/ner.md);
    ``exclusions`` (``sapbert ner-dictionary --exclusions``): the wordings whose NER entities it removes;
    ``grow_names`` (``sapbert ner-dictionary --grow-names``): the KB names its entities grow to;
    ``exact_names`` (``sapbert kb exact-names``): the linker's table of names its KB lacks (without it, the
    pipeline's own table, if any, stays)."""
    import spacy

    started = time.perf_counter()
    pipeline, names, patterns = Path(pipeline), Path(names), Path(patterns)
    report = package_report(pipeline)
    exclusions = Path(exclusions) if exclusions is not None else None
    grow_names = Path(grow_names) if grow_names is not None else None
    for path in (names, patterns, *[Path(p) for p in (exclusions, grow_names, exact_names) if p is not None]):
        if not path.is_file():
            raise InputError("file not found", path)
    nlp = spacy.load(pipeline)
    ner = next((n for n in nlp.pipe_names if n in NER_PIPES), None)
    if ner is None or LINKER_PIPE not in nlp.pipe_names:
        raise InputError(f"needs a NER ({' or '.join(NER_PIPES)}) and a {LINKER_PIPE}", pipeline)
    table = AnnotatedNames.from_disk(names)
    linker = nlp.get_pipe(LINKER_PIPE)
    linker.annotated_table = table
    if exact_names is not None:
        linker.exact_table = ExactNames(exact_names)
    if RULER in nlp.pipe_names:
        nlp.remove_pipe(RULER)
    ruler = nlp.add_pipe(RULER, after=ner, config={"extend": extend})
    found = read_patterns(patterns)
    ruler.add_patterns(found)
    excluded = read_exclusions(exclusions) if exclusions else []
    ruler.add_exclusions(excluded)
    growth = read_grow_names(grow_names) if grow_names else NameGrowth()
    ruler.add_grow_names(growth.pairs())
    report["annotations"] = {"annotated_names": str(names), "wordings": len(table),
                             "coordinated_wordings": len(table.composites),
                             "former_ids": len(table.former_ids), "decided": table.summary(),
                             "sources": table.sources, "ruler_patterns": str(patterns),
                             "patterns": len(found), "extend": extend, "exclusions": len(excluded),
                             "exclusions_file": str(exclusions) if exclusions else None,
                             "grow_names": len(growth), "grow_names_file": str(grow_names) if grow_names else None,
                             "exact_names": exact_names_report(linker.exact_table),
                             "seconds": round(time.perf_counter() - started, 1)}
    keep = [n for n in nlp.pipe_names if n not in (RULER, LINKER_PIPE) and (pipeline / n).is_dir()]
    keep += [f"{LINKER_PIPE}/{part}" for part in LINKER_KEPT if (pipeline / LINKER_PIPE / part).exists()]
    write_pipeline(nlp, report, output, card_extra, overwrite, keep_from=pipeline, keep=keep)
    logger.info("%s: %d ruler patterns after %s, %d annotated wordings in the linker", output, len(found), ner,
                len(table))
    return report


def exact_names_report(table: Optional[ExactNames]) -> Optional[Dict[str, Any]]:
    """What the card says of the linker's exact-names table: its counts, score and source (None without one)."""
    if table is None:
        return None
    return {key: table.header.get(key) for key in ("concepts", "names", "score", "source")}


__all__ = ["add_annotations", "exact_names_report"]
