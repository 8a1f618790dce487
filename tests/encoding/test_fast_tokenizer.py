"""FastTokenizer: folders with the same tokenizer.json share one tokenizers.Tokenizer, whose settings no call
changes, and its truncation gives what the tokenizers library's own truncation gives."""
from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from spacy_sapbert.encoding.fast_tokenizer import TOKENIZER_FILE, FastTokenizer

TEXTS = ["myocardial infarction", "", " ", "a" * 300, "non-steroidal anti-inflammatory drug induced gastropathy",
         "5-fluorouracil", "the quick brown fox jumps over the lazy dog " * 10]


def _reference(folder: Path, max_length, add_special_tokens: bool):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    tokenizer.no_padding()
    if max_length is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_length=max_length)
    return [e.ids for e in tokenizer.encode_batch(TEXTS, add_special_tokens=add_special_tokens)]


@pytest.mark.parametrize("max_length", [None, 1, 2, 3, 8, 25, 512])
@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_truncation_is_the_tokenizers_librarys(minilm_path: Path, max_length, add_special_tokens: bool) -> None:
    fast = FastTokenizer(minilm_path, None)
    got = fast(TEXTS, max_length=max_length, add_special_tokens=add_special_tokens)["input_ids"]
    assert got == _reference(minilm_path, max_length, add_special_tokens)
    assert fast(TEXTS, truncation=False, max_length=3)["input_ids"] == _reference(minilm_path, None, True)


def test_folders_with_the_same_file_share_one_tokenizer_whose_settings_calls_leave_alone(minilm_path: Path,
                                                                                          tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copyfile(minilm_path / TOKENIZER_FILE, copy / TOKENIZER_FILE)
    linker, ner = FastTokenizer(minilm_path, None), FastTokenizer(copy, None)
    assert linker._tokenizer is ner._tokenizer
    full = [ner.word_pieces(text.split()) for text in TEXTS]
    results = {}

    def run(name: str, call) -> None:
        results[name] = [call() for _ in range(50)]

    threads = [threading.Thread(target=run, args=("short", lambda: linker(TEXTS, max_length=4)["input_ids"])),
               threading.Thread(target=run, args=("words", lambda: [ner.word_pieces(t.split()) for t in TEXTS]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r == _reference(minilm_path, 4, True) for r in results["short"])
    assert all(r == full for r in results["words"])  # never cut by the other's truncation
    assert linker._tokenizer.truncation is None and linker._tokenizer.padding is None


def test_another_file_is_another_tokenizer_and_an_unused_one_is_freed(minilm_path: Path, tiny_bert: Path,
                                                                       tmp_path: Path) -> None:
    import gc
    import weakref

    first = FastTokenizer(minilm_path, None)
    # bytes no other test's tokenizer has (one that holds tiny_bert's would keep that one alive)
    (tmp_path / TOKENIZER_FILE).write_bytes((tiny_bert / TOKENIZER_FILE).read_bytes() + b"\n")
    other = FastTokenizer(tmp_path, None)
    assert first._tokenizer is not other._tokenizer
    holder = weakref.ref(other._shared)
    del other
    gc.collect()
    assert holder() is None
