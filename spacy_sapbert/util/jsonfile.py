"""Reading the small versioned JSON files an artefact carries (an index manifest, a pipe's cfg.json)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Union

from spacy_sapbert.errors import InputError


def read_json_object(path: Union[str, Path], format_version: Optional[int] = None, what: str = "") -> Dict[str, Any]:
    """The JSON object in ``path``; an :class:`InputError` naming the file for invalid JSON, a
    value that is not an object, or (with ``format_version``) a format this version cannot read."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"invalid JSON ({err})", path) from err
    found = data.get("format_version") if isinstance(data, dict) else None
    if not isinstance(data, dict) or (format_version is not None and found != format_version):
        kind = f"{what} format" if what else "format"
        raise InputError(f"unsupported {kind} {found!r} (this version reads {format_version})", path,
                         field="format_version")
    return data


__all__ = ["read_json_object"]
