"""A processed ``Doc`` as the JSON an output line carries: entities, concepts, abbreviations."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

from spacy_sapbert.pipes.abbreviations import abbreviation_pairs
from spacy_sapbert.pipes.linker_spans import parts_extension


def linkers_of(nlp: Language) -> List[Any]:
    """The pipeline's ``sapbert_linker`` components, in pipeline order."""
    from spacy_sapbert.pipes.linker import SapBertLinker

    return [pipe for _, pipe in nlp.pipeline if isinstance(pipe, SapBertLinker)]


def doc_to_record(doc: Doc, linkers: List[Any]) -> Dict[str, Any]:
    """The entities and abbreviations of ``doc`` as JSON-ready dicts."""
    primary = linkers[0] if linkers else None
    spans = list(primary.spans(doc)) if primary is not None else list(doc.ents)
    abbreviations = _abbreviations(doc)
    long_forms = {(a["start"], a["end"]): a["long"] for a in abbreviations}
    entities = [_entity(span, linkers, long_forms) for span in spans]
    return {"entities": entities, "abbreviations": abbreviations}


def _entity(span: Span, linkers: List[Any], long_forms: Dict[Tuple[int, int], str]) -> Dict[str, Any]:
    entity: Dict[str, Any] = {"start": span.start_char, "end": span.end_char, "text": span.text,
                              "label": span.label_, "concept_id": span.kb_id_ or "", "concept_name": "",
                              "score": None}
    for number, linker in enumerate(linkers):
        candidates = [[cid, round(float(score), 4)] for cid, score in span._.get(linker.extension) or []]
        if number == 0:
            entity["kb_ents"] = candidates
            if entity["concept_id"]:
                concept = linker.concept(entity["concept_id"])
                entity["concept_name"] = concept.canonical_name if concept is not None else ""
                entity["score"] = next((s for c, s in candidates if c == entity["concept_id"]), None)
            parts = _parts(span, linker)
            if parts:
                entity["parts"] = parts
        else:
            entity[linker.extension] = candidates
    long_form = long_forms.get((span.start_char, span.end_char))
    if long_form:
        entity["long_form"] = long_form
    return entity


def _parts(span: Span, linker: Any) -> List[Dict[str, Any]]:
    """A coordinated span's parts (``split_composites``): each one's text and best concept, if any passed."""
    out = []
    for text, found in span._.get(parts_extension(linker.extension)) or []:
        concept = linker.concept(found[0][0]) if found else None
        out.append({"text": text, "concept_id": found[0][0] if found else "",
                    "concept_name": concept.canonical_name if concept is not None else "",
                    "score": round(float(found[0][1]), 4) if found else None})
    return out


def _abbreviations(doc: Doc) -> List[Dict[str, Any]]:
    out = [{"short": short.text, "long": long_form, "start": short.start_char, "end": short.end_char}
           for short, long_form in abbreviation_pairs(doc)]
    return sorted(out, key=lambda a: (a["start"], a["end"]))  # the detector's order varies with the hash seed


__all__ = ["doc_to_record", "linkers_of"]
