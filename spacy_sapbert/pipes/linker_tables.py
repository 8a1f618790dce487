"""The ``sapbert_linker`` pipe's last-stage tables: what annotators linked wordings to, and exact names the KB lacks.

Both are loaded on first use from the saved pipe or the setting that names them (``annotated_names``,
``exact_names``), saved with the pipe, and switched off by assigning None. Kept apart from the pipe's class
(:mod:`.linker`), which inherits them, so that the pipe's module stays about processing and files.
"""
from __future__ import annotations

from typing import Any, Optional

from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.linking.annotated_names import AnnotatedNames
from spacy_sapbert.linking.exact_names import ExactNames
from spacy_sapbert.pipes.linker_parts import configured_annotated_names, configured_exact_names


class LastStageTables:
    """Mixed into :class:`~spacy_sapbert.pipes.linker.SapBertLinker`, which sets ``_annotated`` and ``_exact`` (None:
    not loaded yet; False: switched off) and has ``settings`` and ``linker``."""

    _annotated: Any
    _exact: Any
    settings: Any
    linker: Any

    @property
    def annotated_table(self) -> Optional[AnnotatedNames]:
        """The last stage (:mod:`spacy_sapbert.linking.annotated_names`): the saved pipe's table or the
        ``annotated_names`` setting's, or None; assigning None links without one."""
        if self._annotated is None and self.settings.annotated_names is not None:
            self._annotated = configured_annotated_names(self.settings, self.linker.kb)
        return self._annotated or None

    @annotated_table.setter
    def annotated_table(self, table: Optional[AnnotatedNames]) -> None:
        self._annotated = table.for_kb(self.linker.kb) if table is not None else False

    @property
    def exact_table(self) -> Optional[ExactNames]:
        """The last stage (:mod:`spacy_sapbert.linking.exact_names`): names of concepts the KB lacks, matched exactly
        by a span with no concept; the saved pipe's table or the ``exact_names`` setting's, or None."""
        if self._exact is None and self.settings.exact_names is not None:
            self._exact = configured_exact_names(self.settings)
        return self._exact or None

    @exact_table.setter
    def exact_table(self, table: Optional[ExactNames]) -> None:
        self._exact = table if table is not None else False

    def concept(self, concept_id: str) -> Optional[Concept]:
        """The concept a span was given: the KB's, or the exact-names table's (which the KB lacks)."""
        found = self.linker.kb.get(concept_id)
        return found if found is not None or self.exact_table is None else self.exact_table.concept(concept_id)


__all__ = ["LastStageTables"]
