"""spacy-sapbert: biomedical entity linking for spaCy with self-aligned embeddings.

Importing the package is cheap: the heavy parts (torch, FAISS, transformers) are
imported by the modules that need them.
"""
from .default import DEFAULT_MODEL, DEFAULT_PIPELINE, load
from .errors import InputError
from .kb import Concept, KnowledgeBase
from .normalize import normalize

__version__ = "0.1.0"
__all__ = ["Concept", "DEFAULT_MODEL", "DEFAULT_PIPELINE", "InputError", "KnowledgeBase", "load", "normalize",
           "__version__"]
