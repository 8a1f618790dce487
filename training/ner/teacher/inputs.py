"""The teacher's inputs: the NER corpus cut into windows of the teacher's word pieces, in one file.

A larger teacher (all-mpnet-base-v2, 110M parameters) trains in minutes on a GPU and for hours on
two CPU cores; the machine with the GPU may have no spaCy and no KB files. So the spaCy side is
done here, once: every document of the corpus folder is tokenised as the pipeline tokenises it,
given its gazetteer features (the student's, so both read the same KB states) and cut into windows
of the teacher's tokenizer (:mod:`spacy_sapbert.ner.windows`, as the student cuts its own). What
travels is one safetensors file of integer arrays that :mod:`.fit` reads with torch alone.

Each part of the file has a *role*: ``train`` (gold tags teach the teacher; the teacher labels it
too), ``unlabelled`` (text the teacher only labels: the extra corpora, whose own guidelines differ
from BC5CDR's) and ``dev`` (the teacher labels it and its strict span F1 is logged). A part that
``parts.json`` lists as annotating only some labels keeps its gold with partial labels
(:func:`~..tagger.data.doc_gold`) and its ``open_tags`` in the file's part list, so a student
can also learn an extra corpus's own annotation (``distil --gold-part``).
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union

import numpy as np
import spacy

from spacy_sapbert.encoding.fast_tokenizer import FastTokenizer
from spacy_sapbert.errors import InputError
from spacy_sapbert.ner.tagging import Tagging

from spacy_sapbert.linking.settings import DEFAULT_LABEL_TO_TYPES
from ..corpus import PARTS_FILE, read_parts
from ..tagger.data import build_gazetteer, doc_gold, open_tags, read_docbin, scheme_for
from ..tagger.output import TOKENIZER_CONFIG

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]
FORMAT = "1"
ROLES = ("train", "unlabelled", "dev")


def part_arrays(docs, tagging: Tagging, opened: Sequence[int] = ()) -> Dict[str, np.ndarray]:
    """Flat arrays of one part: per-token gold and doc offsets; per-window pieces, features, scored
    positions and the part-wide index of each scored token. The windows are ``tagging``'s (the
    student's cutting, in the teacher's word pieces); ``opened``: the part's open tags (partial labels)."""
    scheme = tagging.scheme
    gold: List[int] = []
    doc_offsets = [0]
    ids: List[int] = []
    feats: List[int] = []
    win_offsets = [0]
    positions: List[int] = []
    tokens: List[int] = []
    pos_offsets = [0]
    for doc in docs:
        base = doc_offsets[-1]
        gold.extend(doc_gold(doc, scheme, opened))
        doc_offsets.append(base + len(doc))
        for window in tagging.windows(doc):
            ids.extend(window.input_ids)
            feats.extend(window.features)
            win_offsets.append(len(ids))
            positions.extend(window.positions)
            tokens.extend(base + i for i in window.tokens)
            pos_offsets.append(len(positions))
    # the smallest integer types that hold the values: the file travels to the GPU machine
    return {"gold": np.asarray(gold, dtype=np.int8), "doc_offsets": np.asarray(doc_offsets, dtype=np.int64),
            "ids": np.asarray(ids, dtype=np.int16 if max(ids, default=0) < 2 ** 15 else np.int32),
            "features": np.asarray(feats, dtype=np.int8 if max(feats, default=0) < 2 ** 7 else np.int16),
            "win_offsets": np.asarray(win_offsets, dtype=np.int64), "positions": np.asarray(positions, dtype=np.int16),
            "tokens": np.asarray(tokens, dtype=np.int32), "pos_offsets": np.asarray(pos_offsets, dtype=np.int64)}


def parse_part(spec: str) -> Tuple[str, str, str]:
    """``ROLE:NAME=FILE`` (FILE relative to the corpus folder) → (role, name, file)."""
    role, sep, rest = spec.partition(":")
    name, eq, file = rest.partition("=")
    if not sep or not eq or role not in ROLES or not name or not file:
        raise InputError(f"part {spec!r}: expected ROLE:NAME=FILE with ROLE one of {ROLES} "
                         "(e.g. train:train=train.spacy)", field="part")
    return role, name, file


def write_teacher_inputs(corpus: PathLike, parts: Sequence[str], teacher: PathLike, kb_files: Sequence[PathLike],
                         output: PathLike, max_pieces: int = 256, overlap: int = 64) -> Dict[str, object]:
    """Write ``output`` (safetensors) for the teacher folder ``teacher`` (its ``tokenizer.json``)."""
    from safetensors.numpy import save_file
    from tqdm.auto import tqdm

    corpus, teacher, output = Path(corpus), Path(teacher), Path(output)
    if not 0 <= overlap < max_pieces // 2 or max_pieces < 24:
        raise InputError(f"max_pieces={max_pieces}, overlap={overlap}: need max_pieces >= 24 and 0 <= overlap < "
                         "max_pieces / 2", field="overlap")
    if output.exists():
        raise InputError("exists; the teacher's inputs are never overwritten (choose a new --output)", output)
    if not (teacher / "tokenizer.json").is_file():
        raise InputError("no tokenizer.json: the teacher folder must hold its Hugging Face fast tokenizer", teacher)
    config = json.loads((teacher / "config.json").read_text(encoding="utf-8")) if (teacher / "config.json").is_file() \
        else {}
    if max_pieces > int(config.get("max_position_embeddings", max_pieces)):
        raise InputError(f"max_pieces={max_pieces} is more than the teacher reads "
                         f"(max_position_embeddings {config['max_position_embeddings']})", teacher / "config.json")
    tokenizer = FastTokenizer(teacher, config.get("pad_token_id"))
    if tokenizer.pad_token_id is None:
        raise InputError("no pad token (pad_token_id in config.json, or [PAD]/<pad> in tokenizer.json)", teacher)
    nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
    label_to_types = {k: list(v) for k, v in DEFAULT_LABEL_TO_TYPES.items()}
    gazetteer = build_gazetteer(kb_files, label_to_types, nlp)
    scheme = scheme_for(label_to_types)
    tagging = Tagging(None, tokenizer, gazetteer, scheme, max_pieces, overlap)  # windows only: no model needed
    tensors: Dict[str, np.ndarray] = {}
    listed, stats = [], {}
    digest = hashlib.sha256()
    known = {p["file"]: p["labels"] for p in read_parts(corpus)} if (corpus / PARTS_FILE).is_file() else {}
    for spec in tqdm(parts, desc="teacher inputs", unit="part"):
        role, name, file = parse_part(spec)
        if any(p["name"] == name for p in listed):
            raise InputError(f"part name {name!r} given twice", field="part")
        path = corpus / file
        docs = read_docbin(path, nlp)  # a missing or bad file is named here
        content = path.read_bytes()
        digest.update(content)
        opened = open_tags(scheme, known[file]) if file in known and role != "dev" else ()
        arrays = part_arrays(docs, tagging, opened)
        tensors.update({f"{name}/{key}": value for key, value in arrays.items()})
        listed.append({"name": name, "role": role, "file": file, "sha256": hashlib.sha256(content).hexdigest(),
                       **({"labels": list(known[file])} if file in known and role != "dev" else {}),
                       **({"open_tags": list(opened)} if opened else {})})
        stats[name] = {"docs": len(arrays["doc_offsets"]) - 1, "tokens": len(arrays["gold"]),
                       "windows": len(arrays["win_offsets"]) - 1}
    metadata = {"format": FORMAT, "tags": json.dumps(list(scheme.tags)), "parts": json.dumps(listed),
                "n_features": str(gazetteer.n_features), "pad_id": str(tokenizer.pad_token_id),
                "teacher": teacher.name, "data": digest.hexdigest()[:16], "gazetteer_names": str(len(gazetteer))}
    output.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(output), metadata=metadata)
    logger.info("teacher inputs %s: %s", output, json.dumps(stats))
    return {"output": str(output), "parts": stats, "data": metadata["data"]}
