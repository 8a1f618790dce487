"""Tagging docs with a :class:`~.model.TokenTagger`: the one inference path of the pipe and of training's dev scoring.

:class:`Tagging` holds the model, its tokenizer, the gazetteer and the tag scheme; it cuts each
doc into windows (:mod:`.windows`), runs them longest first in packed passes (:func:`.model.packed_log_probs`)
under the precision it was given, and turns each token's scores into spans (:mod:`.tags`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc, Span

from spacy_sapbert.errors import InputError
from spacy_sapbert.ner.features import token_features
from spacy_sapbert.ner.gazetteer import Gazetteer
from spacy_sapbert.ner.tags import TagScheme
from spacy_sapbert.ner.windows import Window, document_windows


@dataclass
class Tagging:
    model: Any
    tokenizer: Any
    gazetteer: Gazetteer
    scheme: TagScheme
    max_pieces: int = 256
    overlap: int = 64
    batch_size: int = 16
    device: str = "cpu"
    dtype: str = "float32"
    """float32, the autocast precision (bfloat16 on a CPU with native bf16, float16 on a GPU), or int8 (the
    model's linear layers quantised: :mod:`spacy_sapbert.encoding.int8`)."""
    backend: str = "torch"
    """``torch`` (:class:`~.model.TokenTagger`) or ``onnx`` (the same model on ONNX Runtime: :mod:`.onnx_tagger`)."""
    shapes: bool = False
    """Whether the model reads word-shape classes beside the KB-name states (:mod:`.features`)."""
    styles: Tuple[str, ...] = ()
    """The annotation styles the model was trained with (:mod:`.features`); empty: one, unnamed."""
    style: Optional[str] = None
    """The style to tag in (``None``: the first)."""

    def style_index(self, style: Optional[str] = None) -> int:
        style = style if style is not None else self.style
        if style is None:
            return 0
        if style not in self.styles:
            raise InputError(f"unknown style {style!r}: this model knows {list(self.styles) or 'none'}", field="style")
        return self.styles.index(style)

    def windows(self, doc: Doc, style: Optional[str] = None, pieces: Optional[Sequence[Sequence[int]]] = None
                ) -> List[Window]:
        """The model inputs for ``doc`` (training feeds the same) in ``style`` (default: :attr:`style`);
        ``pieces``, its tokens' word pieces when the caller read them already (:meth:`batch_windows`)."""
        tokens = [t.text for t in doc]
        if pieces is None:
            pieces = self.tokenizer.word_pieces(tokens)
        features = token_features(doc, self.gazetteer, self.shapes, self.style_index(style))
        return document_windows(tokens, pieces, features, self.tokenizer.special_ids(), self.max_pieces, self.overlap)

    def batch_windows(self, docs: Sequence[Doc]) -> List[List[Window]]:
        """:meth:`windows` of each doc, the word pieces of all of them read in one call (a batch repeats
        most of its words: :meth:`~spacy_sapbert.encoding.fast_tokenizer.FastTokenizer.word_pieces`)."""
        pieces = self.tokenizer.word_pieces([t.text for doc in docs for t in doc])
        out, start = [], 0
        for doc in docs:
            out.append(self.windows(doc, pieces=pieces[start:start + len(doc)]))
            start += len(doc)
        return out

    def scores(self, docs: Sequence[Doc]) -> List[np.ndarray]:
        """Per doc, log-probabilities of each tag for each token (tokens × tags; a token the model
        does not read, whitespace, is ``O``)."""
        from spacy_sapbert.encoding.packed import passes

        jobs = [(d, w) for d, windows in enumerate(self.batch_windows(docs)) for w in windows]
        lengths = np.fromiter((len(w.input_ids) for _, w in jobs), dtype=np.int64, count=len(jobs))
        out = [np.full((len(doc), len(self.scheme)), -1e4, dtype=np.float32) for doc in docs]
        for doc_scores in out:
            doc_scores[:, 0] = 0.0
        if self.backend == "onnx":
            from spacy_sapbert.ner import onnx_tagger

            # one window's pieces a pass (short windows together), longest first: ONNX Runtime's arena keeps what
            # the largest run needed, and one window's activations keep the whole pipeline's peak over NCBI test
            # below 500 MB at more documents/s than passes of 4 windows with the arena off (onnx_tagger.py)
            for rows in passes(lengths, self.max_pieces):
                batch = [jobs[i] for i in rows]
                scored = onnx_tagger.log_probs(self.model, [w for _, w in batch], self.tokenizer.pad_token_id)
                for (d, window), scores in zip(batch, scored):
                    out[d][window.tokens] = scores
            return out
        import torch

        from spacy_sapbert.ner import model as tagger_model

        half = self.dtype in ("float16", "bfloat16")
        autocast = torch.autocast(device_type=self.device.split(":")[0],
                                  dtype=getattr(torch, self.dtype) if half else torch.float32, enabled=half)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode(), autocast:
                # passes of up to batch_size full windows' pieces, longest windows first (packed.passes)
                for rows in passes(lengths, self.batch_size * self.max_pieces):
                    batch = [jobs[i] for i in rows]
                    log_probs = tagger_model.packed_log_probs(self.model, [w for _, w in batch], self.batch_size,
                                                              self.device)
                    for (d, window), scores in zip(batch, log_probs):
                        out[d][window.tokens] = scores.cpu().numpy()
        finally:
            self.model.train(was_training)
        return out

    drop_gene_symbols: bool = False
    """Leave out a one-token entity shaped like a gene symbol that the next word calls a gene or
    protein (:func:`is_gene_symbol`). Off by default: NCBI disease tags "DMD" in "the DMD gene" as
    a disease modifier, and the rule cost 1.3 F1 on NCBI test for 2 false positives less on BC5CDR dev."""

    def spans(self, docs: Iterable[Doc], scores: Sequence[np.ndarray]) -> List[List[Span]]:
        """Best well-formed spans per doc for the scores of :meth:`scores`."""
        found = [self.scheme.spans(doc, self.scheme.decode(s)) for doc, s in zip(docs, scores)]
        if self.drop_gene_symbols:
            found = [[span for span in spans if not is_gene_symbol(span)] for spans in found]
        return found


GENE_WORDS = frozenset({"gene", "genes", "protein", "proteins", "mrna", "allele", "alleles", "locus", "mutation",
                        "mutations", "variant", "variants", "polymorphism", "polymorphisms"})
"""Words that, right after a symbol, say it names a gene or its product ("CFTR gene", "DMD mutations")."""


def is_gene_symbol(span: Span) -> bool:
    """One token, capitals (and digits) only or mixed case with a digit, followed by a :data:`GENE_WORDS` word.
    The corpora never tag genes, yet a model that learned "DMD" (the disease) tags "the DMD gene" too."""
    if len(span) != 1 or span.end >= len(span.doc):
        return False
    text = span.text
    letters = [c for c in text if c.isalpha()]
    shaped = len(letters) >= 2 and (all(c.isupper() for c in letters) or
                                    (any(c.isupper() for c in letters) and any(c.isdigit() for c in text)))
    return shaped and span.doc[span.end].lower_ in GENE_WORDS
