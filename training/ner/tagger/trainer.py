"""The transformer NER's training loop, built from the self-alignment trainer's parts.

A micro-batch is ``batch_size`` windows (:mod:`spacy_sapbert.ner.windows`); the loss is
token-level cross-entropy at each scored token's first word piece (missing annotation ignored),
mixed, with a teacher (:mod:`..teacher`), with cross-entropy against its probabilities.
From ``selfalign``: the accelerate set-up (bf16 autocast on CPUs with native bf16), the seeded
data order (a resumed run sees the batches an uninterrupted one would), the warm-up schedule,
the accumulated optimiser step, pickle-free atomic checkpoints with their resume protocol, and
Ctrl-C handling. After every epoch the model tags the dev docs; the best strict span F1 is kept
(``run_dir/best``) and the run stops after ``patience`` epochs without a better one. The output is a
spaCy pipeline folder (tokenizer → ``sapbert_ner`` → ``abbreviation_entities``) holding the best
model in float16.
"""
from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import spacy
import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.ner import model as tagger_model
from spacy_sapbert.ner.features import n_features
from spacy_sapbert.ner.tagging import Tagging
from spacy_sapbert.ner.tags import IGNORE

from ...common.hardware import make_accelerator
from ...common.plan import BatchPlan
from ...common.runstate import CheckpointedRun
from ...common.schedule import make_optimizer, make_scheduler
from ...common.signals import StopOnSignal
from ...common.step import accumulated_step
from .config import NerConfig, resume_identity
from ..objective import NEW_PARTS, allowed_tags, gold_loss, partial_label_loss, with_teacher
from .data import PARTIAL_O, build_gazetteer, examples, fingerprint, read_docbin, scheme_for, span_f1
from .output import TOKENIZER_CONFIG, base_encoder_folder, is_ner_output, write_pipeline

logger = logging.getLogger(__name__)
PathLike = Union[str, Path]


class NerTrainer(CheckpointedRun):
    """One run: DocBin train/dev + KB files + base encoder → NER pipeline folder, checkpoints in ``run_dir``."""

    def __init__(self, config: NerConfig, train: Sequence[PathLike], dev: PathLike, kb_files: Sequence[PathLike],
                 output: PathLike, run_dir: PathLike = "training_runs/ner-tagger",
                 known: Optional[Sequence[Optional[Sequence[str]]]] = None) -> None:
        """``train``: one DocBin file, or one per name in ``config.styles`` (in that order); or, with
        ``known`` (the labels each file annotates completely, ``parts.json``), any number of files
        learnt with partial labels in one style."""
        self.config = config.validate()
        self.output, self.run_dir = Path(output), Path(run_dir)
        self.device, self.accelerator = make_accelerator(config.device, config.amp, config.num_threads)
        self.rank, self.world = self.accelerator.process_index, self.accelerator.num_processes
        self.nlp = spacy.blank("en", config=TOKENIZER_CONFIG)
        self.gazetteer = build_gazetteer(kb_files, config.label_to_types, self.nlp)
        self.scheme = scheme_for(config.label_to_types)
        random.seed(config.seed + self.rank)
        torch.manual_seed(config.seed + self.rank)
        self.base_folder = base_encoder_folder(config.base_model)
        model, self.tokenizer = tagger_model.from_encoder(
            self.base_folder, self.scheme.tags, n_features(self.gazetteer, config.shapes, len(config.styles)),
            layers=config.layers)
        model.dropout.p = config.dropout
        model.encoder.embeddings.word_embeddings.weight.requires_grad = not config.freeze_embeddings
        train = [train] if isinstance(train, (str, Path)) else list(train)
        if known is not None and (config.styles or len(known) != len(train)):
            raise InputError(f"{len(train)} training files, {len(known)} label sets: give one per file (no styles)",
                             field="parts")
        if known is None and len(train) != max(len(config.styles), 1):
            raise InputError(f"{len(train)} training files for styles {config.styles}: give one file per style",
                             field="styles")
        self.dev_docs = read_docbin(dev, self.nlp)
        self.tagging = self._tagging(model)
        self.examples = []
        teacher = self._teacher()
        styles = config.styles or [None] * len(train)
        for path, style, labels in zip(train, styles, known or [None] * len(train)):
            docs = read_docbin(path, self.nlp)
            soft = None if teacher is None else teacher.docs(teacher.part_for_file(path), docs)
            found, stats = examples(docs, self.tagging, style, labels, soft)
            logger.info("training data %s (style %s, labels %s): %s", path, style, labels or "all", json.dumps(stats))
            self.examples += found
        teacher_text = self._teacher_text(teacher, Path(dev).parent)
        self.teacher_record = {} if teacher is None else teacher.provenance([name for name, _ in teacher_text])
        for name, path in teacher_text:
            teacher.check_file(name, path)
            docs = read_docbin(path, self.nlp)
            found, stats = examples(docs, self.tagging, soft=teacher.docs(name, docs), unlabelled=True)
            logger.info("teacher-labelled text %s: %s", path, json.dumps(stats))
            self.examples += found
            train.append(path)  # into the run's fingerprint
        self.plan = BatchPlan(len(self.examples), config.batch_size, config.grad_accum, self.world, config.seed)
        if self.plan.steps_per_epoch == 0:
            raise InputError(f"{len(self.examples)} windows are fewer than one step needs", field="batch_size")
        self.total_steps = config.epochs * self.plan.steps_per_epoch
        optimizer = make_optimizer(model, config, head_prefixes=NEW_PARTS, head_lr=config.head_lr)
        self.scheduler = make_scheduler(optimizer, config, self.total_steps)  # type: ignore[arg-type]
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        data = [*train, dev] + ([config.teacher] if config.teacher else [])
        self.identity = resume_identity(config, fingerprint(data, self.gazetteer), self.world)
        if known is not None:
            self.identity["known"] = [list(labels) if labels is not None else None for labels in known]
        self.step = 0
        self.history: List[Dict[str, Any]] = []
        self.elapsed_before = 0.0

    def _teacher(self):
        """The teacher's soft labels (:class:`..teacher.soft_labels.SoftLabels`), or None."""
        if not self.config.teacher:
            return None
        from ..teacher.soft_labels import SoftLabels

        teacher = SoftLabels(self.config.teacher)
        teacher.check_tags(self.scheme.tags)
        return teacher

    def _teacher_text(self, teacher, corpus: Path) -> List[Tuple[str, Path]]:
        """(part name, corpus file) of each part named in ``teacher_text`` ('all': every unlabelled one)."""
        if not self.config.teacher_text:
            return []
        parts = {p["name"]: p for p in teacher.parts if p["role"] == "unlabelled"}
        names = list(parts) if "all" in self.config.teacher_text else self.config.teacher_text
        missing = [name for name in names if name not in parts]
        if missing:
            raise InputError(f"{missing} are not unlabelled parts of the teacher's file (it has {sorted(parts)})",
                             teacher.path, field="teacher_text")
        return [(name, corpus / parts[name]["file"]) for name in names]

    def _tagging(self, model: torch.nn.Module) -> Tagging:
        native = str(self.accelerator.mixed_precision) == "bf16"
        return Tagging(model, self.tokenizer, self.gazetteer, self.scheme, self.config.max_pieces,
                       self.config.overlap, batch_size=32, device=str(self.accelerator.device),
                       dtype="bfloat16" if native else "float32", shapes=self.config.shapes,
                       styles=tuple(self.config.styles))

    def batch_loss(self, indices: Sequence[int]) -> Tuple[torch.Tensor, float]:
        """(cross-entropy over the scored tokens, their tag accuracy) of the windows ``indices``."""
        windows = [self.examples[i].window for i in indices]
        ids, feats, mask = tagger_model.collate(windows, self.tokenizer.pad_token_id or 0, self.accelerator.device)
        rows = tagger_model.scores_at(self.model(ids, feats, mask), windows)
        logits = torch.cat(rows)
        gold = torch.tensor([t for i in indices for t in self.examples[i].gold], device=logits.device)
        if any(self.examples[i].open_tags for i in indices):
            allowed = self._allowed(indices, gold, logits.shape[-1])
            loss = partial_label_loss(logits.float(), gold, allowed)
            gold = torch.where(gold == PARTIAL_O, torch.full_like(gold, IGNORE), gold)
        else:
            loss = gold_loss(logits.float(), gold)
        if self.config.teacher:
            soft = torch.from_numpy(np.concatenate([self.examples[i].soft for i in indices])).to(logits.device)
            loss = with_teacher(loss, logits.float(), soft, self.config.distil_weight)
        kept = gold != IGNORE
        accuracy = float((logits.argmax(-1)[kept] == gold[kept]).float().mean()) if kept.any() else 0.0
        return loss, accuracy

    def _allowed(self, indices: Sequence[int], gold: torch.Tensor, n_tags: int) -> torch.Tensor:
        """tokens × tags: the gold tag where it is known, the example's open tags at a PARTIAL_O token."""
        opened = torch.zeros((gold.shape[0], n_tags), dtype=torch.bool)
        row = 0
        for i in indices:
            example = self.examples[i]
            if example.open_tags:
                opened[row:row + len(example.gold), list(example.open_tags)] = True
            row += len(example.gold)
        return allowed_tags(gold, opened.to(gold.device))

    def evaluate_dev(self) -> Dict[str, float]:
        tagging = self._tagging(self.accelerator.unwrap_model(self.model, keep_fp32_wrapper=False))
        return span_f1(self.dev_docs, tagging.spans(self.dev_docs, tagging.scores(self.dev_docs)))

    def train(self, resume: bool = False, on_step: Optional[Callable[["NerTrainer"], None]] = None) -> Dict[str, Any]:
        """Run until ``epochs`` or early stop (or Ctrl-C), then write the pipeline of the best epoch."""
        from tqdm.auto import tqdm

        self._check_output()
        self._session_start = time.perf_counter()
        self.resume_or_refuse(resume)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        logger.info("NER: %d windows, %d steps/epoch, up to %d steps, device=%s, precision=%s", len(self.examples),
                    self.plan.steps_per_epoch, self.total_steps, self.accelerator.device,
                    self.accelerator.mixed_precision)
        bar = tqdm(total=self.total_steps, initial=self.step, desc="ner", unit="step")
        stopped = False
        with StopOnSignal(self.accelerator) as stop:
            while self.step < self.total_steps and not self._patience_spent():
                micro = [self.plan.indices(self.step, m, self.rank) for m in range(self.config.grad_accum)]
                loss, acc = accumulated_step(self.accelerator, self.model, self.optimizer, self.scheduler, micro,
                                             self.batch_loss, self.config.max_grad_norm)
                self.step += 1
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", acc=f"{acc:.3f}")
                if self.step % self.config.log_every == 0:
                    self._log({"step": self.step, "loss": loss, "token_acc": acc})
                if self.step % self.plan.steps_per_epoch == 0:
                    self._end_epoch()
                if on_step is not None:
                    on_step(self)
                stopped = stop.agreed()
                due = self.config.checkpoint_every and self.step % self.config.checkpoint_every == 0
                if stopped or due or self.step % self.plan.steps_per_epoch == 0:
                    self.save_checkpoint()
                if stopped:
                    break
        bar.close()
        if stopped:
            logger.warning("stopped at step %d/%d; continue with --resume", self.step, self.total_steps)
            return {"interrupted": True, "step": self.step}
        return self._export()

    def _end_epoch(self) -> None:
        scores = self.evaluate_dev()
        epoch = self.step // self.plan.steps_per_epoch
        best = max((h["dev"]["f"] for h in self.history if "dev" in h), default=-1.0)
        record = {"step": self.step, "epoch": epoch, "dev": scores,
                  "elapsed_s": round(self.elapsed_before + time.perf_counter() - self._session_start, 1)}
        self._log(record)
        if scores["f"] > best:
            model = self.accelerator.unwrap_model(self.model, keep_fp32_wrapper=False)
            best_dir = self.run_dir / "best"
            tagger_model.save(model, self.base_folder, self.scheme.tags, best_dir,
                              extra={**self._feature_settings(), "training": {"epoch": epoch, "dev": scores}})
            self.gazetteer.to_disk(best_dir)
            logger.info("epoch %d: dev F1 %.2f (new best)", epoch, scores["f"])
        else:
            logger.info("epoch %d: dev F1 %.2f (best %.2f)", epoch, scores["f"], best)

    def _feature_settings(self) -> Dict[str, Any]:
        """What ``tagger.json`` must say for the pipe to build the same features."""
        return {"shapes": self.config.shapes, "styles": list(self.config.styles)}

    def _patience_spent(self) -> bool:
        scores = [h["dev"]["f"] for h in self.history if "dev" in h]
        if not scores:
            return False
        best_at = scores.index(max(scores))
        return len(scores) - 1 - best_at >= self.config.patience

    def _log(self, record: Dict[str, Any]) -> None:
        self.history.append(record)
        with (self.run_dir / "log.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")

    def _check_output(self) -> None:
        from spacy_sapbert.util.atomic import check_replaceable

        check_replaceable(self.output, is_ner_output, "an NER pipeline (no sapbert_ner/tagger.json, or it holds more "
                          "pipes than the NER: a whole pipeline)", "Choose a new or empty --output.")

    def _export(self) -> Dict[str, Any]:
        """The best epoch's model as a float16 pipeline folder at ``output``."""
        best_dir = self.run_dir / "best"
        model, _, settings = tagger_model.load(best_dir)
        record = {**asdict(self.config), **self.teacher_record, "history": [h for h in self.history if "dev" in h],
                  "best": settings.get("training"), "steps": self.step, "torch": torch.__version__}
        write_pipeline(model, best_dir, self.scheme.tags, self.gazetteer, self.output,
                       {**self._feature_settings(), "training": record})
        logger.info("NER pipeline written to %s (best dev F1 %s)", self.output, settings.get("training"))
        return {"interrupted": False, "step": self.step, "output": str(self.output), "best": settings.get("training")}
