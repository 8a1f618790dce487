"""Train the NER teacher and write its soft labels: torch, transformers and safetensors only.

Runs where the GPU is, which may have no spaCy and no project install:
``python training/ner/teacher/fit.py --model FOLDER --inputs inputs.safetensors --output DIR``
(``sapbert ner-teacher-fit`` runs the same code here). The inputs come from :mod:`.inputs`.

The teacher is any encoder ``transformers.AutoModel`` loads from a folder (all-mpnet-base-v2 from
PyPI, 110M parameters), with the student's design on top: a gazetteer-feature embedding added to
the word-piece embeddings (starting at zero) and a linear tag head on each scored token's first
piece, cross-entropy on the gold tags of the ``train`` parts. Several seeds make an ensemble
whose averaged probabilities are the soft labels (an ensemble is the better teacher, and on a GPU
a seed costs minutes). Every part's tokens get a probability row (a token no window scores, a
line break, is certain ``O``), stored as float16 in ``soft_labels.safetensors``, with the inputs'
data digest so the student can check it reads labels of its own corpus.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import random
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

logger = logging.getLogger("teacher")
IGNORE = -100
"""Gold of a token with missing annotation (``spacy_sapbert.ner.tags.IGNORE``)."""
SOFT_LABELS = "soft_labels.safetensors"


class Inputs:
    """The arrays :func:`~.inputs.write_teacher_inputs` wrote, with window access by part."""

    def __init__(self, path: Path) -> None:
        from safetensors import safe_open
        from safetensors.torch import load_file

        with safe_open(str(path), framework="pt") as handle:
            self.metadata = dict(handle.metadata() or {})
        if self.metadata.get("format") != "1":
            raise ValueError(f"{path}: not a teacher-inputs file (format {self.metadata.get('format')!r})")
        self.arrays = load_file(str(path))
        self.tags: List[str] = json.loads(self.metadata["tags"])
        self.parts: List[dict] = json.loads(self.metadata["parts"])
        self.n_features = int(self.metadata["n_features"])
        self.pad_id = int(self.metadata["pad_id"])

    def get(self, part: str, key: str) -> torch.Tensor:
        return self.arrays[f"{part}/{key}"]

    def windows(self, part: str) -> List[Tuple[str, int]]:
        return [(part, w) for w in range(len(self.get(part, "win_offsets")) - 1)]

    def batch(self, items: Sequence[Tuple[str, int]], device: torch.device):
        """(ids, features, mask) padded to the longest window, and per window (positions, token indices)."""
        rows = []
        for part, w in items:
            lo, hi = self.get(part, "win_offsets")[w:w + 2].tolist()
            plo, phi = self.get(part, "pos_offsets")[w:w + 2].tolist()
            rows.append((self.get(part, "ids")[lo:hi], self.get(part, "features")[lo:hi],
                         self.get(part, "positions")[plo:phi].long(), self.get(part, "tokens")[plo:phi].long()))
        width = max(len(r[0]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        feats = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (piece_ids, features, _, _) in enumerate(rows):
            ids[i, :len(piece_ids)] = piece_ids.long()
            feats[i, :len(features)] = features.long()
            mask[i, :len(piece_ids)] = 1
        return ids.to(device), feats.to(device), mask.to(device), [(r[2], r[3]) for r in rows]


class Teacher(nn.Module):
    """Encoder + zero-initialised gazetteer embedding + linear tag head."""

    def __init__(self, folder: Path, n_tags: int, n_features: int, dropout: float = 0.1) -> None:
        super().__init__()
        from transformers import AutoModel

        self.encoder = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
        width = self.encoder.config.hidden_size
        self.gazetteer_embed = nn.Embedding(max(n_features, 1), width)
        nn.init.zeros_(self.gazetteer_embed.weight)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(width, n_tags)

    def forward(self, ids: torch.Tensor, feats: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        embeds = self.encoder.get_input_embeddings()(ids) + self.gazetteer_embed(feats)
        hidden = self.encoder(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        return self.head(self.dropout(hidden))


def span_set(tags: Sequence[str], labels: torch.Tensor, doc_offsets: Sequence[int]) -> set:
    """(doc, start, end, label) of BIO tag ids ``labels`` (an ``I-`` after another label starts a span)."""
    spans, names = set(), [t[2:] for t in tags]
    for d in range(len(doc_offsets) - 1):
        start, current = -1, ""
        seq = labels[doc_offsets[d]:doc_offsets[d + 1]].tolist() + [0]
        for i, tag in enumerate(seq):
            inside = tag > 0 and tags[tag].startswith("I-") and start >= 0 and names[tag] == current
            if start >= 0 and not inside:
                spans.add((d, start, i, current))
                start = -1
            if tag > 0 and not inside:
                start, current = i, names[tag]
    return spans


def strict_f1(tags: Sequence[str], probs: torch.Tensor, gold: torch.Tensor, doc_offsets: Sequence[int]) -> Dict:
    """Strict span P/R/F1 (percent) of the argmax tags against gold (tokens with missing gold count as O)."""
    pred = span_set(tags, probs.argmax(-1), doc_offsets)
    true = span_set(tags, gold.clamp(min=0).long(), doc_offsets)
    tp = len(pred & true)
    p, r = tp / max(len(pred), 1), tp / max(len(true), 1)
    return {"p": round(100 * p, 2), "r": round(100 * r, 2), "f": round(200 * p * r / (p + r), 2) if p + r else 0.0}


@torch.no_grad()
def predict(model: Teacher, inputs: Inputs, part: str, device: torch.device, batch: int = 64) -> torch.Tensor:
    """Probabilities (tokens × tags) for every token of ``part``."""
    model.eval()
    n_tokens = len(inputs.get(part, "gold"))
    probs = torch.zeros((n_tokens, len(inputs.tags)), dtype=torch.float32)
    probs[:, 0] = 1.0
    lengths = inputs.get(part, "win_offsets").diff().tolist()
    items = sorted(inputs.windows(part), key=lambda item: lengths[item[1]])
    for start in range(0, len(items), batch):
        ids, feats, mask, scored = inputs.batch(items[start:start + batch], device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(ids, feats, mask)
        rows = logits.float().softmax(-1).cpu()
        for row, (positions, tokens) in enumerate(scored):
            probs[tokens] = rows[row, positions]
    model.train()
    return probs


def train_one(args, inputs: Inputs, seed: int, device: torch.device) -> Tuple[Teacher, List[Dict]]:
    random.seed(seed)
    torch.manual_seed(seed)
    model = Teacher(Path(args.model), len(inputs.tags), inputs.n_features, args.dropout).to(device)
    if args.freeze_embeddings:
        model.encoder.get_input_embeddings().weight.requires_grad = False
    new = [p for n, p in model.named_parameters() if n.startswith(("head.", "gazetteer_embed.")) and p.requires_grad]
    old = [p for n, p in model.named_parameters() if not n.startswith(("head.", "gazetteer_embed.")) and p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": old, "lr": args.lr}, {"params": new, "lr": args.head_lr}],
                                  weight_decay=args.weight_decay)
    items = [item for part in inputs.parts if part["role"] == "train" for item in inputs.windows(part["name"])]
    steps = args.epochs * math.ceil(len(items) / args.batch_size)
    warmup = int(0.1 * steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / max(warmup, 1)) * max(0.0, (steps - s) / max(steps - warmup, 1)))
    log = []
    model.train()
    for epoch in range(1, args.epochs + 1):
        random.shuffle(items)
        started, total = time.perf_counter(), 0.0
        for start in range(0, len(items), args.batch_size):
            chunk = items[start:start + args.batch_size]
            ids, feats, mask, scored = inputs.batch(chunk, device)
            gold = torch.cat([inputs.get(part, "gold")[tokens] for (part, _), (_, tokens) in zip(chunk, scored)])
            if not bool((gold != IGNORE).any()):
                continue  # nothing annotated in these windows (cross-entropy would be NaN)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits = model(ids, feats, mask)
            rows = torch.cat([logits[r, positions.to(device)] for r, (positions, _) in enumerate(scored)])
            loss = nn.functional.cross_entropy(rows.float(), gold.long().to(device), ignore_index=IGNORE)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            total += float(loss.detach())
        record = {"seed": seed, "epoch": epoch, "loss": round(total / math.ceil(len(items) / args.batch_size), 4),
                  "seconds": round(time.perf_counter() - started, 1)}
        for part in inputs.parts:
            if part["role"] == "dev":
                name = part["name"]
                record[name] = strict_f1(inputs.tags, predict(model, inputs, name, device), inputs.get(name, "gold"),
                                         inputs.get(name, "doc_offsets").tolist())
        logger.info(json.dumps(record))
        log.append(record)
    return model, log


def fit(args) -> Dict:
    from safetensors.torch import save_file

    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    inputs = Inputs(Path(args.inputs))
    if args.seeds < 1 or args.epochs < 1:
        raise SystemExit(f"--seeds {args.seeds}, --epochs {args.epochs}: both must be at least 1")
    if not any(part["role"] == "train" and inputs.windows(part["name"]) for part in inputs.parts):
        raise SystemExit(f"{args.inputs}: no part with role 'train' has a window to learn from")
    partial = [part["name"] for part in inputs.parts if part["role"] == "train" and part.get("open_tags")]
    if partial:
        raise SystemExit(f"{args.inputs}: train parts {partial} annotate only some labels; the teacher learns from "
                         "fully annotated parts (give them the role unlabelled)")
    output = Path(args.output)
    if (output / SOFT_LABELS).exists():
        raise SystemExit(f"{output / SOFT_LABELS} exists; soft labels are never overwritten (choose a new --output)")
    output.mkdir(parents=True, exist_ok=True)
    sums = {part["name"]: None for part in inputs.parts}
    logs, started = [], time.perf_counter()
    seeds_done = 0
    for seed in range(args.seeds):
        if seeds_done and args.time_limit and time.perf_counter() - started > args.time_limit * seeds_done / (seeds_done + 1):
            logger.info("time limit: stopping after %d seeds", seeds_done)
            break
        model, log = train_one(args, inputs, seed, device)
        logs += log
        for name in sums:
            probs = predict(model, inputs, name, device)
            sums[name] = probs if sums[name] is None else sums[name] + probs
        seeds_done += 1
        del model
    tensors, ensemble = {}, {}
    for part in inputs.parts:
        name = part["name"]
        probs = sums[name] / seeds_done
        tensors[f"{name}/probs"] = probs.half().contiguous()
        tensors[f"{name}/doc_offsets"] = inputs.get(name, "doc_offsets").contiguous()
        if part["role"] == "dev":
            ensemble[name] = strict_f1(inputs.tags, probs, inputs.get(name, "gold"),
                                       inputs.get(name, "doc_offsets").tolist())
    record = {"seeds": seeds_done, "epochs": args.epochs, "lr": args.lr, "ensemble_dev": ensemble, "log": logs,
              "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
              "seconds": round(time.perf_counter() - started, 1)}
    metadata = {"format": "1", "tags": json.dumps(inputs.tags), "parts": json.dumps(inputs.parts),
                "data": inputs.metadata["data"], "teacher": inputs.metadata.get("teacher", ""),
                "training": json.dumps({k: v for k, v in record.items() if k != "log"})}
    save_file(tensors, str(output / SOFT_LABELS), metadata=metadata)
    (output / "teacher_log.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    logger.info("ensemble of %d: %s", seeds_done, json.dumps(ensemble))
    return record


def optimiser_arguments(ap: argparse.ArgumentParser, lr: float, time_limit: str) -> None:
    """The options the teacher's and the student's GPU scripts share (``time_limit``: what the limit stops)."""
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--time-limit", type=float, default=0.0,
                    help=f"Seconds: start no new {time_limit} that would likely end past this (0: none).")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="Encoder folder transformers.AutoModel reads (safetensors).")
    ap.add_argument("--inputs", required=True, help="inputs.safetensors from `sapbert ner-teacher-inputs`.")
    ap.add_argument("--output", required=True, help="Folder for soft_labels.safetensors and teacher_log.json.")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--seeds", type=int, default=3, help="Teachers trained; their probabilities are averaged.")
    ap.add_argument("--freeze-embeddings", action="store_true")
    optimiser_arguments(ap, lr=3e-5, time_limit="seed")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    fit(parser().parse_args(argv))


if __name__ == "__main__":
    main()
