"""Small hand-written knowledge bases for the encoder/index/linker/component tests."""
from __future__ import annotations

from pathlib import Path

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

CONCEPTS = [
    Concept("D006886", "Hydroxychloroquine", ["Plaquenil", "HCQ", "hydroxychloroquine sulfate"], ["Chemical"]),
    Concept("D002738", "Chloroquine", ["Aralen", "chloroquine phosphate"], ["Chemical"]),
    Concept("D009203", "Myocardial Infarction", ["heart attack", "heart attacks", "cardiac infarction"], ["Disease"]),
    Concept("D001943|OMIM:114480", "Breast Neoplasms", ["breast cancer", "breast tumor"], ["Disease"]),
    Concept("D003924", "Diabetes Mellitus, Type 2", ["type 2 diabetes", "NIDDM"], ["Disease"]),
    Concept("D051437", "Renal Insufficiency", ["kidney failure", "renal failure"], ["Disease"]),
    Concept("D007674", "Kidney Diseases", ["renal disease", "kidney disease"], ["Disease"]),
    # "ms" is a name of two concepts: a search must return both.
    Concept("D009103", "Multiple Sclerosis", ["MS"], ["Disease"]),
    Concept("D009081", "Mitral Valve Stenosis", ["MS", "mitral stenosis"], ["Disease"]),
]


def small_kb(name: str = "small") -> KnowledgeBase:
    return KnowledgeBase(CONCEPTS, name=name)


def write_small_kb(folder: Path, name: str = "small.jsonl") -> Path:
    return small_kb(Path(name).name.split(".")[0]).to_jsonl(folder / name)
