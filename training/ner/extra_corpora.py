"""More NER training data: BioRED (PubTator) and five IOB corpora of the MTL-Bioinformatics-2016 set.

Each corpus annotates some of the model's labels and not others. BioNLP13CG tags chemicals and
cancers but no other disease; CRAFT-chem tags chemicals only; BC2GM tags genes, which are
neither. A token such a corpus leaves unlabelled is therefore ``O`` only for the labels the
corpus *knows* (:attr:`CorpusPart.labels`): the trainer scores it against every tag the corpus
cannot rule out (partial labels, :mod:`spacy_sapbert.training.ner.tagger.data`). A token of a
type that is known to be neither label (genes, proteins) is written as an entity of the label
:data:`NEGATIVE`, which the tagger reads as a certain ``O``.

BioRED shares 61 documents with BC5CDR dev and 2 with NCBI dev (the mirror's README): every
BioRED document whose PMID is in a held-out or tuning set is dropped and counted.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span

from spacy_sapbert.errors import InputError
from ..corpora import read_pubtator
from .data import CHEMICAL, DISEASE, LABELS, ConversionStats, convert_documents

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
NEGATIVE = "NEG"
"""Entity label of tokens known to be neither CHEMICAL nor DISEASE (genes, proteins)."""
SENTENCES_PER_DOC = 8
"""IOB sentences grouped into one Doc, so that a window holds about as many pieces as an abstract's."""


@dataclass(frozen=True)
class IobCorpus:
    """One IOB corpus of the mirror: its folder, and what its entity types become."""

    name: str
    folder: str
    types: Mapping[str, str]
    """IOB type → CHEMICAL, DISEASE or :data:`NEGATIVE`; other types are left unlabelled."""
    labels: Tuple[str, ...]
    """The labels whose every mention the corpus tags (an unlabelled token is ``O`` for them)."""
    keep_unlabelled: float = 0.3
    """Share of sentences without a CHEMICAL or DISEASE mention kept (seeded): they teach only what is
    not an entity, and would otherwise be most of the training time."""


IOB_CORPORA: Tuple[IobCorpus, ...] = (
    IobCorpus("bionlp13cg", "mtl-2016/BioNLP13CG-IOB",
              {"Simple_chemical": CHEMICAL, "Cancer": DISEASE, "Gene_or_gene_product": NEGATIVE}, (CHEMICAL,)),
    IobCorpus("bionlp13pc", "mtl-2016/BioNLP13PC-IOB",
              {"Simple_chemical": CHEMICAL, "Gene_or_gene_product": NEGATIVE, "Complex": NEGATIVE}, (CHEMICAL,)),
    IobCorpus("bionlp11id", "mtl-2016/BioNLP11ID-IOB", {"Chemical": CHEMICAL, "Protein": NEGATIVE}, (CHEMICAL,)),
    IobCorpus("craft-chem", "mtl-2016/CRAFT-chem-IOB", {"CHEBI": CHEMICAL}, (CHEMICAL,), keep_unlabelled=0.15),
    IobCorpus("bc2gm", "mtl-2016/BC2GM-IOB", {"GENE": NEGATIVE}, (), keep_unlabelled=0.25),
)
IOB_SPLITS = ("train.tsv", "devel.tsv", "test.tsv")
"""All three: these corpora are never scored here (their copies hold no BC5CDR/NCBI test sentence)."""
EXTRA_CORPORA: Tuple[str, ...] = ("biored",) + tuple(corpus.name for corpus in IOB_CORPORA)
"""What ``ner-data --extra`` accepts."""
BIORED_FILES = ("biored/Train.PubTator", "biored/Dev.PubTator", "biored/Test.PubTator")
BIORED_LABELS: Dict[str, str] = {"ChemicalEntity": CHEMICAL, "DiseaseOrPhenotypicFeature": DISEASE,
                                 "GeneOrGeneProduct": NEGATIVE}


@dataclass
class CorpusPart:
    """One training file of the NER corpus and the labels it annotates completely."""

    name: str
    file: str
    labels: List[str]
    docs: List[Doc] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return {"name": self.name, "file": self.file, "labels": list(self.labels)}


def read_iob(path: PathLike) -> Iterator[List[Tuple[str, str]]]:
    """Sentences of an IOB file (``token TAB tag``, blank line between sentences) as (token, tag) lists."""
    path = Path(path)
    if not path.is_file():
        raise InputError("IOB file not found", path)
    sentence: List[Tuple[str, str]] = []
    with path.open(encoding="utf-8") as lines:
        for line_no, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if not line.strip():
                if sentence:
                    yield sentence
                sentence = []
                continue
            cols = line.split("\t")
            if len(cols) != 2 or not (cols[1] == "O" or cols[1][:2] in ("B-", "I-")):
                raise InputError(f"expected 'token<TAB>O|B-type|I-type', got {line!r}", path, line_no, "tag")
            sentence.append((cols[0], cols[1]))
    if sentence:
        yield sentence


def iob_doc(nlp: Language, sentences: Sequence[List[Tuple[str, str]]], types: Mapping[str, str],
            stats: ConversionStats) -> Doc:
    """Sentences as one Doc on their own tokens, typed spans as entities (other types: outside)."""
    words = [token for sentence in sentences for token, _ in sentence]
    starts = [i == 0 for sentence in sentences for i in range(len(sentence))]
    doc = Doc(nlp.vocab, words=words, sent_starts=starts)
    spans, start, label = [], -1, ""
    tags = [tag for sentence in sentences for _, tag in sentence] + ["O"]
    for i, tag in enumerate(tags):
        if start >= 0 and not (tag.startswith("I-") and tag[2:] == label):
            mapped = types.get(label)
            if mapped is not None:
                spans.append(Span(doc, start, i, label=mapped))
                stats.mentions[mapped] += 1
                stats.entities[mapped] += 1
            else:
                stats.unlabelled[label] += 1
            start = -1
        if tag.startswith("B-") or (tag.startswith("I-") and start < 0):
            start, label = i, tag[2:]
    doc.set_ents(spans, default="outside")
    stats.documents += 1
    stats.sentences += len(sentences)
    stats.tokens += len(doc)
    return doc


def iob_part(nlp: Language, corpora: Path, corpus: IobCorpus, seed: int = 0) -> Tuple[CorpusPart, ConversionStats]:
    """One IOB corpus (all its splits) as Docs of :data:`SENTENCES_PER_DOC` sentences."""
    rng = random.Random(f"{seed}:{corpus.name}")
    kept: List[List[Tuple[str, str]]] = []
    for split in IOB_SPLITS:
        for sentence in read_iob(corpora / corpus.folder / split):
            typed = any(tag != "O" and corpus.types.get(tag[2:]) in LABELS for _, tag in sentence)
            if typed or rng.random() < corpus.keep_unlabelled:
                kept.append(sentence)
    stats = ConversionStats()
    docs = [iob_doc(nlp, kept[i:i + SENTENCES_PER_DOC], corpus.types, stats)
            for i in range(0, len(kept), SENTENCES_PER_DOC)]
    return CorpusPart(corpus.name, f"train_{corpus.name}.spacy", list(corpus.labels), docs), stats


def biored_part(nlp: Language, corpora: Path, held_out: Set[str], misaligned: str = "missing"
                ) -> Tuple[CorpusPart, ConversionStats]:
    """BioRED's three files, documents of ``held_out`` PMIDs dropped (counted in the log)."""
    documents, dropped = [], 0
    for name in BIORED_FILES:
        for document in read_pubtator(corpora / name, parse_ids=False):
            if document.pmid in held_out:
                dropped += 1
            else:
                documents.append(document)
    logger.info("BioRED: %d documents kept, %d dropped (PMIDs of BC5CDR dev / NCBI dev / NCBI test)",
                len(documents), dropped)
    docs, stats = convert_documents(nlp, documents, BIORED_LABELS, misaligned, source="biored:")
    return CorpusPart("biored", "train_biored.spacy", [CHEMICAL, DISEASE], docs), stats


def extra_parts(nlp: Language, corpora: PathLike, held_out: Set[str], misaligned: str = "missing",
                names: Optional[Sequence[str]] = None) -> Tuple[List[CorpusPart], Dict[str, ConversionStats]]:
    """BioRED and the IOB corpora (or those of ``names``), each a :class:`CorpusPart`."""
    corpora = Path(corpora)
    wanted = set(names) if names is not None else set(EXTRA_CORPORA)
    unknown = wanted - set(EXTRA_CORPORA)
    if unknown:
        raise InputError(f"unknown extra corpora {sorted(unknown)}", field="extra")
    parts, stats = [], {}
    if "biored" in wanted:
        part, stats["train/biored"] = biored_part(nlp, corpora, held_out, misaligned)
        parts.append(part)
    for corpus in IOB_CORPORA:
        if corpus.name in wanted:
            part, stats[f"train/{corpus.name}"] = iob_part(nlp, corpora, corpus)
            parts.append(part)
    return parts, stats
