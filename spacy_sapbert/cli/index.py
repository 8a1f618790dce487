"""``sapbert index build``: encode a KB's names once and save the FAISS index, so that ``link``,
the pipe and the demo start in seconds instead of re-encoding every name."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

import typer

from spacy_sapbert.cli.options import DeviceOption, KbOption, ModelOption, PrecisionOption
from spacy_sapbert.default import DEFAULT_MODEL
from spacy_sapbert.encoding.encoder import DEFAULT_BATCH_SIZE
from spacy_sapbert.errors import InputError, exit_on_input_error

PARAM_HELP = ("KEY=INT index parameter, repeatable: hnsw_m, ef_construction, ef_search (hnsw); nlist, nprobe, pq_m, "
              "pq_bits (ivfpq, pq); rerank=N (ivfpq, pq: re-score the top N exactly from float16 vectors kept on disk); "
              "refine_m=N (pq: residual codes of N bytes a name, scores close to exact).")


def index_build(  # a typer signature: one parameter per option, longer than the usual function
    kb: KbOption,  # no default: required
    output: Path = typer.Option(..., "--output", "-o", help="Folder to write the index to."),
    model: ModelOption = DEFAULT_MODEL,
    kind: str = typer.Option("flat", "--kind", help="flat (exact), hnsw, ivfpq or pq (compact)."),
    pooling: Optional[str] = typer.Option(None, "--pooling", help="cls or mean (default: the model folder's)."),
    max_length: Optional[int] = typer.Option(None, "--max-length", help="Tokens per name (default 25)."),
    batch_size: int = typer.Option(DEFAULT_BATCH_SIZE, "--batch-size", help="Names per forward pass."),
    device: DeviceOption = None,
    precision: PrecisionOption = "auto",
    param: List[str] = typer.Option([], "--param", help=PARAM_HELP),
) -> None:
    """Encode every normalised name of a KB once and save a FAISS index with its manifest."""
    from spacy_sapbert.encoding.encoder import Encoder, check_dtype
    from spacy_sapbert.index.name_index import NameIndex, check_save_target
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase

    with exit_on_input_error():
        check_save_target(output)  # before minutes of encoding, not after
        check_dtype(precision, setting="--precision")
        params = parse_params(param)
        knowledge_base = KnowledgeBase.from_jsonl(kb)
        encoder = Encoder(model, pooling=pooling, max_length=max_length, device=device or "auto",
                          batch_size=batch_size, dtype=precision)
        index = NameIndex.build(knowledge_base, encoder, kind=kind, **params)
        index.save(output)
    manifest = index.manifest
    typer.echo(json.dumps({"output": str(output), "kind": kind, "rows": manifest["rows"], "names": manifest["names"],
                           "concepts": manifest["concepts"], **manifest["build"]}))


def parse_params(items: List[str]) -> Dict[str, int]:
    """``--param KEY=INT`` values as a dict; anything else is an :class:`InputError` naming it."""
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise InputError(f"--param takes KEY=INTEGER, got {item!r}", field="param")
        params[key.strip()] = int(value)
    return params
