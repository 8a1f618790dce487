"""Distil the teacher into the student where a GPU is: torch, transformers and the project's NER model.

``python -m training.ner.teacher.distil --encoder FOLDER --inputs student_inputs.safetensors
--soft-labels soft_labels.safetensors --output DIR`` (from the repository root; spaCy is not needed).

``sapbert ner-train --teacher`` spends 12 minutes per epoch of the 3-layer student on two CPU
cores, almost all of it in the model; a GPU does an epoch in seconds, so a longer schedule and a
deeper student become affordable. This is the same training in a spaCy-free process: the windows
come from an inputs file cut with the *student's* tokenizer (``sapbert ner-teacher-inputs
--teacher <the student's encoder folder>``: the windows ``ner-train`` builds), the teacher's rows
come from its ``soft_labels.safetensors`` (matched per part and token; both files must say the same
data digest), and model, optimiser groups, schedule and loss are the trainer's own
(:func:`spacy_sapbert.ner.model.from_encoder`, :mod:`training.common.schedule`, :mod:`..objective`):
``distil_weight`` × cross-entropy against the teacher + the rest × cross-entropy against the gold tags
of the ``train`` parts; on ``unlabelled`` parts the teacher alone, unless ``--gold-part`` names one:
then its own annotation teaches too, with partial labels where the part leaves labels open (the
per-corpus ablation of issue 31). ``--train-on`` turns a later ``dev`` part into training data (NCBI
dev, when the figures reported are BC5CDR dev's and NCBI test's). After each epoch the first ``dev``
part is tagged (argmax, strict spans) and the best epoch is kept. Written: ``DIR/model`` (float16,
without the word-piece table, which stays frozen and is the encoder's) and ``DIR/distil_log.json``;
``sapbert ner-student-export`` makes the pipeline folder ``ner-train`` would have written.
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import random
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from spacy_sapbert.default import LINKER_PIPE
from spacy_sapbert.ner import model as tagger_model
from spacy_sapbert.util.devices import resolve_device

from ...common.schedule import make_optimizer, make_scheduler
from ..objective import IGNORE, NEW_PARTS, PARTIAL_O, allowed_tags, gold_loss, partial_label_loss, with_teacher
from .fit import Inputs, optimiser_arguments, strict_f1
from .soft_labels import SoftLabels

logger = logging.getLogger("distil")
MODEL_DIR = "model"
LOG_FILE = "distil_log.json"


class Corpus:
    """The inputs' windows with, per part, the gold tags (``train`` parts and ``gold_parts``) and the teacher's rows."""

    def __init__(self, inputs: Inputs, soft: SoftLabels, gold_parts: Sequence[str] = (),
                 train_on: Sequence[str] = ()) -> None:
        if inputs.metadata.get("data") != soft.data:
            raise ValueError(f"the inputs were cut from corpus files {inputs.metadata.get('data')}, the soft labels "
                             f"from {soft.data}: cut the student's inputs from the teacher's corpus folder")
        soft.check_tags(inputs.tags)
        self.inputs, self.roles = inputs, {p["name"]: p["role"] for p in inputs.parts}
        dev = [name for name, role in self.roles.items() if role == "dev"]
        if any(name not in dev[1:] for name in train_on):  # the first dev part chooses the epoch: never learnt
            raise SystemExit(f"--train-on {list(train_on)}: only dev parts after the first can be learnt from "
                             f"(the inputs' dev parts: {dev}; {dev[:1]} chooses the best epoch)")
        self.roles.update({name: "train" for name in train_on})
        self.train_on = list(train_on)
        unlabelled = [name for name, role in self.roles.items() if role == "unlabelled"]
        gold_parts = unlabelled if "all" in gold_parts else list(gold_parts)
        wrong = [name for name in gold_parts if name not in unlabelled]
        if wrong:
            raise SystemExit(f"--gold-part {wrong}: not unlabelled parts of the inputs (they have {unlabelled})")
        unknown = [p["name"] for p in inputs.parts if p["name"] in gold_parts and "labels" not in p]
        if unknown:  # cut before partial labels were recorded: its gold would teach a certain O for every label
            raise SystemExit(f"--gold-part {unknown}: the inputs do not say which labels these parts annotate; cut "
                             "them again with `sapbert ner-teacher-inputs` from a corpus folder with parts.json")
        self.gold_parts = gold_parts
        self.gold: Dict[str, torch.Tensor] = {}
        self.soft: Dict[str, torch.Tensor] = {}
        self.open: Dict[str, torch.Tensor] = {}
        for part in inputs.parts:
            name, role = part["name"], self.roles[part["name"]]
            gold = inputs.get(name, "gold").long()
            self.gold[name] = gold if role == "train" or name in gold_parts else torch.full_like(gold, IGNORE)
            self.soft[name] = torch.from_numpy(soft.part(name, len(gold)))
            self.open[name] = torch.zeros(len(inputs.tags), dtype=torch.bool)
            self.open[name][list(part.get("open_tags", []))] = True

    def items(self, *roles: str) -> List[Tuple[str, int]]:
        return [item for name, role in self.roles.items() if role in roles for item in self.inputs.windows(name)]

    def dev_parts(self) -> List[str]:
        return [name for name, role in self.roles.items() if role == "dev"]

    def targets(self, chunk, scored, device) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(gold tags, teacher rows, open tags per token) of the scored tokens of the windows ``chunk``, in batch order."""
        gold = torch.cat([self.gold[part][tokens] for (part, _), (_, tokens) in zip(chunk, scored)])
        soft = torch.cat([self.soft[part][tokens] for (part, _), (_, tokens) in zip(chunk, scored)])
        opened = torch.cat([self.open[part].expand(len(tokens), -1) for (part, _), (_, tokens) in zip(chunk, scored)])
        return gold.to(device), soft.to(device), opened.to(device)

    def loss(self, rows: torch.Tensor, gold: torch.Tensor, opened: torch.Tensor) -> torch.Tensor:
        """The gold term: cross-entropy, or the partial-label loss where a token's tags are left open."""
        if bool((gold == PARTIAL_O).any()):
            return partial_label_loss(rows, gold, allowed_tags(gold, opened))
        return gold_loss(rows, gold)


def logits_of(model, inputs: Inputs, chunk, device) -> Tuple[torch.Tensor, list]:
    ids, feats, mask, scored = inputs.batch(chunk, device)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        scores = model(ids, feats, mask)
    rows = torch.cat([scores[r, positions.to(device)] for r, (positions, _) in enumerate(scored)])
    return rows.float(), scored


@torch.no_grad()
def dev_scores(model, corpus: Corpus, device: torch.device, batch: int = 64) -> Dict[str, Dict[str, float]]:
    """Strict span P/R/F1 (argmax tags) on each dev part."""
    model.eval()
    out = {}
    for name in corpus.dev_parts():
        gold = corpus.inputs.get(name, "gold")
        probs = torch.zeros((len(gold), len(corpus.inputs.tags)))
        probs[:, 0] = 1.0
        items = corpus.inputs.windows(name)
        for start in range(0, len(items), batch):
            rows, scored = logits_of(model, corpus.inputs, items[start:start + batch], device)
            probs[torch.cat([tokens for _, tokens in scored])] = rows.softmax(-1).cpu()
        out[name] = strict_f1(corpus.inputs.tags, probs, gold, corpus.inputs.get(name, "doc_offsets").tolist())
    model.train()
    return out


def distil(args: argparse.Namespace) -> Dict:
    device = torch.device(resolve_device(args.device))
    output = Path(args.output)
    if (output / MODEL_DIR).exists():
        raise SystemExit(f"{output / MODEL_DIR} exists; a trained student is never overwritten (choose a new --output)")
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    inputs = Inputs(Path(args.inputs))
    teacher = SoftLabels(args.soft_labels)
    corpus = Corpus(inputs, teacher, args.gold_part, args.train_on)
    model, _ = tagger_model.from_encoder(Path(args.encoder), inputs.tags, inputs.n_features, layers=args.layers)
    model.dropout.p = args.dropout
    model.encoder.embeddings.word_embeddings.weight.requires_grad = False
    model.to(device)
    items = corpus.items("train", "unlabelled")
    if args.max_windows:
        items = random.sample(items, min(args.max_windows, len(items)))
    if not items or not corpus.dev_parts():
        raise SystemExit(f"{args.inputs}: need windows to learn from (train/unlabelled parts) and a dev part")
    steps_per_epoch = len(items) // args.batch_size  # the trainer's plan drops the last partial batch
    settings = SimpleNamespace(lr=args.lr, weight_decay=args.weight_decay, warmup_steps=args.warmup_steps,
                               schedule="linear")
    optimizer = make_optimizer(model, settings, head_prefixes=NEW_PARTS, head_lr=args.head_lr,
                               fused=device.type == "cuda")
    scheduler = make_scheduler(optimizer, settings, args.epochs * steps_per_epoch)
    history, best, best_state, started = [], None, None, time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        spent = time.perf_counter() - started
        if args.time_limit and history and spent * epoch / (epoch - 1) > args.time_limit:
            logger.info("time limit: stopping after %d epochs", epoch - 1)
            break
        random.shuffle(items)
        total = 0.0
        for step in range(steps_per_epoch):
            chunk = items[step * args.batch_size:(step + 1) * args.batch_size]
            rows, scored = logits_of(model, inputs, chunk, device)
            gold, soft, opened = corpus.targets(chunk, scored, device)
            loss = with_teacher(corpus.loss(rows, gold, opened), rows, soft, args.distil_weight)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            total += float(loss.detach())
        scores = dev_scores(model, corpus, device)
        record = {"epoch": epoch, "loss": round(total / steps_per_epoch, 4), "dev": scores,
                  "elapsed_s": round(time.perf_counter() - started, 1)}
        history.append(record)
        logger.info(json.dumps(record))
        if best is None or scores[corpus.dev_parts()[0]]["f"] > best["dev"][corpus.dev_parts()[0]]["f"]:
            best, best_state = record, copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
        elif args.patience and epoch - best["epoch"] >= args.patience:
            logger.info("no better dev F1 for %d epochs: stopping", args.patience)
            break
    model.load_state_dict(best_state)
    record = {"base_model": str(args.encoder), "layers": args.layers, "epochs": args.epochs, "batch_size": args.batch_size,
              "epochs_run": len(history), "lr": args.lr, "head_lr": args.head_lr, "weight_decay": args.weight_decay,
              "warmup_steps": args.warmup_steps, "distil_weight": args.distil_weight, "dropout": args.dropout,
              "seed": args.seed, "gold_parts": corpus.gold_parts, "trained_on_dev": corpus.train_on,
              "freeze_embeddings": True, "teacher": str(args.soft_labels),
              **teacher.provenance([name for name, role in corpus.roles.items() if role == "unlabelled"]),
              "gazetteer_names": inputs.metadata.get("gazetteer_names"),
              "best": {"epoch": best["epoch"], "dev": best["dev"]}, "history": history,
              "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu", "torch": torch.__version__,
              "seconds": round(time.perf_counter() - started, 1)}
    tagger_model.save(model.cpu(), Path(args.encoder), inputs.tags, output / MODEL_DIR, dtype=torch.float16,
                      extra={"shapes": False, "styles": [], "training": record}, shared_from=LINKER_PIPE)
    (output / LOG_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
    logger.info("best epoch %d: %s", best["epoch"], json.dumps(best["dev"]))
    return record


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoder", required=True, help="The student's base encoder folder (the default's linker encoder).")
    ap.add_argument("--inputs", required=True, help="inputs.safetensors cut with that encoder's tokenizer.")
    ap.add_argument("--soft-labels", required=True, help="The teacher's soft_labels.safetensors.")
    ap.add_argument("--output", required=True, help="Folder for model/ and distil_log.json.")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--patience", type=int, default=0, help="Stop after this many epochs without a better dev F1 (0: never).")
    optimiser_arguments(ap, lr=5e-5, time_limit="epoch (the best so far is kept)")
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--distil-weight", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gold-part", action="append", default=[],
                    help="An unlabelled part whose own annotation teaches too (partial labels where it leaves labels "
                         "open); repeat for several, 'all' for every one. Default: the teacher alone there.")
    ap.add_argument("--train-on", action="append", default=[],
                    help="A dev part (not the first, which chooses the best epoch) whose gold and teacher rows teach "
                         "as the train parts' do, e.g. ncbi_dev when only BC5CDR dev and NCBI test are reported; "
                         "its scores in the log are then training scores.")
    ap.add_argument("--max-windows", type=int, default=0,
                    help="Learn from this many windows drawn at random (0: all): a quick check of a set-up.")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    distil(parser().parse_args(argv))


if __name__ == "__main__":
    main()
