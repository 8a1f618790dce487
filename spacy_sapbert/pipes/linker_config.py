"""How :class:`~spacy_sapbert.linking.settings.LinkerSettings` become the ``sapbert_linker`` pipe's spaCy surface.

Three things spaCy and users touch, each derived from the one settings class so that a new
setting needs no second edit: the factory's signature (spaCy checks a config against it),
``pipe.<setting>`` attributes (reads and checked assignments), and the writable span
extension the pipe writes its candidates to.
"""
from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable, Optional

from spacy.language import Language
from spacy.tokens import Span

from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.settings import DEFAULT_CONFIG, RENAMED_SETTINGS, SETTING_RULES, LinkerSettings
from spacy_sapbert.linking.stages import STAGE_CONFIG

PART_SETTINGS = ("model", "kb", "index")
"""Settings that name where the parts come from; ``pipe.kb``/``pipe.index`` are the loaded parts,
so these are read as ``pipe.settings.kb``."""


class _Setting:
    """``pipe.<setting>``: reads ``pipe.settings``; an assignment goes through ``pipe.configure``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, pipe: Any, owner: Any = None) -> Any:
        return self if pipe is None else getattr(pipe.settings, self.name)

    def __set__(self, pipe: Any, value: Any) -> None:
        pipe.configure(**{self.name: value})


def setting_attributes(cls: type) -> type:
    """Make each setting of :class:`LinkerSettings` but those of :data:`PART_SETTINGS` an attribute of ``cls``."""
    for name in SETTING_RULES:
        if name not in PART_SETTINGS:
            setattr(cls, name, _Setting(name))
    return cls


def ensure_extension(name: str) -> None:
    """Register ``span._.<name>`` (default ``[]``) unless a writable one exists; refuse a getter or method."""
    if not Span.has_extension(name):
        Span.set_extension(name, default=[])
        return
    default, method, getter, setter = Span.get_extension(name)
    if getter is not None and setter is None or method is not None:
        raise InputError(f"Span extension {name!r} exists and is not writable (a getter or method); "
                         "pick another `extension` name", field="extension")


def _is_container(hint: Any) -> bool:
    """``Dict[...]``, ``List[...]`` or either ``Optional``."""
    return any(typing.get_origin(h) in (dict, list) for h in (hint, *typing.get_args(hint)))


def settings_signature(returns: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a factory a signature naming every setting: spaCy checks a config against its
    factory's signature (an unnamed key is an error), and the settings are named once, in
    :class:`LinkerSettings`. Renamed keys of older configs are named too, null when absent, and
    the candidate stages' keys (:data:`~spacy_sapbert.linking.stages.STAGE_CONFIG`).
    A mapping- or list-valued setting (``label_to_types``, ``label_thresholds``, ``head_fallback``, ``skip_newer_mesh``) is annotated ``Any``: spaCy's own
    check of a nested type would refuse ``{"DISEASE": "Disease"}`` with a pydantic message before the setting's rule could name it."""

    def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
        hints = dict(typing.get_type_hints(LinkerSettings))
        hints.update({key: Any for key, hint in hints.items() if _is_container(hint)})
        keyword = inspect.Parameter.KEYWORD_ONLY
        params = [inspect.Parameter("nlp", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Language),
                  inspect.Parameter("name", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
        params += [inspect.Parameter(f.name, keyword, default=DEFAULT_CONFIG[f.name], annotation=hints[f.name])
                   for f in dataclasses.fields(LinkerSettings)]
        params += [inspect.Parameter(old, keyword, default=None, annotation=Optional[hints[new]])
                   for old, (new, _) in RENAMED_SETTINGS.items()]
        params += [inspect.Parameter(key, keyword, default=None, annotation=Optional[Callable])
                   for key in STAGE_CONFIG]  # the candidate stages: registered functions, resolved by spaCy
        factory.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
        factory.__annotations__ = {p.name: p.annotation for p in params}
        return factory

    return decorate


def record_in_config(nlp: Optional[Language], pipe: Any, settings: LinkerSettings) -> None:
    """Write ``settings`` into ``nlp``'s config entry of ``pipe`` (found by identity, so a renamed
    pipe is found too), the one record of a pipe's settings: ``nlp.to_disk`` writes it to
    ``config.cfg`` and ``spacy.load`` builds the pipe from it, so a setting changed on a loaded
    pipe is what comes back. An old key of :data:`RENAMED_SETTINGS` goes back to null (absent): the
    settings hold its value under the new key, and beside it the old one is a contradiction once either
    changes, and a deprecation notice at every load while neither does."""
    if nlp is None:
        return
    name = next((name for name, component in nlp.components if component is pipe), None)
    if name is None:  # built directly, not through nlp.add_pipe / spacy.load
        return
    config = nlp.get_pipe_config(name)
    for key, value in settings.as_config().items():
        if config.get(key, DEFAULT_CONFIG[key]) != value:
            config[key] = value
    for old in RENAMED_SETTINGS:
        if config.get(old) is not None:  # its value is the new key's already (the loop above)
            config[old] = None


__all__ = ["PART_SETTINGS", "ensure_extension", "record_in_config", "setting_attributes", "settings_signature"]
