"""Batch annotation of documents (``sapbert annotate``): readers, resumable output, the run."""
from .output import ResumableJsonl
from .readers import FORMATS, Malformed, Record, read_records
from .record import doc_to_record
from .runner import Summary, annotate, preflight
from .sniff import detect_format

__all__ = ["FORMATS", "Malformed", "Record", "ResumableJsonl", "Summary", "annotate", "detect_format",
           "doc_to_record", "preflight", "read_records"]
