"""The fingerprint a saved encoder folder records, and when a load may use it instead of hashing.

:attr:`Encoder.fingerprint <spacy_sapbert.encoding.encoder.Encoder.fingerprint>` hashes every weight
as float32 (0.18 s of each load of the embedded default on two CPU cores, a tenth of it). A folder
written by ``Encoder.save`` records that fingerprint in ``sapbert.json`` together with the SHA-256
of the files it was computed from; a load whose files still have those digests, and whose pooling
and length are the recorded ones, takes the recorded fingerprint (hashing the files' bytes costs
about 46 ms, which :class:`PendingDigests` spends on a second thread while the weights load: ``hashlib``
and the weights' reading and casting release the GIL). Any other folder, or one edited since, is hashed as
before.
"""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

NOT_RECORDED = frozenset({"sapbert.json", "modules.json", "sentence_bert_config.json", "README.md"})
"""Top-level files that do not decide the weights or the vocabulary (the record itself, the
sentence-transformers module files, a card); every other file of the folder is recorded."""
WEIGHTS_SUFFIXES = (".safetensors", ".bin")
DIGESTS_KEY = "sha256"


def file_digests(folder: Path) -> Dict[str, str]:
    """SHA-256 of every top-level file of ``folder`` but :data:`NOT_RECORDED`: the weights (also
    when sharded), config, tokenizer files and whatever else a loader may read."""
    digests = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name not in NOT_RECORDED:
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
            digests[path.name] = digest.hexdigest()
    return digests


class PendingDigests:
    """:func:`file_digests` of a folder, computed on a thread of its own from the moment this is made;
    :meth:`result` waits for it (and raises what it raised)."""

    def __init__(self, folder: Path) -> None:
        self._digests: Optional[Dict[str, str]] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(folder,), name="sapbert-file-digests", daemon=True)
        self._thread.start()

    def _run(self, folder: Path) -> None:
        try:
            self._digests = file_digests(folder)
        except BaseException as err:  # handed to the caller by result()
            self._error = err

    def wait(self) -> None:
        """Let the thread finish (nothing of ours runs on after a load, nor into a fork), its result unused."""
        self._thread.join()

    def result(self) -> Dict[str, str]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._digests is not None
        return self._digests


def worth_hashing(folder: Any, recorded: Mapping[str, Any], asked: Optional[Mapping[str, Any]] = None) -> bool:
    """Whether the folder's record could hold (a fingerprint and the digests of weights; the settings ``asked``
    for, where not None, the recorded ones): its files are hashed."""
    digests = recorded.get(DIGESTS_KEY)
    if any(value is not None and recorded.get(key) != value for key, value in (asked or {}).items()):
        return False
    return isinstance(folder, Path) and isinstance(recorded.get("fingerprint"), str) and isinstance(digests, dict) \
        and any(name.endswith(WEIGHTS_SUFFIXES) for name in digests)


def recorded_fingerprint(folder: Any, recorded: Mapping[str, Any], current: Mapping[str, Any],
                         pending: Optional[PendingDigests] = None) -> Optional[str]:
    """The fingerprint ``recorded`` (a folder's ``sapbert.json``) states, if it holds for this load:
    the same pooling and max length (``current``), and the files unchanged since it was written
    (their digests from ``pending`` when the caller started them early)."""
    if not worth_hashing(folder, recorded) or any(recorded.get(key) != value for key, value in current.items()):
        if pending is not None:
            pending.wait()
        return None
    digests = pending.result() if pending is not None else file_digests(folder)
    return str(recorded["fingerprint"]) if digests == recorded[DIGESTS_KEY] else None


__all__ = ["DIGESTS_KEY", "NOT_RECORDED", "PendingDigests", "file_digests", "recorded_fingerprint", "worth_hashing"]
