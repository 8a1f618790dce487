"""``sapbert ner-data``: the PubTator corpora as the NER model's DocBin files, with their stats.

train = BC5CDR train (+ NCBI train, DISEASE only), dev = BC5CDR dev, ncbi_test = NCBI test
(held out, for reporting), ncbi_dev = NCBI dev (scored, never trained on). With ``extra``, BioRED
and the IOB corpora of :mod:`.extra_corpora` are written as training parts of their own; ``parts.json``
lists every training part with the labels it annotates completely (what ``ner-train --parts`` reads). Each document goes through
:func:`~spacy_sapbert.training.ner.data.convert_documents`; what the conversion did to the
gold mentions is written next to the DocBins (``stats.json``) and logged, so that no
mention is lost without a count.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, DocBin

from spacy_sapbert.errors import InputError
from ..corpora import pmids, read_pubtator
from .data import (BC5CDR_LABELS, CHEMICAL, DISEASE, NCBI_LABELS, ConversionStats, chemical_lexicon,
                   convert_documents, mask_unannotated, split_sentences)
from .extra_corpora import CorpusPart, extra_parts

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
UNITS = ("document", "sentence")
DOCBIN_ATTRS = ["ORTH", "ENT_IOB", "ENT_TYPE", "SENT_START"]
LOGGED_EXAMPLES = 5
PARTS_FILE = "parts.json"


@dataclass
class CorpusPaths:
    """The PubTator files a NER corpus is built from (NCBI files optional)."""

    bc5cdr_train: Path
    bc5cdr_dev: Path
    ncbi_train: Optional[Path] = None
    ncbi_test: Optional[Path] = None
    ncbi_dev: Optional[Path] = None

    @classmethod
    def from_folder(cls, corpora: PathLike, with_ncbi: bool = True) -> "CorpusPaths":
        """The mirror's layout: ``<corpora>/bc5cdr/CDR_*.PubTator.txt``, ``<corpora>/ncbi-disease/NCBI*_corpus.txt``."""
        corpora = Path(corpora)
        paths = cls(
            bc5cdr_train=corpora / "bc5cdr" / "CDR_TrainingSet.PubTator.txt",
            bc5cdr_dev=corpora / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt",
            ncbi_train=corpora / "ncbi-disease" / "NCBItrainset_corpus.txt" if with_ncbi else None,
            ncbi_test=corpora / "ncbi-disease" / "NCBItestset_corpus.txt",
            ncbi_dev=corpora / "ncbi-disease" / "NCBIdevelopset_corpus.txt",
        )
        for name, path in asdict(paths).items():
            if path is not None and not Path(path).is_file():
                raise InputError(f"corpus file for {name} not found", path)
        return paths


def read_parts(corpus: PathLike) -> List[dict]:
    """The training parts ``ner-data`` listed in ``<corpus>/parts.json``: file and labels of each."""
    path = Path(corpus) / PARTS_FILE
    if not path.is_file():
        raise InputError("no parts.json (build the corpus with `sapbert ner-data … --extra all`)", path)
    try:
        listed = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise InputError(f"not JSON ({err})", path) from err
    for number, part in enumerate(listed):
        if not isinstance(part, dict) or not isinstance(part.get("file"), str) or not isinstance(part.get("labels"), list):
            raise InputError(f"part {number} needs a 'file' string and a 'labels' list", path, field="parts")
    return listed


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
    extra: Optional[Sequence[str]] = None,
    corpora: Optional[PathLike] = None,
) -> Dict[str, ConversionStats]:
    """Write ``train.spacy``, ``dev.spacy`` (and ``ncbi_test.spacy``) plus ``stats.json`` to ``output``,
    and train.spacy's parts per corpus, ``train_bc5cdr.spacy`` and ``train_ncbi.spacy`` (the
    transformer NER learns each corpus's annotation style apart).

    Returns the stats per part. ``split_hyphens`` must match the training config's tokenizer
    (configs/ner.cfg: true); ``nlp``, when given, wins over it. ``extra`` names corpora of
    :mod:`.extra_corpora` (found under ``corpora``) to add as training parts.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if nlp is None:
        from spacy_sapbert.pipes.tokenizer import scispacy_blank

        nlp = scispacy_blank(split_hyphens=split_hyphens)
    output = Path(output)
    outputs, stats = _convert_corpora(nlp, paths, misaligned, mask_ncbi_chemicals)
    parts = [CorpusPart("bc5cdr", "train_bc5cdr.spacy", [CHEMICAL, DISEASE])]
    if paths.ncbi_train is not None:
        parts.append(CorpusPart("ncbi", "train_ncbi.spacy", [DISEASE]))
    if extra:
        if corpora is None:
            raise InputError("extra corpora need the corpora folder", field="corpora")
        held_out = pmids([paths.bc5cdr_dev, paths.ncbi_dev, paths.ncbi_test])
        found, extra_stats = extra_parts(nlp, corpora, held_out, misaligned, extra)
        stats.update(extra_stats)
        for part in found:
            outputs[part.file] = part.docs
        parts += found
    for name, docs in outputs.items():
        if unit == "sentence":
            docs = split_sentences(docs)
        count = write_docbin(docs, output / name)
        logger.info("wrote %s: %d docs", output / name, count)
    for name, part in stats.items():
        logger.info("%s: %s", name, part.summary())
        for example in part.misaligned_examples[:LOGGED_EXAMPLES]:
            logger.info("  misaligned: %s", example)
    settings = {"extra": list(extra or []), "misaligned": misaligned, "unit": unit, "mask_ncbi_chemicals": mask_ncbi_chemicals,
                "tokenizer": dict(nlp.config["nlp"]["tokenizer"]),
                "inputs": {k: str(v) for k, v in asdict(paths).items() if v is not None}}
    (output / "stats.json").write_text(
        json.dumps({"settings": settings, "stats": {k: v.to_dict() for k, v in stats.items()}}, indent=2) + "\n",
        encoding="utf-8")
    (output / PARTS_FILE).write_text(json.dumps([part.to_dict() for part in parts], indent=2) + "\n",
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
    for name, path in (("ncbi_test", paths.ncbi_test), ("ncbi_dev", paths.ncbi_dev)):
        if path is not None:
            outputs[f"{name}.spacy"], stats[name] = convert_documents(
                nlp, read_pubtator(path), NCBI_LABELS, misaligned, source=f"{name.replace('_', '-')}:")
    return outputs, stats
