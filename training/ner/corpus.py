"""``sapbert ner-data``: the PubTator corpora as the NER model's DocBin files, with their stats.

train = BC5CDR train (+ NCBI train, DISEASE only), dev = BC5CDR dev, ncbi_test = NCBI test
(held out, for reporting). Each document goes through
:func:`~spacy_sapbert.training.ner.data.convert_documents`; what the conversion did to the
gold mentions is written next to the DocBins (``stats.json``) and logged, so that no
mention is lost without a count.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin

from spacy_sapbert.errors import InputError
from ..corpora import read_pubtator
from .data import (BC5CDR_LABELS, NCBI_LABELS, ConversionStats, chemical_lexicon, convert_documents, mask_unannotated,
                   split_sentences)

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
UNITS = ("document", "sentence")
DOCBIN_ATTRS = ["ORTH", "ENT_IOB", "ENT_TYPE", "SENT_START"]
LOGGED_EXAMPLES = 5


@dataclass
class CorpusPaths:
    """The PubTator files a NER corpus is built from (NCBI files optional)."""

    bc5cdr_train: Path
    bc5cdr_dev: Path
    ncbi_train: Optional[Path] = None
    ncbi_test: Optional[Path] = None

    @classmethod
    def from_folder(cls, corpora: PathLike, with_ncbi: bool = True) -> "CorpusPaths":
        """The mirror's layout: ``<corpora>/bc5cdr/CDR_*.PubTator.txt``, ``<corpora>/ncbi-disease/NCBI*_corpus.txt``."""
        corpora = Path(corpora)
        paths = cls(
            bc5cdr_train=corpora / "bc5cdr" / "CDR_TrainingSet.PubTator.txt",
            bc5cdr_dev=corpora / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt",
            ncbi_train=corpora / "ncbi-disease" / "NCBItrainset_corpus.txt" if with_ncbi else None,
            ncbi_test=corpora / "ncbi-disease" / "NCBItestset_corpus.txt",
        )
        for name, path in asdict(paths).items():
            if path is not None and not Path(path).is_file():
                raise InputError(f"corpus file for {name} not found", path)
        return paths


def write_docbin(docs: Iterable[Doc], path: PathLike) -> int:
    """Write ``docs`` to a ``.spacy`` file; returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    docbin = DocBin(attrs=DOCBIN_ATTRS, store_user_data=False)
    count = 0
    for doc in docs:
        docbin.add(doc)
        count += 1
    docbin.to_disk(path)
    return count


def build_ner_corpus(
    paths: CorpusPaths,
    output: PathLike,
    nlp: Optional[Language] = None,
    misaligned: str = "missing",
    unit: str = "document",
    mask_ncbi_chemicals: bool = True,
    split_hyphens: bool = True,
) -> Dict[str, ConversionStats]:
    """Write ``train.spacy``, ``dev.spacy`` (and ``ncbi_test.spacy``) plus ``stats.json`` to ``output``,
    and train.spacy's parts per corpus, ``train_bc5cdr.spacy`` and ``train_ncbi.spacy`` (the
    transformer NER learns each corpus's annotation style apart).

    Returns the stats per part. ``split_hyphens`` must match the training config's tokenizer
    (configs/ner.cfg: true); ``nlp``, when given, wins over it.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if nlp is None:
        from spacy_sapbert.pipes.tokenizer import scispacy_blank

        nlp = scispacy_blank(split_hyphens=split_hyphens)
    output = Path(output)
    outputs, stats = _convert_corpora(nlp, paths, misaligned, mask_ncbi_chemicals)
    for name, docs in outputs.items():
        if unit == "sentence":
            docs = split_sentences(docs)
        count = write_docbin(docs, output / name)
        logger.info("wrote %s: %d docs", output / name, count)
    for name, part in stats.items():
        logger.info("%s: %s", name, part.summary())
        for example in part.misaligned_examples[:LOGGED_EXAMPLES]:
            logger.info("  misaligned: %s", example)
    settings = {"misaligned": misaligned, "unit": unit, "mask_ncbi_chemicals": mask_ncbi_chemicals,
                "tokenizer": dict(nlp.config["nlp"]["tokenizer"]),
                "inputs": {k: str(v) for k, v in asdict(paths).items() if v is not None}}
    (output / "stats.json").write_text(
        json.dumps({"settings": settings, "stats": {k: v.to_dict() for k, v in stats.items()}}, indent=2) + "\n",
        encoding="utf-8")
    return stats


def _convert_corpora(nlp: Language, paths: CorpusPaths, misaligned: str, mask_ncbi_chemicals: bool
                     ) -> Tuple[Dict[str, List[Doc]], Dict[str, ConversionStats]]:
    """The docs per output file, and the stats per part (train has a BC5CDR and an NCBI part)."""
    stats: Dict[str, ConversionStats] = {}
    bc5cdr_docs, stats["train/bc5cdr"] = convert_documents(
        nlp, read_pubtator(paths.bc5cdr_train), BC5CDR_LABELS, misaligned, source="bc5cdr-train:")
    outputs = {"train.spacy": list(bc5cdr_docs), "train_bc5cdr.spacy": bc5cdr_docs}
    if paths.ncbi_train is not None:
        ncbi_docs, ncbi_stats = convert_documents(
            nlp, read_pubtator(paths.ncbi_train), NCBI_LABELS, misaligned, source="ncbi-train:")
        if mask_ncbi_chemicals:
            ncbi_stats.masked_spans = mask_unannotated(nlp, ncbi_docs, chemical_lexicon(bc5cdr_docs))
        stats["train/ncbi"] = ncbi_stats
        outputs["train.spacy"] += ncbi_docs
        outputs["train_ncbi.spacy"] = ncbi_docs
    dev_docs, stats["dev"] = convert_documents(
        nlp, read_pubtator(paths.bc5cdr_dev), BC5CDR_LABELS, misaligned, source="bc5cdr-dev:")
    outputs["dev.spacy"] = dev_docs
    if paths.ncbi_test is not None:
        test_docs, stats["ncbi_test"] = convert_documents(
            nlp, read_pubtator(paths.ncbi_test), NCBI_LABELS, misaligned, source="ncbi-test:")
        outputs["ncbi_test.spacy"] = test_docs
    return outputs, stats
