"""The settings of a ``sapbert_linker`` pipe and its :class:`~spacy_sapbert.linking.linker.Linker`, in one place.

:class:`LinkerSettings` is the only place a setting is named, given its default and told
what it accepts: the factory's ``default_config`` and signature are derived from it, the
pipe and its linker read the same instance, and a change (``pipe.threshold = 0.7``) makes a
new, checked instance (:meth:`LinkerSettings.replace`), so no two copies can disagree.

A value is checked for its form only (no file is opened, no model loaded), when the pipe is
added, so that ``k = "25"`` is reported as ``sapbert_linker setting 'k': expected an integer
≥ 1, got '25' (str)`` rather than as a TypeError (or a silently wrong link) on the first
document. Paths and GPUs are checked when they are loaded.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from spacy_sapbert.default import DEFAULT_MODEL, LINKER_PIPE
from spacy_sapbert.encoding.encoder import BACKENDS, DEFAULT_BATCH_SIZE, DTYPE_CHOICES, POOLINGS, check_dtype
from spacy_sapbert.errors import InputError
from spacy_sapbert.index.kinds import INDEX_KINDS

logger = logging.getLogger(__name__)

DEFAULT_OWNER = LINKER_PIPE
DEFAULT_K = 25
DEFAULT_MAX_ENTITIES = 5
DEFAULT_CACHE_SIZE = 10_000
DEFAULT_LABEL_TO_TYPES: Dict[str, List[str]] = {"DISEASE": ["Disease", "Phenotype"], "CHEMICAL": ["Chemical"]}
"""Span label → KB types it may link to. DISEASE takes Phenotype too: the corpora's DISEASE
spans include signs and symptoms ("hypotension", "seizures"), which open-biomed files under
HPO's Phenotype type; a KB without that type (mesh-medic) just filters on Disease."""

RENAMED_SETTINGS: Dict[str, Tuple[str, str]] = {
    # old config key: (its setting now, why it was renamed)
    "batch_size": ("encode_batch_size", "it counts names per encoder forward pass, while nlp.pipe(batch_size=…) "
                                        "counts documents"),
}
"""Config keys of pipelines saved by earlier versions, still read (with a deprecation log line)."""


class SettingError(InputError):
    """A setting with a value it cannot take, reported as
    ``<pipe> setting 'k': expected an integer ≥ 1, got '25' (str)``."""

    def __init__(self, pipe_name: str, setting: str, expected: str, value: Any) -> None:
        problem = f"expected {expected}, got {value!r} ({type(value).__name__})"
        super().__init__(problem, field=setting)
        self.pipe_name = pipe_name
        self.args = (f"{pipe_name} setting {setting!r}: {problem}",)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _is_dtype(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        check_dtype(value, setting="precision")
    except InputError:
        return False
    return True


def _is_gap(value: Any) -> bool:
    # a difference of two cosines: at most 2
    return value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value <= 2)


def _is_threshold(value: Any) -> bool:
    # Scores are cosine similarities of unit vectors, so a threshold outside [-1, 1] keeps
    # everything or nothing: almost certainly a typo (1.5 for 0.15, a percentage).
    return value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool) and -1 <= value <= 1)


def _is_label_to_types(value: Any) -> bool:
    # A string for a list ({"DISEASE": "Disease"}) is the likely slip: refused, not read as letters.
    if value is None:
        return True
    if not isinstance(value, Mapping):
        return False
    return all(_is_text(label) and isinstance(types, (list, tuple)) and types and all(_is_text(t) for t in types)
               for label, types in value.items())


def _is_label_thresholds(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping) and all(
        _is_text(label) and threshold is not None and _is_threshold(threshold) for label, threshold in value.items()))


def _is_name_list(value: Any) -> bool:
    return value is None or (isinstance(value, (list, tuple)) and all(_is_text(label) for label in value))


def _copy_label_to_types(value: Any) -> Any:
    """A private copy (lists of strings), so that changing the dict given changes no settings."""
    return None if value is None else {label: list(types) for label, types in value.items()}


_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?", re.IGNORECASE)


def _setting(default: Any, expected: str, allowed: Callable[[Any], bool], live: bool = False) -> Any:
    """A settings field with its rule: ``expected`` says in words what ``allowed`` tests (the
    error message uses it). ``live`` settings may change on a loaded pipe; the others are used
    when the encoder, KB and index are loaded, and a change after that would be ignored.
    A dict default is copied for each instance (dataclasses refuse a shared mutable default)."""
    metadata = {"expected": expected, "allowed": allowed, "live": live}
    if isinstance(default, dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class LinkerSettings:
    """Every setting of the ``sapbert_linker`` factory (docs/pipe.md, "Settings", says what each does)."""

    model: str = _setting(DEFAULT_MODEL, "a model folder or name (a non-empty string)", _is_text)
    kb: Optional[str] = _setting(None, "null or a knowledge base file (a non-empty string)",
                                 lambda v: v is None or _is_text(v))
    index: Optional[str] = _setting(None, "null or an index folder (a non-empty string)",
                                    lambda v: v is None or _is_text(v))
    k: int = _setting(DEFAULT_K, "an integer ≥ 1", lambda v: _is_int(v) and v >= 1, live=True)
    threshold: Optional[float] = _setting(
        None, "null (no threshold) or a number from -1 to 1 (scores are cosine similarities, in [-1, 1], or "
              "probabilities where the pipe is calibrated or has a re-ranker)",
        _is_threshold, live=True)
    max_entities_per_mention: int = _setting(DEFAULT_MAX_ENTITIES, "an integer ≥ 1",
                                             lambda v: _is_int(v) and v >= 1, live=True)
    resolve_abbreviations: bool = _setting(True, "true or false", lambda v: isinstance(v, bool), live=True)
    spans_key: Optional[str] = _setting(None, "null (link doc.ents) or a span group name (a non-empty string)",
                                        lambda v: v is None or _is_text(v), live=True)
    extension: str = _setting("kb_ents", "a Python identifier (the X of span._.X)",
                              lambda v: isinstance(v, str) and v.isidentifier(), live=True)
    set_kb_id: bool = _setting(True, "true or false", lambda v: isinstance(v, bool), live=True)
    split_composites: bool = _setting(False, "true or false", lambda v: isinstance(v, bool), live=True)
    encode_batch_size: int = _setting(DEFAULT_BATCH_SIZE, "an integer ≥ 1", lambda v: _is_int(v) and v >= 1)
    device: str = _setting("auto", "one of auto, cpu, cuda, cuda:N, mps",
                           lambda v: isinstance(v, str) and bool(_DEVICE.fullmatch(v)))
    precision: str = _setting("auto", f"one of {DTYPE_CHOICES}", _is_dtype)
    backend: str = _setting("auto", f"one of {', '.join(BACKENDS)}",
                            lambda v: isinstance(v, str) and v.lower() in BACKENDS)
    index_kind: str = _setting("flat", f"one of {', '.join(INDEX_KINDS)}", lambda v: v in INDEX_KINDS)
    pooling: Optional[str] = _setting(None, f"null (the model folder's setting) or one of {', '.join(POOLINGS)}",
                                      lambda v: v is None or (isinstance(v, str) and v.lower() in POOLINGS))
    max_length: Optional[int] = _setting(
        None, "null (the model folder's setting) or an integer ≥ 3 (tokens per mention, at most the model's "
              "position limit)", lambda v: v is None or (_is_int(v) and v >= 3))
    cache_size: int = _setting(DEFAULT_CACHE_SIZE, "an integer ≥ 0 (0 turns the cache off)",
                               lambda v: _is_int(v) and v >= 0, live=True)
    rerank: Optional[str] = _setting(None, "null (no re-ranking) or a context re-ranker folder (a non-empty string)",
                                     lambda v: v is None or _is_text(v))
    annotated_names: Optional[str] = _setting(
        None, "null (none) or an annotated-names file (a non-empty string; `sapbert annotated-names` writes one)",
        lambda v: v is None or _is_text(v))
    exact_names: Optional[str] = _setting(
        None, "null (none) or an exact-names table (a non-empty string; `sapbert kb exact-names` writes one)",
        lambda v: v is None or _is_text(v))
    rerank_max_gap: Optional[float] = _setting(
        None, "null (re-rank every span with two or more candidates) or a number from 0 to 2 (re-rank a span only "
              "when its best two first-stage cosines are closer than this)", _is_gap, live=True)
    rescore_gap: Optional[float] = _setting(
        None, "null (scores as the index gives them) or a number from 0 to 2 (in a compressed index, the names of "
              "candidates scoring within this much of a span's best are encoded and scored exactly)", _is_gap, live=True)
    label_to_types: Optional[Dict[str, List[str]]] = _setting(
        DEFAULT_LABEL_TO_TYPES, "null (no type filtering) or a mapping of span label → non-empty list of KB types "
                                "(e.g. {\"DISEASE\": [\"Disease\"]})", _is_label_to_types, live=True)
    label_thresholds: Optional[Dict[str, float]] = _setting(
        None, "null or a mapping of span label → threshold (a number from -1 to 1) that replaces `threshold` for "
              "that label's spans (e.g. {\"CHEMICAL\": 0.9})", _is_label_thresholds, live=True)
    head_fallback: Optional[List[str]] = _setting(
        None, "null or a list of span labels (non-empty strings) whose spans without a concept are linked again "
              "without their first word (e.g. [\"DISEASE\"])", _is_name_list, live=True)
    skip_newer_mesh: Optional[List[str]] = _setting(
        None, "null or a list of KB types (non-empty strings) whose MeSH records with ten-character UIs, newer than "
              "the corpora's MeSH, the dense search skips (e.g. [\"Disease\"])", _is_name_list, live=True)

    def __post_init__(self) -> None:
        # Also when built directly (LinkerSettings(k=0)): an instance is always valid.
        for setting in dataclasses.fields(self):
            check_setting(setting.name, getattr(self, setting.name))
        object.__setattr__(self, "label_to_types", _copy_label_to_types(self.label_to_types))
        if self.label_thresholds is not None:  # a private copy, as label_to_types
            object.__setattr__(self, "label_thresholds", {k: float(v) for k, v in self.label_thresholds.items()})
        for listed in ("head_fallback", "skip_newer_mesh"):  # private copies, as label_to_types
            if getattr(self, listed) is not None:
                object.__setattr__(self, listed, list(getattr(self, listed)))

    @classmethod
    def from_config(cls, values: Mapping[str, Any], owner: str = DEFAULT_OWNER) -> "LinkerSettings":
        """Settings from a factory config (or keyword arguments): unset ones keep their default,
        keys of :data:`RENAMED_SETTINGS` are read under their new name."""
        return cls().replace(owner, **_renamed(values, owner))

    def replace(self, owner: str = DEFAULT_OWNER, **changes: Any) -> "LinkerSettings":
        """A copy with ``changes``, each checked first so that an error names ``owner`` (the pipe)."""
        unknown = sorted(set(changes) - set(SETTING_RULES))
        if unknown:
            raise InputError(f"{owner}: unknown setting(s) {unknown}; the settings are {list(SETTING_RULES)}")
        for setting, value in changes.items():
            check_setting(setting, value, owner)
        return dataclasses.replace(self, **changes)

    def as_config(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


SETTING_RULES: Dict[str, Tuple[str, Callable[[Any], bool]]] = {
    setting.name: (setting.metadata["expected"], setting.metadata["allowed"])
    for setting in dataclasses.fields(LinkerSettings)
}
"""Every setting and what it accepts (in the words of the error message; the test): read off :class:`LinkerSettings`."""

LIVE_SETTINGS = frozenset(s.name for s in dataclasses.fields(LinkerSettings) if s.metadata["live"])
"""Settings a loaded pipe follows when they change; the rest are read when the linker is loaded."""

DEFAULT_CONFIG: Dict[str, Any] = {
    s.name: s.default_factory() if s.default is dataclasses.MISSING else s.default  # type: ignore[misc]
    for s in dataclasses.fields(LinkerSettings)}
"""Every setting's default (as ``LinkerSettings().as_config()``)."""

FACTORY_DEFAULT_CONFIG: Dict[str, Any] = {key: value for key, value in DEFAULT_CONFIG.items()
                                          if not isinstance(value, dict)}
"""The factory's ``default_config``: every setting but the dict-valued ones (``label_to_types``).
spaCy merges a config *into* the defaults, section by section, so a dict default would come
back in every user's and every saved pipeline's mapping (``{"DIS": [...]}`` would still filter
DISEASE and CHEMICAL); left out here, spaCy fills it from the factory's signature instead,
only where the config has no such key."""


def check_setting(setting: str, value: Any, pipe_name: str = DEFAULT_OWNER) -> None:
    """Raise :class:`SettingError` unless ``value`` is allowed for ``setting``."""
    expected, allowed = SETTING_RULES[setting]
    if not allowed(value):
        raise SettingError(pipe_name, setting, expected, value)


def check_settings(settings: Mapping[str, Any], pipe_name: str = DEFAULT_OWNER) -> None:
    """Check every setting in ``settings`` (see :data:`SETTING_RULES`); the first bad one raises."""
    for setting, value in settings.items():
        check_setting(setting, value, pipe_name)


def _renamed(values: Mapping[str, Any], owner: str) -> Dict[str, Any]:
    """``values`` with old keys under their new names. An old key set to null is the factory's
    placeholder (the config did not have it); one set along with its new name to another value
    is an error, since either could be the one meant."""
    values = dict(values)
    for old, (new, why) in RENAMED_SETTINGS.items():
        value = values.pop(old, None)
        if value is None:
            continue
        expected, allowed = SETTING_RULES[new]
        if not allowed(value):
            raise SettingError(owner, old, expected, value)
        default = DEFAULT_CONFIG[new]
        if values.get(new, default) not in (default, value):
            raise SettingError(owner, old, f"null (it is the old name of {new!r}, which is set to "
                                            f"{values[new]!r}: keep {new!r} only)", value)
        # Loud only where it matters: with the default value the old key changes nothing.
        logger.log(logging.INFO if value == default else logging.WARNING,
                   "%s: config key %r is deprecated and read as %r (%s); rename it in the config", owner, old, new,
                   why)
        values[new] = value
    return values


__all__ = ["LinkerSettings", "SettingError", "SETTING_RULES", "LIVE_SETTINGS", "DEFAULT_CONFIG",
           "FACTORY_DEFAULT_CONFIG", "RENAMED_SETTINGS", "check_setting", "check_settings", "DEFAULT_LABEL_TO_TYPES", "DEFAULT_K",
           "DEFAULT_MAX_ENTITIES", "DEFAULT_CACHE_SIZE"]
