"""The self-alignment trainer on a tiny random BERT and a synthetic KB."""
from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from spacy_sapbert.util.devices import resolve_device
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.encoding.pooling import pool
from spacy_sapbert.training.common import hardware
from spacy_sapbert.training.common.basemodel import load_base_model
from spacy_sapbert.training.common.checkpoint import read_state
from spacy_sapbert.training.selfalign.config import TrainConfig
from spacy_sapbert.training.selfalign.loss import SelfAlignmentLoss, valid_triplets
from spacy_sapbert.training.selfalign.pairs import kb_header, kb_pairs, write_pairs
from spacy_sapbert.training.common.plan import BatchPlan
from spacy_sapbert.training.selfalign.trainer import Trainer, train

REPO = Path(__file__).resolve().parents[3]
WORDS = ["disease", "cancer", "tumor", "heart", "attack", "acid", "syndrome", "failure", "renal", "kidney",
         "breast", "infarction", "myocardial", "diabetes", "hydroxy", "chloroquine"]


def synthetic_kb(n_concepts: int = 12, names_per_concept: int = 4, seed: int = 0) -> KnowledgeBase:
    """Concepts whose synonyms share nothing systematic: only training can group them."""
    rng = random.Random(seed)
    used = set()
    concepts = []
    for i in range(n_concepts):
        names = []
        while len(names) < names_per_concept:
            name = " ".join(rng.sample(WORDS, 2) + [rng.choice("abcdefghijklmnopqrstuvwxyz0123456789")])
            if name not in used:
                used.add(name)
                names.append(name)
        concepts.append(Concept(f"D{i:06d}", names[0], names[1:]))
    return KnowledgeBase(concepts, name="synthetic")


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return synthetic_kb()


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory, kb) -> Path:
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    return write_pairs(kb_pairs(kb, seed=0), path, kb_header(kb, "kb:synthetic", 0))


def _config(tiny_bert: Path, **overrides) -> TrainConfig:
    settings = dict(base_model=str(tiny_bert), batch_size=12, lr=1e-3, max_steps=8, checkpoint_every=0,
                    log_every=2, seed=3, device="cpu", amp="no")
    settings.update(overrides)
    return TrainConfig(**settings)


def _synonym_gap(trainer: Trainer, kb: KnowledgeBase) -> float:
    """Mean cosine of synonym pairs minus mean cosine of names of different concepts."""
    names, labels = [], []
    for i, concept in enumerate(kb):
        for name in kb.normalized_names(concept):
            names.append(name)
            labels.append(i)
    trainer.model.eval()
    with torch.no_grad():
        vectors = torch.nn.functional.normalize(trainer.embed(names), dim=-1)
    sims = vectors @ vectors.T
    same = torch.tensor(labels)[:, None] == torch.tensor(labels)[None, :]
    off_diagonal = ~torch.eye(len(names), dtype=torch.bool)
    return float(sims[same & off_diagonal].mean() - sims[~same].mean())


def test_loss_falls_and_synonyms_move_closer(tiny_bert, kb, pairs_file, tmp_path):
    config = _config(tiny_bert, max_steps=40, batch_size=16, log_every=5, pooling="mean", lr=3e-3)
    trainer = Trainer(config, pairs_file, tmp_path / "model", tmp_path / "run")
    gap_before = _synonym_gap(trainer, kb)
    result = trainer.train()
    gap_after = _synonym_gap(trainer, kb)
    losses = [h["loss"] for h in result.history]
    assert result.steps == 40 and not result.interrupted
    assert sum(losses[-2:]) / 2 < 0.8 * sum(losses[:2]) / 2, losses
    assert gap_after > gap_before + 0.1, (gap_before, gap_after)
    assert gap_after > 0.2
    assert all(0.0 <= h["mined_fraction"] <= 1.0 for h in result.history)
    # the output is an HF folder an encoder can load, with the settings and fingerprints
    from spacy_sapbert.encoding.encoder import Encoder

    settings = json.loads((tmp_path / "model" / "sapbert.json").read_text())
    assert settings["pooling"] == "mean" and settings["max_length"] == 25
    assert settings["training"]["kb_fingerprint"] == kb.fingerprint()
    assert settings["training"]["pairs_fingerprint"] and settings["training"]["steps"] == 40
    assert (tmp_path / "model" / "model.safetensors").is_file()
    assert not list((tmp_path / "model").glob("*.bin"))
    encoder = Encoder(tmp_path / "model", device="cpu", dtype="float32")
    assert encoder.pooling == "mean" and encoder.max_length == 25
    names = ["heart attack x", "renal failure 1"]
    with torch.no_grad():
        expected = torch.nn.functional.normalize(trainer.embed(names), dim=-1).numpy()
    assert abs(encoder.encode(names) - expected).max() < 1e-5
    assert (tmp_path / "run" / "log.jsonl").read_text().count("\n") == len(result.history)


def test_fixed_output_norm_makes_dot_rank_as_cosine(tiny_bert, kb, pairs_file, tmp_path):
    """With the last LayerNorm pinned, every [CLS] vector has length sqrt(hidden): a raw inner
    product (SapBERT's eval) is cosine times a constant, after training and once saved."""
    from transformers import AutoModel, AutoTokenizer

    base = AutoModel.from_pretrained(tiny_bert)
    with torch.no_grad():  # a base model whose last LayerNorm is not the identity, as trained ones are
        base.encoder.layer[-1].output.LayerNorm.weight.uniform_(0.5, 1.5)
        base.encoder.layer[-1].output.LayerNorm.bias.uniform_(-0.2, 0.2)
    base.save_pretrained(tmp_path / "base")
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(tmp_path / "base")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "base")
    names = [n for concept in kb for n in kb.normalized_names(concept)]
    batch = tokenizer(names, padding=True, return_tensors="pt")
    with torch.no_grad():
        free_norms = base.eval()(**batch).last_hidden_state[:, 0].norm(dim=-1)
    assert float(free_norms.std()) > 1e-3  # lengths vary without the option

    config = _config(tiny_bert, base_model=str(tmp_path / "base"), max_steps=6, batch_size=16, pooling="cls",
                     lr=3e-3, fixed_output_norm=True)
    Trainer(config, pairs_file, tmp_path / "model", tmp_path / "run").train()
    model = AutoModel.from_pretrained(tmp_path / "model").eval()
    with torch.no_grad():
        norms = model(**batch).last_hidden_state[:, 0].norm(dim=-1)
    assert torch.allclose(norms, torch.full_like(norms, model.config.hidden_size ** 0.5), rtol=1e-4)
    norm = model.encoder.layer[-1].output.LayerNorm
    assert torch.equal(norm.weight, torch.ones_like(norm.weight)) and torch.equal(norm.bias, torch.zeros_like(norm.bias))
    settings = json.loads((tmp_path / "model" / "sapbert.json").read_text())
    assert settings["training"]["fixed_output_norm"] is True


def test_freeze_embeddings_keeps_the_word_piece_table(tiny_bert, pairs_file, tmp_path):
    """The NER of the embedded default reads its linker encoder's word-piece table: an encoder trained
    further with the table frozen leaves it equal to the base model's while the layers learn."""
    from transformers import AutoModel

    base = AutoModel.from_pretrained(tiny_bert)
    config = _config(tiny_bert, max_steps=4, batch_size=16, pooling="mean", lr=3e-3, freeze_embeddings=True)
    Trainer(config, pairs_file, tmp_path / "model", tmp_path / "run").train()
    trained = AutoModel.from_pretrained(tmp_path / "model")
    assert torch.equal(trained.get_input_embeddings().weight, base.get_input_embeddings().weight)
    assert not torch.equal(trained.encoder.layer[0].attention.self.query.weight,
                           base.encoder.layer[0].attention.self.query.weight)
    settings = json.loads((tmp_path / "model" / "sapbert.json").read_text())
    assert settings["training"]["freeze_embeddings"] is True


def test_freeze_embeddings_enters_the_resume_identity_only_when_on():
    """Checkpoints written before the setting existed record no such key: they stay resumable."""
    from spacy_sapbert.training.selfalign.config import resume_identity

    assert "freeze_embeddings" not in resume_identity(TrainConfig(), "pairs", 1, 10)
    assert resume_identity(TrainConfig(freeze_embeddings=True), "pairs", 1, 10)["freeze_embeddings"] is True


def test_bf16_autocast_on_cpu_trains(tiny_bert, kb, pairs_file, tmp_path, monkeypatch, request):
    # forced on, so the bf16 path runs on CPUs without AMX too (emulated there, slower)
    from accelerate.state import AcceleratorState

    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    AcceleratorState._reset_state(True)  # the process's accelerate state was set up without bf16
    request.addfinalizer(lambda: AcceleratorState._reset_state(True))
    config = _config(tiny_bert, max_steps=40, batch_size=16, log_every=5, pooling="mean", lr=3e-3, amp="bf16")
    trainer = Trainer(config, pairs_file, tmp_path / "model", tmp_path / "run")
    assert trainer.accelerator.mixed_precision == "bf16"
    gap_before = _synonym_gap(trainer, kb)
    result = trainer.train()
    losses = [h["loss"] for h in result.history]
    assert sum(losses[-2:]) / 2 < 0.8 * sum(losses[:2]) / 2, losses
    assert _synonym_gap(trainer, kb) > gap_before + 0.1
    # the saved weights are fp32 (autocast only changes the compute)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model" / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float32}


def test_resume_after_interrupt_equals_uninterrupted_run(tiny_bert, pairs_file, tmp_path):
    # dropout on, gradient accumulation, warm-up + linear decay and clipping: all must resume exactly
    settings = dict(max_steps=7, grad_accum=2, batch_size=8, warmup_steps=2, schedule="linear", max_grad_norm=1.0,
                    checkpoint_every=3, log_every=1)
    full = train(_config(tiny_bert, **settings), pairs_file, tmp_path / "full", tmp_path / "run-full")

    def interrupt_at_step_5(trainer: Trainer) -> None:
        if trainer.step == 5:
            os.kill(os.getpid(), signal.SIGINT)  # the real Ctrl-C path

    first = train(_config(tiny_bert, **settings), pairs_file, tmp_path / "resumed", tmp_path / "run-resumed",
                  on_step=interrupt_at_step_5)
    assert first.interrupted and first.steps == 5 and first.output is None
    assert first.checkpoint is not None and first.checkpoint.name == "step-0000005"
    second = train(_config(tiny_bert, **settings), pairs_file, tmp_path / "resumed", tmp_path / "run-resumed",
                   resume=True)
    assert second.steps == 7 and not second.interrupted
    a = load_file(str(tmp_path / "full" / "model.safetensors"))
    b = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert [h["loss"] for h in full.history] == [h["loss"] for h in second.history]
    # and the model did change
    base = load_file(str(tiny_bert / "model.safetensors"))
    assert not torch.equal(base["encoder.layer.0.attention.self.query.weight"],
                           a["encoder.layer.0.attention.self.query.weight"])


def test_resume_refuses_changed_settings_and_fresh_run_refuses_old_checkpoints(tiny_bert, pairs_file, tmp_path):
    train(_config(tiny_bert, max_steps=2, checkpoint_every=1), pairs_file, None, tmp_path / "run")
    with pytest.raises(InputError, match="lr"):
        train(_config(tiny_bert, max_steps=4, lr=5e-4), pairs_file, None, tmp_path / "run", resume=True)
    with pytest.raises(InputError, match="--resume"):
        train(_config(tiny_bert, max_steps=4), pairs_file, None, tmp_path / "run")


def test_stopped_run_is_exported_by_resuming_with_its_step_count(tiny_bert, pairs_file, tmp_path):
    def stop_at_2(trainer: Trainer) -> None:
        if trainer.step == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # `kill`: also checkpoints

    first = train(_config(tiny_bert, max_steps=50), pairs_file, tmp_path / "model", tmp_path / "run", on_step=stop_at_2)
    assert first.interrupted and first.steps == 2 and not (tmp_path / "model").exists()
    done = train(_config(tiny_bert, max_steps=2), pairs_file, tmp_path / "model", tmp_path / "run", resume=True)
    assert done.steps == 2 and not done.interrupted
    # the cost of the run (as recorded at its checkpoint), not only that of the export
    assert done.wall_time_s >= read_state(first.checkpoint)["elapsed_s"] > 0
    exported = load_file(str(tmp_path / "model" / "model.safetensors"))
    saved = load_file(str(first.checkpoint / "model.safetensors"))
    assert all(torch.equal(exported[k], saved[k]) for k in saved)


def test_two_cpu_processes_through_accelerate(tiny_bert, pairs_file, tmp_path):
    out = tmp_path / "model"
    # `accelerate launch --cpu` starts one process unless mpirun is configured; its torchrun-based
    # launcher (--multi_gpu) starts two, and Accelerator(cpu=True) then joins them over gloo.
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "29517",
           "-m", "spacy_sapbert.training.selfalign.cli", "pretrain", str(pairs_file), "--output", str(out),
           "--run-dir", str(tmp_path / "run"), "--base-model", str(tiny_bert), "--batch-size", "6",
           "--max-steps", "3", "--checkpoint-every", "2", "--lr", "1e-3", "--num-threads", "1",
           "--device", "cpu"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    settings = json.loads((out / "sapbert.json").read_text())
    assert settings["training"]["processes"] == 2
    assert settings["training"]["pairs_per_step"] == 12 and settings["training"]["steps"] == 3
    checkpoint = tmp_path / "run" / "checkpoints" / "step-0000003"
    assert {p.name for p in checkpoint.iterdir()} >= {"rng-rank0.safetensors", "rng-rank1.safetensors",
                                                      "model.safetensors", "optimizer.safetensors"}


def test_gpu_requested_where_none_exists(monkeypatch, tiny_bert, pairs_file, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(InputError, match="device"):
        Trainer(_config(tiny_bert, device="cuda:0"), pairs_file, None, tmp_path / "run")
    assert resolve_device("auto") == "cpu"
    with pytest.raises(InputError, match="unknown device"):
        resolve_device("tpu")


def test_one_device_rule_for_component_encoder_and_trainer(monkeypatch, tiny_bert, pairs_file, tmp_path):
    """The spaCy component accepts mps, so the Encoder and the trainer do too: all three follow
    spacy_sapbert.util.devices.resolve_device, and a device torch lacks is the same error on both sides."""
    from spacy_sapbert.pipes.linker import SettingError, check_setting
    from spacy_sapbert.encoding.encoder import Encoder

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(InputError, match="'mps' requested but .* no usable MPS") as encoder_error:
        Encoder(tiny_bert, device="mps")
    with pytest.raises(InputError, match="'mps' requested but .* no usable MPS") as trainer_error:
        Trainer(_config(tiny_bert, device="mps"), pairs_file, None, tmp_path / "run")
    assert str(encoder_error.value) == str(trainer_error.value)

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for device in ("auto", "cpu", "CPU", "cuda", "cuda:1", "mps", "MPS", "gpu", "tpu", "cuda:x", "cuda1"):
        try:
            check_setting("device", device)
            component_accepts = True
        except SettingError:
            component_accepts = False
        try:
            resolve_device(device)
            known = True
        except InputError as err:
            assert "unknown device" in str(err), err
            known = False
        assert component_accepts == known, device
    assert resolve_device("MPS") == "mps" and hardware.resolve_amp("auto", "mps") == "no"


def test_non_encoder_base_model_is_refused(tmp_path):
    from transformers import GPT2Config, GPT2Model

    folder = tmp_path / "gpt2"
    GPT2Model(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=32)).save_pretrained(folder)
    with pytest.raises(InputError, match="not a bidirectional encoder"):
        load_base_model(folder)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no config.json"):
        load_base_model(tmp_path / "empty")


def test_empty_batch_and_too_few_pairs(tiny_bert, pairs_file, tmp_path):
    trainer = Trainer(_config(tiny_bert), pairs_file, None, tmp_path / "run")
    with pytest.raises(ValueError, match="empty batch"):
        trainer.batch_loss([])
    with pytest.raises(ValueError, match="empty batch"):
        SelfAlignmentLoss(trainer.config)(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long))
    small = write_pairs(kb_pairs(synthetic_kb(2, 2)), tmp_path / "small.tsv")
    with pytest.raises(InputError, match="fewer than one optimiser step"):
        Trainer(_config(tiny_bert, batch_size=16), small, None, tmp_path / "run2")


def test_batch_without_negatives_gives_zero_loss_not_nan(tiny_bert, pairs_file, tmp_path):
    loss_fn = SelfAlignmentLoss(_config(tiny_bert))
    embeddings = torch.randn(6, 8, requires_grad=True)
    loss, mined = loss_fn(embeddings, torch.zeros(6, dtype=torch.long))
    assert float(loss.detach()) == 0.0 and mined == 0.0
    loss.backward()  # still a valid graph


def test_bad_settings_are_input_errors(tiny_bert, pairs_file, tmp_path):
    for bad in (dict(pooling="max"), dict(batch_size=1), dict(schedule="cosine"), dict(amp="fp8")):
        with pytest.raises(InputError):
            Trainer(_config(tiny_bert, **bad), pairs_file, None, tmp_path / "run")


def test_batch_plan_partitions_each_epoch():
    plan = BatchPlan(n_pairs=50, batch_size=4, grad_accum=2, world=3, seed=1)
    assert plan.steps_per_epoch == 2  # 24 pairs per step; 2 left over
    seen = [i for step in range(2) for micro in range(2) for rank in range(3) for i in plan.indices(step, micro, rank)]
    assert len(seen) == len(set(seen)) == 48
    assert plan.indices(2, 0, 0) != plan.indices(0, 0, 0)  # a new epoch, a new order
    assert BatchPlan(50, 4, 2, 3, 1).indices(3, 1, 2) == plan.indices(3, 1, 2)


def test_valid_triplets_matches_brute_force():
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 0, 3])
    brute = sum(1 for a, p, n in itertools.permutations(range(len(labels)), 3)
                if labels[a] == labels[p] and labels[a] != labels[n])
    assert valid_triplets(labels) == brute


def test_mean_pooling_ignores_padding():
    hidden = torch.tensor([[[1.0, 1.0], [3.0, 3.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert torch.equal(pool(hidden, mask, "mean"), torch.tensor([[2.0, 2.0]]))
    assert torch.equal(pool(hidden, mask, "cls"), torch.tensor([[1.0, 1.0]]))


def test_cpu_mixed_precision_is_bf16_only_where_native(monkeypatch):
    modes = ("auto", "bf16", "fp16", "no")
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    monkeypatch.setattr(hardware, "cpu_prefers_bf16", lambda: False)
    assert [hardware.resolve_amp(a, "cpu") for a in modes] == ["no"] * 4
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)  # an Intel CPU without AMX: auto stays off
    assert [hardware.resolve_amp(a, "cpu") for a in modes] == ["no", "bf16", "no", "no"]
    monkeypatch.setattr(hardware, "cpu_prefers_bf16", lambda: True)
    assert [hardware.resolve_amp(a, "cpu") for a in modes] == ["bf16", "bf16", "no", "no"]


def ckpt_folders(run):
    folder = run / "checkpoints"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_model_output_that_is_not_an_earlier_model_is_refused_and_kept(tiny_bert, pairs_file, tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError) as refused:
        train(_config(tiny_bert, max_steps=2), pairs_file, out, tmp_path / "run")
    message = str(refused.value)
    assert message.startswith(f"{out}: ") and "notes.txt" in message and "Choose a new or empty --output" in message
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert not ckpt_folders(tmp_path / "run")  # refused before training, not after
    done = train(_config(tiny_bert, max_steps=2), pairs_file, tmp_path / "other", tmp_path / "run")
    assert done.steps == 2 and (done.output / "model.safetensors").is_file()
    weights = (done.output / "model.safetensors").read_bytes()  # the model a run starts from is never its output
    with pytest.raises(InputError, match="starts from"):
        train(_config(tiny_bert, base_model=str(tmp_path / "other"), max_steps=2), pairs_file, tmp_path / "other",
              tmp_path / "run-from-other")
    assert (done.output / "model.safetensors").read_bytes() == weights
    # an earlier model of the trainer is replaced whole, with no temporary folder left beside it
    (tmp_path / "other" / "pytorch_model.bin").write_text("stale weights of an older run")
    train(_config(tiny_bert, max_steps=2), pairs_file, tmp_path / "other", tmp_path / "run", resume=True)
    assert not (tmp_path / "other" / "pytorch_model.bin").exists()
    assert json.loads((tmp_path / "other" / "sapbert.json").read_text())["training"]["steps"] == 2
    (tmp_path / "made-by-mkdir").mkdir()  # as readable as any new folder, not private like a temporary one
    mode = (tmp_path / "made-by-mkdir").stat().st_mode & 0o7777
    (tmp_path / "made-by-mkdir").rmdir()
    assert (tmp_path / "other").stat().st_mode & 0o7777 == mode
    assert all(p.stat().st_mode & 0o7777 == mode for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("schedule, expected", [
    ("constant", [0.0, 0.5, 1.0, 1.0, 1.0, 1.0]),
    ("linear", [0.0, 0.5, 1.0, 0.75, 0.5, 0.25]),
])
def test_schedules_are_transformers_warmup_schedules(schedule, expected):
    from spacy_sapbert.training.common.schedule import make_scheduler

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = make_scheduler(optimizer, TrainConfig(schedule=schedule, warmup_steps=2), total_steps=6)
    rates = []
    for _ in range(6):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates == expected
    assert json.loads(json.dumps(scheduler.state_dict()))  # a checkpoint stores it as JSON


def test_cli_options_left_unset_take_the_train_config_defaults(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.training.selfalign import cli
    from spacy_sapbert.training.selfalign import trainer as trainer_module

    seen = {}

    def fake_train(config, pairs, output, run_dir, resume=False):
        seen.update(config=config, run_dir=run_dir)
        raise InputError("stop here", pairs)

    monkeypatch.setattr(trainer_module, "train", fake_train)
    app = typer_app(cli)
    result = CliRunner().invoke(app, ["pretrain", str(tmp_path / "p.tsv"), "-o", str(tmp_path / "m"), "--lr", "1e-3"])
    assert result.exit_code == 2 and "error: " in result.output and "stop here" in result.output
    assert seen["config"] == TrainConfig(lr=1e-3)  # every other setting: TrainConfig's default
    assert seen["run_dir"] == Path("training_runs") / "m"
    result = CliRunner().invoke(app, ["finetune", str(tmp_path / "p.tsv"), "-o", str(tmp_path / "m")])
    assert result.exit_code == 2 and "--base-model" in result.output  # required for fine-tuning


def typer_app(cli_module):
    import typer

    app = typer.Typer()
    cli_module.register(app)
    return app
