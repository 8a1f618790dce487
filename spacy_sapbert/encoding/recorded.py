"""The fingerprint a saved encoder folder records, and when a load may use it instead of hashing.

:attr:`Encoder.fingerprint <spacy_sapbert.encoding.encoder.Encoder.fingerprint>` hashes every weight
as float32 (0.18 s of each load of the embedded default on two CPU cores, a tenth of it). A folder
written by ``Encoder.save`` records that fingerprint in ``sapbert.json`` together with the SHA-256
of the files it was computed from; a load whose files still have those digests, and whose pooling
and length are the recorded ones, takes the recorded fingerprint (hashing the files' bytes costs
about 46 ms). Any other folder, or one edited since, is hashed as before.
"""
from __future__ import annotations

import hashlib
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


def recorded_fingerprint(folder: Any, recorded: Mapping[str, Any], current: Mapping[str, Any]) -> Optional[str]:
    """The fingerprint ``recorded`` (a folder's ``sapbert.json``) states, if it holds for this load:
    the same pooling and max length (``current``), and the files unchanged since it was written."""
    fingerprint, digests = recorded.get("fingerprint"), recorded.get(DIGESTS_KEY)
    if not isinstance(folder, Path) or not isinstance(fingerprint, str) or not isinstance(digests, dict):
        return None
    if any(recorded.get(key) != value for key, value in current.items()):
        return None
    if not any(name.endswith(WEIGHTS_SUFFIXES) for name in digests):
        return None
    return fingerprint if file_digests(folder) == digests else None


__all__ = ["DIGESTS_KEY", "NOT_RECORDED", "file_digests", "recorded_fingerprint"]
