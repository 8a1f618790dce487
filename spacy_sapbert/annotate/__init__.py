"""Batch annotation of documents (``sapbert annotate``): readers, resumable output, the run."""
from spacy_sapbert.annotate.output import ResumableJsonl
from spacy_sapbert.annotate.readers import FORMATS, Malformed, Record, read_records
from spacy_sapbert.annotate.record import doc_to_record
from spacy_sapbert.annotate.runner import Summary, annotate, preflight
from spacy_sapbert.annotate.sniff import detect_format

__all__ = ["FORMATS", "Malformed", "Record", "ResumableJsonl", "Summary", "annotate", "detect_format",
           "doc_to_record", "preflight", "read_records"]
