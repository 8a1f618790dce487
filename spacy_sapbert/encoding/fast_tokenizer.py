"""The tokenizer of the native BERT path (:func:`spacy_sapbert.encoding.bert.load`): a Hugging Face
fast tokenizer's ``tokenizer.json`` run by the ``tokenizers`` library alone, with the subset of the
``transformers`` tokenizer interface that the encoder and the NER tagger call.

Apart from :mod:`spacy_sapbert.encoding.bert` (the model) because it needs neither ``torch`` nor the
weights: it is the text side of a model folder, read from a file of its own.

Folders with the same ``tokenizer.json`` share one ``tokenizers.Tokenizer`` (the embedded default's NER and
linker encoder ship the same file: 7.6 MB each when read twice). Its settings never change after it is read
(no truncation, no padding): a call truncates its own encodings, so no user of the shared tokenizer sees
another's settings, in any thread.
"""
from __future__ import annotations

import hashlib
import threading
import weakref
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

TOKENIZER_FILE = "tokenizer.json"


class _Shared:
    """A ``tokenizers.Tokenizer`` read from a file (a weakly referenced holder: the Rust object is not)."""

    __slots__ = ("tokenizer", "__weakref__")

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer


_SHARED: "weakref.WeakValueDictionary[str, _Shared]" = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def _shared_tokenizer(path: Path) -> _Shared:
    """The tokenizer of ``tokenizer.json`` file ``path``: the one already read from a file of the same bytes
    while something still holds it, else read now (no truncation, no padding: settings it keeps)."""
    from tokenizers import Tokenizer

    text = path.read_bytes()
    digest = hashlib.sha256(text).hexdigest()
    with _SHARED_LOCK:
        shared = _SHARED.get(digest)
        if shared is None:
            tokenizer = Tokenizer.from_str(text.decode("utf-8"))
            tokenizer.no_padding()
            tokenizer.no_truncation()
            shared = _SHARED[digest] = _Shared(tokenizer)
    return shared


class FastTokenizer:
    """The subset of a Hugging Face fast tokenizer the encoder uses, on ``tokenizers`` alone."""

    def __init__(self, folder: Path, pad_token_id: Optional[int]) -> None:
        self.folder = folder
        self._shared = _shared_tokenizer(folder / TOKENIZER_FILE)
        self._tokenizer = self._shared.tokenizer
        self.pad_token_id = pad_token_id if pad_token_id is not None else self._token_id(("[PAD]", "<pad>"))

    def _token_id(self, candidates: Sequence[str]) -> Optional[int]:
        for token in candidates:
            found = self._tokenizer.token_to_id(token)
            if found is not None:
                return int(found)
        return None

    def get_vocab(self) -> Dict[str, int]:
        return self._tokenizer.get_vocab(with_added_tokens=True)

    def __call__(self, texts: List[str], truncation: bool = True, max_length: Optional[int] = None,
                 add_special_tokens: bool = True) -> Dict[str, List[List[int]]]:
        """``input_ids`` per text, at most ``max_length`` of them with ``truncation``: as ``tokenizers`` truncates
        (the text's pieces cut to leave room for the special tokens, which are then added), done here on each
        encoding so that the shared tokenizer's settings stay as they are."""
        limit = max_length if truncation else None
        ids = [e.ids for e in self._tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)]
        room = None if limit is None else \
            int(limit) - (self._tokenizer.num_special_tokens_to_add(False) if add_special_tokens else 0)
        if room is None or room < 0:  # a limit below the special tokens' count: none, as tokenizers does
            return {"input_ids": ids}
        long = [i for i, found in enumerate(ids) if len(found) > limit]  # few: mentions are short
        for i, encoding in zip(long, self._tokenizer.encode_batch([texts[i] for i in long], add_special_tokens=False)):
            encoding.truncate(room)
            ids[i] = self._tokenizer.post_process(encoding).ids if add_special_tokens else encoding.ids
        return {"input_ids": ids}

    def word_pieces(self, words: Sequence[str]) -> List[List[int]]:
        """Word-piece ids of each word on its own (no special tokens, never truncated): what a token
        tagger needs to score a pre-tokenised text word by word. Each distinct word is encoded once
        and its list is shared by its occurrences (read them, do not change them): abstracts repeat
        most of their words, so the tagger passes a whole batch of documents in one call (NCBI test's
        24,296 tokens are 3,616 distinct words; 0.02-0.03 s instead of 0.10-0.11 s document by document)."""
        distinct = list(dict.fromkeys(words))
        encoded = self._tokenizer.encode_batch(distinct, add_special_tokens=False)
        pieces = {word: e.ids for word, e in zip(distinct, encoded)}
        return [pieces[word] for word in words]

    def special_ids(self) -> Tuple[int, int]:
        """(start, end) token ids around one sequence, as the tokenizer's own post-processor adds them
        ([CLS]/[SEP] for BERT; <s>/</s> for MPNet, whose vocabulary also lists an unused [CLS])."""
        added = self._tokenizer.encode("", add_special_tokens=True).ids
        if len(added) == 2:
            return int(added[0]), int(added[1])
        start, end = self._token_id(("[CLS]", "<s>")), self._token_id(("[SEP]", "</s>"))
        if start is None or end is None:
            raise ValueError(f"{self.folder / TOKENIZER_FILE}: no [CLS]/[SEP] (or <s>/</s>) token")
        return start, end


__all__ = ["TOKENIZER_FILE", "FastTokenizer"]
