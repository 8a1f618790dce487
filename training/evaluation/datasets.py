"""The benchmarks and what a system is scored on: queries, training queries, KB, dictionary.

A dataset is a PubTator file to evaluate, the files whose mentions join the dictionary
(BioSyn's "test dictionary": train + dev mentions for a test set, train mentions for a dev
set) and a KB. :class:`Loader` reads each corpus and KB once per run, since several
datasets share them, and builds each dictionary once. The scoring itself is
:mod:`spacy_sapbert.training.evaluation.accuracy`.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

from .queries import AbbreviationExpander, Query, load_queries

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]


@dataclass(frozen=True)
class DatasetSpec:
    """A benchmark: the file to evaluate, the files whose mentions join the dictionary, the KB."""

    name: str
    eval_file: str
    train_files: Tuple[str, ...]
    kb: str
    types: Optional[Tuple[str, ...]] = None
    note: str = ""


_NCBI = "corpora/ncbi-disease/"
_CDR = "corpora/bc5cdr/"
DATASETS: Dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec("ncbi-dev", _NCBI + "NCBIdevelopset_corpus.txt", (_NCBI + "NCBItrainset_corpus.txt",), "medic"),
        DatasetSpec("ncbi-test", _NCBI + "NCBItestset_corpus.txt",
                    (_NCBI + "NCBItrainset_corpus.txt", _NCBI + "NCBIdevelopset_corpus.txt"), "medic"),
        DatasetSpec("bc5cdr-disease-dev", _CDR + "CDR_DevelopmentSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt",), "medic", ("Disease",)),
        DatasetSpec("bc5cdr-chemical-dev", _CDR + "CDR_DevelopmentSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt",), "mesh", ("Chemical",),
                    "MeSH 2024 descriptors only: CTD chemicals and MeSH supplementary (C…) concepts are missing"),
        # Not in the offline mirror (kept as an independent check); used when a user has the file.
        DatasetSpec("bc5cdr-disease-test", _CDR + "CDR_TestSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt", _CDR + "CDR_DevelopmentSet.PubTator.txt"), "medic",
                    ("Disease",)),
        DatasetSpec("bc5cdr-chemical-test", _CDR + "CDR_TestSet.PubTator.txt",
                    (_CDR + "CDR_TrainingSet.PubTator.txt", _CDR + "CDR_DevelopmentSet.PubTator.txt"), "mesh",
                    ("Chemical",)),
    )
}
# The four benchmarks of the table in docs/evaluation.md (the BC5CDR test split is not distributed here).
DEFAULT_DATASETS = ("ncbi-dev", "ncbi-test", "bc5cdr-disease-dev", "bc5cdr-chemical-dev")


@dataclass
class EvalSet:
    """Everything a system is scored on: queries, training queries, KB and dictionary."""

    name: str
    mode: str
    queries: List[Query]
    train_queries: List[Query]
    kb: KnowledgeBase
    dictionary: KnowledgeBase
    files: Dict[str, Any] = field(default_factory=dict)


# -- dictionary ---------------------------------------------------------------------------
def training_names(train_queries: Iterable[Query]) -> List[Tuple[str, str, str]]:
    """(gold ID, normalised name, mention type) the training mentions contribute to the dictionary.

    Single-ID queries contribute their text; composite ones only when the corpus gave
    the parts in ID order (BC5CDR's 7th column). Parts split by text patterns (NCBI) are
    not reliably in ID order ("pineal and retinal tumours" is D019572|D010871, retinal first), so
    they would teach the dictionary wrong names.
    """
    found: List[Tuple[str, str, str]] = []
    for query in train_queries:
        if len(query.gold) == 1 and len(query.parts) == 1:
            found.append((query.gold[0], query.parts[0], query.type))
        elif query.parts_aligned:
            found.extend((gid, part, query.type) for gid, part in zip(query.gold, query.parts))
    return [(gid, name, kind) for gid, name, kind in found if name]


def kb_type(mention_type: str) -> Optional[str]:
    """The KB type of a corpus mention type: its span label (the NER data's tables: BC5CDR's
    Chemical/Disease, NCBI's four disease classes) and that label's first KB type in the linker's
    default ``label_to_types`` (``Chemical`` / ``Disease``); None for another corpus's type."""
    from spacy_sapbert.linking.settings import DEFAULT_LABEL_TO_TYPES

    from ..ner.data import BC5CDR_LABELS, NCBI_LABELS

    label = {**BC5CDR_LABELS, **NCBI_LABELS}.get(mention_type)
    return DEFAULT_LABEL_TO_TYPES[label][0] if label in DEFAULT_LABEL_TO_TYPES else None


def build_dictionary(kb: KnowledgeBase, train_queries: Iterable[Query], name: Optional[str] = None) -> KnowledgeBase:
    """The KB plus the training mentions as names of their gold concepts (BioSyn's dictionary). A
    gold ID the KB lacks becomes a concept of its own, typed by its mention (:func:`kb_type`; no
    type for a type the project does not know), so that a linker's type filter treats it as the
    KB's own concepts."""
    return add_names(kb, training_names(train_queries), name or f"{kb.name}+train")


def add_names(kb: KnowledgeBase, names: Iterable[Tuple[str, str, str]], name: str) -> KnowledgeBase:
    """A copy of ``kb`` named ``name`` with each ``(gold ID, name, mention type)`` of
    :func:`training_names` added as a name of its gold concept (see :func:`build_dictionary`)."""
    dictionary = KnowledgeBase(iter(kb), name=name)
    added = new_concepts = 0
    for gid, mention, kind in names:
        concept = kb.resolve(gid) or dictionary.resolve(gid)
        if concept is None:
            known = kb_type(kind)
            dictionary.add(Concept(gid, mention, types=[known] if known else []))
            new_concepts += 1
        else:
            dictionary.add(Concept(concept.concept_id, concept.canonical_name, [mention]))
        added += 1
    logger.info("dictionary %s: %d training names added (%d concepts not in the KB), %d concepts",
                dictionary.name, added, new_concepts, len(dictionary))
    return dictionary


# -- loading ------------------------------------------------------------------------------
def kb_path(kbs_dir: PathLike, kb_name: str) -> Path:
    """``<kbs>/<name>.jsonl.gz`` (or ``.jsonl``), as ``spacy project run kb`` writes them."""
    base = Path(kbs_dir)
    for suffix in (".jsonl.gz", ".jsonl", ".json"):
        candidate = base / f"{kb_name}{suffix}"
        if candidate.is_file():
            return candidate
    raise InputError(f"knowledge base {kb_name!r} not found (expected {kb_name}.jsonl.gz; run `spacy project run kb`)",
                     base)


class Loader:
    """Loads queries and KBs once per run (a KB or a corpus is shared by several datasets)."""

    def __init__(self, expand_abbreviations: bool = True) -> None:
        self.expand = expand_abbreviations
        self._expander: Optional[AbbreviationExpander] = None
        self._queries: Dict[Tuple[str, Optional[Tuple[str, ...]]], List[Query]] = {}
        self._kbs: Dict[str, KnowledgeBase] = {}
        self._dictionaries: Dict[Tuple[str, Tuple[str, ...], Optional[Tuple[str, ...]]], KnowledgeBase] = {}

    def queries(self, path: PathLike, types: Optional[Sequence[str]] = None) -> List[Query]:
        """The queries of one PubTator file (of ``types`` only, when given), read once."""
        key = (str(Path(path).resolve()), tuple(types) if types else None)
        if key not in self._queries:
            if self.expand and self._expander is None:
                self._expander = AbbreviationExpander()
            self._queries[key] = load_queries(path, types, expand=self.expand, expander=self._expander)
        return self._queries[key]

    def kb(self, path: PathLike) -> KnowledgeBase:
        """One KB file, read once."""
        key = str(Path(path).resolve())
        if key not in self._kbs:
            started = time.perf_counter()
            self._kbs[key] = KnowledgeBase.from_jsonl(path)
            logger.info("KB %s: %d concepts (%.1f s)", path, len(self._kbs[key]), time.perf_counter() - started)
        return self._kbs[key]

    def eval_set(self, name: str, eval_file: PathLike, train_files: Sequence[PathLike], kb_file: PathLike,
                 types: Optional[Sequence[str]] = None, kb_only: bool = False) -> EvalSet:
        """Any corpus and KB as an :class:`EvalSet`; the dictionary is the KB (``kb_only``) or built once."""
        queries = self.queries(eval_file, types)
        train_queries = [q for f in train_files for q in self.queries(f, types)]
        kb = self.kb(kb_file)
        if kb_only:
            dictionary = kb
        else:
            key = (str(Path(kb_file).resolve()), tuple(str(Path(f).resolve()) for f in train_files),
                   tuple(types) if types else None)
            if key not in self._dictionaries:
                self._dictionaries[key] = build_dictionary(kb, train_queries)
            dictionary = self._dictionaries[key]
        files = {"eval": str(eval_file), "train": [str(f) for f in train_files], "kb": str(kb_file),
                 "types": list(types) if types else None}
        return EvalSet(name, "kb" if kb_only else "kb+train", queries, train_queries, kb, dictionary, files)

    def dataset(self, name: str, assets_dir: PathLike, kbs_dir: PathLike, kb_only: bool = False) -> EvalSet:
        """A named benchmark of :data:`DATASETS`, its files under ``assets_dir`` and ``kbs_dir``."""
        spec = DATASETS.get(name)
        if spec is None:
            raise InputError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)} (or give --corpus and --kb)",
                             field="dataset")
        assets = Path(assets_dir)
        eval_file = assets / spec.eval_file
        if not eval_file.is_file():
            raise InputError(f"corpus file for {name} not found (run `spacy project run assets`)", eval_file)
        eval_set = self.eval_set(name, eval_file, [assets / f for f in spec.train_files],
                                 kb_path(kbs_dir, spec.kb), spec.types, kb_only)
        if spec.note:
            eval_set.files["note"] = spec.note
        return eval_set
