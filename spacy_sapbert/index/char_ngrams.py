"""A sparse first stage: character n-gram TF-IDF vectors of the dictionary names, searched exactly.

BioSyn (Sung et al., 2020) scores a (mention, name) pair as ``dense + w · sparse``, where
``sparse`` is the cosine of character n-gram TF-IDF vectors. The sparse score catches surface-form
matches that a dense model misses or ranks low: rare abbreviations and symbols ("sthag6"), typos
and spelling variants ("leukaemia"), names made of tokens the model has barely seen. Taking the
union of the dense and the sparse top-k also raises the recall of the candidates a re-ranker sees.

:class:`CharNgramIndex` is fitted on the list of (distinct, normalised) names, as BioSyn fits its
``TfidfVectorizer(analyzer="char", ngram_range=(1, 2))`` on the dictionary. It is saved without
pickle: the settings and a fingerprint of the names in ``char_ngrams.json`` (with a format
version), the vocabulary (n-grams in column order) in ``char_ngrams_vocabulary.json`` and the idf
weights in ``char_ngrams_idf.npy``. Loading rebuilds the vectorizer from vocabulary and idf and
refuses names other than those it was fitted on (the rows would not mean the same names).
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from spacy_sapbert.errors import InputError

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]

FORMAT_VERSION = 1
SETTINGS_FILE = "char_ngrams.json"
VOCABULARY_FILE = "char_ngrams_vocabulary.json"
IDF_FILE = "char_ngrams_idf.npy"
FILES = (SETTINGS_FILE, VOCABULARY_FILE, IDF_FILE)
ANALYZERS = ("char", "char_wb")
_MAX_CHUNK_CELLS = 32_000_000  # dense scores held at once by search() (128 MB of float32)


@dataclass(frozen=True)
class CharNgramSettings:
    """How names become n-grams: ``char`` (n-grams across spaces, BioSyn's) or ``char_wb`` (within
    words, padded with a space), ``ngram_range`` (min n, max n), lower-casing, sublinear tf."""

    analyzer: str = "char"
    ngram_range: Tuple[int, int] = (1, 2)
    lowercase: bool = True
    sublinear_tf: bool = False

    def __post_init__(self) -> None:
        if self.analyzer not in ANALYZERS:
            raise InputError(f"unknown analyzer {self.analyzer!r}: use {' or '.join(ANALYZERS)}", field="analyzer")
        low, high = (int(n) for n in self.ngram_range)
        if not 1 <= low <= high:
            raise InputError(f"ngram_range must be 1 <= min <= max, got {tuple(self.ngram_range)}",
                             field="ngram_range")
        object.__setattr__(self, "ngram_range", (low, high))

    @classmethod
    def parse(cls, spec: str) -> "CharNgramSettings":
        """``ANALYZER:MIN-MAX`` (``char:1-2``, ``char_wb:3-3``), as a command line spells it."""
        analyzer, _, span = spec.partition(":")
        low, _, high = span.partition("-")
        try:
            ngram_range = (int(low), int(high or low))
        except ValueError as err:
            raise InputError(f"expected ANALYZER:MIN-MAX such as char:1-2, got {spec!r}", field="sparse scheme") \
                from err
        return cls(analyzer.strip(), ngram_range)

    def label(self) -> str:
        return f"{self.analyzer}:{self.ngram_range[0]}-{self.ngram_range[1]}"

    def to_json(self) -> Dict[str, Any]:
        return {"analyzer": self.analyzer, "ngram_range": list(self.ngram_range), "lowercase": self.lowercase,
                "sublinear_tf": self.sublinear_tf}


def names_fingerprint(names: Sequence[str]) -> str:
    """A hash of the names in order: an index answers with row numbers into exactly this list."""
    digest = hashlib.sha256(json.dumps(list(names), ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()[:16]


def _vectorizer(settings: CharNgramSettings, vocabulary: Optional[List[str]] = None) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(analyzer=settings.analyzer, ngram_range=settings.ngram_range,
                           lowercase=settings.lowercase, sublinear_tf=settings.sublinear_tf, norm="l2",
                           use_idf=True, smooth_idf=True, dtype=np.float32, vocabulary=vocabulary)


class CharNgramIndex:
    """Exact search of names by the cosine of their character n-gram TF-IDF vectors.

    Build with :meth:`fit` (or :meth:`load`); rows of :meth:`search` and :meth:`score_pairs` are
    positions in :attr:`names`. Queries are taken as given: normalise them as the names were.
    """

    def __init__(self, vectorizer: Any, names: Sequence[str], settings: CharNgramSettings) -> None:
        self.vectorizer = vectorizer
        self.names: List[str] = list(names)
        self.settings = settings
        self.fingerprint = names_fingerprint(self.names)
        self.matrix = self.vectors(self.names)
        """The names' l2-normalised TF-IDF vectors (CSR, rows = names)."""

    @classmethod
    def fit(cls, names: Sequence[str], settings: Optional[CharNgramSettings] = None) -> "CharNgramIndex":
        """Learn the n-gram vocabulary and idf weights from ``names`` and index them."""
        settings = settings or CharNgramSettings()
        names = list(names)
        if not names:
            raise InputError("no names to fit the character n-gram index on", field="names")
        vectorizer = _vectorizer(settings)
        try:
            vectorizer.fit(names)
        except ValueError as err:  # "empty vocabulary": every name is blank
            raise InputError(f"no character n-grams in the names ({err})", field="names") from err
        logger.info("character n-gram index %s: %d names, %d n-grams", settings.label(), len(names),
                    len(vectorizer.vocabulary_))
        return cls(vectorizer, names, settings)

    def __len__(self) -> int:
        return len(self.names)

    def vectors(self, texts: Sequence[str]) -> Any:
        """l2-normalised TF-IDF vectors of ``texts`` (CSR, float32; all-zero for unknown n-grams only)."""
        return self.vectorizer.transform(list(texts)).tocsr()

    def search(self, queries: Sequence[str], k: int, chunk: int = 256) -> Tuple[np.ndarray, np.ndarray]:
        """The ``k`` names of highest sparse cosine for each query, best first (ties among them: lower row first):
        ``(scores, rows)``, each of shape ``(len(queries), min(k, len(names)))``."""
        if k < 1:
            raise InputError(f"k must be positive, got {k}", field="k")
        k = min(int(k), len(self.names))
        query_matrix = self.vectors(queries)
        n = query_matrix.shape[0]
        scores_out = np.empty((n, k), dtype=np.float32)
        rows_out = np.empty((n, k), dtype=np.int64)
        chunk = max(1, min(int(chunk), _MAX_CHUNK_CELLS // max(1, len(self.names))))
        for start in range(0, n, chunk):
            block = query_matrix[start:start + chunk].toarray()
            # sparse names x dense queries: one pass over the names' non-zeros per query column
            scores = np.ascontiguousarray(np.asarray(self.matrix @ block.T, dtype=np.float32).T)
            last = scores.shape[1] - k  # the k largest at the end (no negated copy: several times faster)
            part = np.sort(np.argpartition(scores, kth=last, axis=1)[:, last:], axis=1)
            part_scores = np.take_along_axis(scores, part, axis=1)
            order = np.argsort(-part_scores, axis=1, kind="stable")
            rows_out[start:start + chunk] = np.take_along_axis(part, order, axis=1)
            scores_out[start:start + chunk] = np.take_along_axis(part_scores, order, axis=1)
        return scores_out, rows_out

    def score_pairs(self, queries: Sequence[str], rows: np.ndarray) -> np.ndarray:
        """Sparse cosine of each query with the names at ``rows[i]`` (shape ``(len(queries), m)``;
        a negative row is padding and scores 0)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.ndim != 2 or rows.shape[0] != len(queries):
            raise InputError(f"rows must have shape (len(queries), m), got {rows.shape}", field="rows")
        if rows.size and rows.max() >= len(self.names):
            raise InputError(f"row {int(rows.max())} out of range ({len(self.names)} names)", field="rows")
        query_matrix = self.vectors(queries)
        repeated = query_matrix[np.repeat(np.arange(rows.shape[0]), rows.shape[1])]
        names = self.matrix[np.maximum(rows, 0).ravel()]
        scores = np.asarray(repeated.multiply(names).sum(axis=1), dtype=np.float32).reshape(rows.shape)
        scores[rows < 0] = 0.0
        return scores

    # -- files ----------------------------------------------------------------------
    def save(self, folder: PathLike) -> Path:
        """Write the three files into ``folder`` (created if needed); the settings file goes last, so a
        save cut short leaves nothing :meth:`load` accepts as new."""
        from spacy_sapbert.util.atomic import atomic_open, atomic_write_text

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocabulary = sorted(self.vectorizer.vocabulary_, key=self.vectorizer.vocabulary_.__getitem__)
        idf = np.asarray(self.vectorizer.idf_)
        atomic_write_text(folder / VOCABULARY_FILE, json.dumps(vocabulary, ensure_ascii=False))
        with atomic_open(folder / IDF_FILE, "wb") as handle:
            np.save(handle, idf, allow_pickle=False)
        record = {"format_version": FORMAT_VERSION, "kind": "char_ngram_tfidf", **self.settings.to_json(),
                  "norm": "l2", "smooth_idf": True, "names": len(self.names), "names_fingerprint": self.fingerprint,
                  "vocabulary_size": len(vocabulary), "idf_dtype": str(idf.dtype)}
        atomic_write_text(folder / SETTINGS_FILE, json.dumps(record, indent=1) + "\n")
        return folder

    @classmethod
    def load(cls, folder: PathLike, names: Sequence[str]) -> "CharNgramIndex":
        """The index saved in ``folder``, for ``names``: the very list it was fitted on (checked by
        fingerprint; other names are an :class:`InputError` naming the settings file)."""
        from spacy_sapbert.util.jsonfile import read_json_object

        folder = Path(folder)
        for file in FILES:
            if not (folder / file).is_file():
                raise InputError(f"missing {file}: not a saved character n-gram index", folder)
        settings_path = folder / SETTINGS_FILE
        record = read_json_object(settings_path, FORMAT_VERSION, "character n-gram index")
        try:
            low, high = (int(n) for n in record["ngram_range"])
            settings = CharNgramSettings(str(record["analyzer"]), (low, high), bool(record["lowercase"]),
                                         bool(record["sublinear_tf"]))
            expected, size = str(record["names_fingerprint"]), int(record["vocabulary_size"])
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"missing or invalid setting ({err!r})", settings_path) from err
        names = list(names)
        found = names_fingerprint(names)
        if found != expected:
            raise InputError(f"the index was fitted on {record.get('names')} other names (fingerprint {expected}); "
                             f"the {len(names)} names given have fingerprint {found}: refit it on these names",
                             settings_path, field="names_fingerprint")
        vocabulary = _read_vocabulary(folder / VOCABULARY_FILE, size)
        try:
            idf = np.load(folder / IDF_FILE, allow_pickle=False)
        except ValueError as err:
            raise InputError(f"not a plain .npy array ({err})", folder / IDF_FILE) from err
        if idf.shape != (size,) or not np.all(np.isfinite(idf)):
            raise InputError(f"expected {size} finite idf weights, found shape {idf.shape}", folder / IDF_FILE)
        vectorizer = _vectorizer(settings, vocabulary)
        vectorizer.idf_ = idf  # the setter builds the fitted TfidfTransformer behind the vectorizer
        return cls(vectorizer, names, settings)


def _read_vocabulary(path: Path, size: int) -> List[str]:
    try:
        vocabulary = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"invalid JSON ({err})", path) from err
    if (not isinstance(vocabulary, list) or len(vocabulary) != size or len(set(vocabulary)) != size
            or not all(isinstance(term, str) for term in vocabulary)):
        raise InputError(f"expected a list of {size} distinct n-grams", path)
    return vocabulary


__all__ = ["ANALYZERS", "CharNgramIndex", "CharNgramSettings", "FILES", "FORMAT_VERSION", "names_fingerprint"]
