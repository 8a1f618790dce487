"""spacy-sapbert: biomedical entity linking for spaCy with self-aligned embeddings.

Importing the package is cheap: the heavy parts (torch, FAISS, transformers) are
imported by the modules that need them.
"""
from spacy_sapbert.default import DEFAULT_MODEL, DEFAULT_PIPELINE, load
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.kb.normalize import normalize

__version__ = "0.1.0"
__all__ = ["Concept", "DEFAULT_MODEL", "DEFAULT_PIPELINE", "InputError", "KnowledgeBase", "load", "normalize",
           "__version__"]
