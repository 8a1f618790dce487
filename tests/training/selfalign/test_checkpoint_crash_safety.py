"""Training checkpoints and the final model folder survive kill -9 at any moment.

The deterministic tests kill a child at an exact moment: while a checkpoint folder is being
deleted (which used to leave a half-deleted checkpoint that resume then picked), or while the
model folder is being written (which used to leave new weights beside the old settings). The
fault-injection test kills a training run that checkpoints after every step at every boundary
of its saves (:mod:`tests.fault_injection`), and resumes after each kill.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Set

import pytest
import torch
from safetensors.torch import load_file

from spacy_sapbert.training.common import checkpoint as ckpt

from tests.fault_injection import KillPoint, KillServer, boundaries

REPO = Path(__file__).resolve().parents[3]

# A tiny "model" and optimiser, and a helper that saves a checkpoint the way the trainer does.
SAVE_HELPERS = """
import torch
from spacy_sapbert.training.common import checkpoint as ckpt

def make(seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    return model, optimizer

def save(folder, step, seed, keep=5, world=1):
    model, optimizer = make(seed)
    ckpt.prepare_folder(folder, step)
    for rank in range(world):
        ckpt.save_rank_rng(folder, step, rank)
    kwargs = {"world": world} if world > 1 else {}
    return ckpt.save_main(folder, step, model, optimizer, {"step": step, "seed": seed}, keep=keep, **kwargs)
"""

# shutil.rmtree that removes one file of the folder and then kills the process: a kill -9 in
# the middle of deleting a folder whose path names ``target``.
KILL_DURING_RMTREE = """
import os, shutil, signal
from pathlib import Path
_rmtree = shutil.rmtree

def _dying_rmtree(path, *args, **kwargs):
    if TARGET in str(path):
        files = sorted(p for p in Path(path).rglob("*") if p.is_file())
        if files:
            files[0].unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return _rmtree(path, *args, **kwargs)

shutil.rmtree = _dying_rmtree
"""


def _helpers() -> Dict[str, object]:
    scope: Dict[str, object] = {}
    exec(SAVE_HELPERS, scope)  # the same helpers as the children's
    return scope


def _run_child(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), TQDM_DISABLE="1")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


def _assert_every_listed_checkpoint_loads(folder: Path) -> List[int]:
    """Every checkpoint that resume could pick restores without error; return their steps."""
    make = _helpers()["make"]
    steps = []
    for found in ckpt.list_checkpoints(folder):
        model, optimizer = make(0)
        rng = torch.get_rng_state()
        state = ckpt.load(found, model, optimizer, rank=0)
        torch.set_rng_state(rng)
        assert int(found.name[len(ckpt.PREFIX):]) == state["step"]
        steps.append(state["step"])
    return steps


def test_latest_checkpoint_skips_a_half_written_folder(tmp_path):
    save = _helpers()["save"]
    for step in (1, 2, 3):
        save(tmp_path, step, seed=step)
    (tmp_path / ckpt.checkpoint_name(3) / "model.safetensors").unlink()  # e.g. a copy or a disk that failed
    with open(tmp_path / ckpt.checkpoint_name(2) / "optimizer.safetensors", "r+b") as handle:
        handle.truncate(10)  # a power cut before the data reached the disk
    assert ckpt.latest_checkpoint(tmp_path).name == ckpt.checkpoint_name(1)
    assert _assert_every_listed_checkpoint_loads(tmp_path) == [1]


def test_kill_while_replacing_a_checkpoint_of_the_same_step_leaves_a_loadable_one(tmp_path):
    code = SAVE_HELPERS + f"""
save({str(tmp_path)!r}, 1, seed=1)
TARGET = {ckpt.checkpoint_name(1)!r}
""" + KILL_DURING_RMTREE + f"""
save({str(tmp_path)!r}, 1, seed=2)
raise SystemExit("not killed")
"""
    child = _run_child(code, tmp_path)
    assert child.returncode == -9, child.stderr
    assert _assert_every_listed_checkpoint_loads(tmp_path) == [1]


def test_kill_while_pruning_old_checkpoints_leaves_only_loadable_ones(tmp_path):
    code = SAVE_HELPERS + f"""
save({str(tmp_path)!r}, 1, seed=1, keep=2)
save({str(tmp_path)!r}, 2, seed=2, keep=2)
TARGET = {ckpt.checkpoint_name(1)!r}
""" + KILL_DURING_RMTREE + f"""
save({str(tmp_path)!r}, 3, seed=3, keep=2)
raise SystemExit("not killed")
"""
    child = _run_child(code, tmp_path)
    assert child.returncode == -9, child.stderr
    assert _assert_every_listed_checkpoint_loads(tmp_path) == [2, 3]
    # the next save clears what the killed one left behind
    _helpers()["save"](tmp_path, 4, seed=4, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ckpt.checkpoint_name(3), ckpt.checkpoint_name(4)]


def test_a_checkpoint_is_published_only_with_every_rank_rng_file(tmp_path):
    helpers = _helpers()
    model, optimizer = helpers["make"](0)
    ckpt.prepare_folder(tmp_path, 5)
    ckpt.save_rank_rng(tmp_path, 5, rank=0)  # rank 1's file never arrived
    with pytest.raises(RuntimeError, match="rng-rank1"):
        ckpt.save_main(tmp_path, 5, model, optimizer, {"step": 5}, world=2)
    assert ckpt.list_checkpoints(tmp_path) == []
    helpers["save"](tmp_path, 6, seed=6, world=2)
    assert {p.name for p in (tmp_path / ckpt.checkpoint_name(6)).iterdir()} >= {"rng-rank0.safetensors",
                                                                                "rng-rank1.safetensors"}


# -- the trainer ---------------------------------------------------------------------------------

def _tree(folder: Path) -> Dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def training_inputs(tmp_path_factory):
    from tests.conftest import write_tiny_bert
    from tests.training.selfalign.test_trainer import synthetic_kb
    from spacy_sapbert.training.selfalign.pairs import kb_header, kb_pairs, write_pairs

    folder = tmp_path_factory.mktemp("crash-training")
    kb = synthetic_kb()
    pairs = write_pairs(kb_pairs(kb, seed=0), folder / "pairs.tsv", kb_header(kb, "kb:synthetic", 0))
    return write_tiny_bert(folder / "bert"), pairs


TRAIN_SETUP = """
import logging, os, shutil, signal, sys
from spacy_sapbert.training.selfalign import trainer as trainer_mod
from spacy_sapbert.training.selfalign.config import TrainConfig
from spacy_sapbert.training.selfalign.trainer import Trainer, train

def config(**overrides):
    settings = dict(base_model=BERT, batch_size=8, lr=1e-3, max_steps=3, checkpoint_every=1, keep_checkpoints=2,
                    log_every=1000, seed=3, device="cpu", amp="no", num_threads=1)
    settings.update(overrides)
    return TrainConfig(**settings)
"""


def test_kill_while_writing_the_model_folder_leaves_the_earlier_model(training_inputs, tmp_path):
    bert, pairs = training_inputs
    out = tmp_path / "model"
    code = f"BERT, PAIRS = {str(bert)!r}, {str(pairs)!r}\n" + TRAIN_SETUP + f"""
train(config(max_steps=1), PAIRS, {str(out)!r}, {str(tmp_path / "run1")!r})
shutil.copytree({str(out)!r}, {str(tmp_path / "snapshot")!r})

def dying_settings(self, result):  # called once the weights and tokenizer are written
    os.kill(os.getpid(), signal.SIGKILL)

trainer_mod.Trainer.settings = dying_settings
train(config(max_steps=3, seed=4), PAIRS, {str(out)!r}, {str(tmp_path / "run2")!r})
raise SystemExit("not killed")
"""
    child = _run_child(code, tmp_path)
    assert child.returncode == -9, child.stderr[-3000:]
    assert _tree(out) == _tree(tmp_path / "snapshot")  # the earlier model, not a mix of two


STEPS = 3
"""Steps of the killed runs, a checkpoint after each (two kept): a first save with no checkpoint before
it, one with a checkpoint before it, and one that also prunes the oldest."""


@pytest.mark.slow
def test_training_killed_at_any_moment_resumes_from_the_newest_complete_checkpoint(training_inputs, tmp_path):
    """A run that checkpoints after every step, killed at every boundary of its saves; each
    time, the run resumed after the kill completes it.

    After every kill, each checkpoint that resume could pick loads, the newest never goes back
    in steps and never are all gone; the resumed run clears what the killed one left and ends
    with the same weights, bit for bit, as a run never killed; and training on from there
    equals a run that never checkpointed. The kills come from a fresh run and from a resumed
    run that finds a killed save's leftovers (a staging folder and a complete but unpublished
    temporary checkpoint), and fall before the first and the last of each kind of file-system
    call over the three steps (making the staging folder and writing the RNG file into it;
    making, filling and syncing the temporary checkpoint; publishing it; removing the staging
    folder; renaming the oldest checkpoint aside and deleting it; see
    :mod:`tests.fault_injection`) and as the run returns. The disk changes only at those
    calls, and the calls of one kind in between only repeat a state for another step or
    file, so these ~30 kills per start leave every kind of state that the 20 randomly timed
    kills of the earlier version could leave (most of those landed in the training between
    saves, which leaves the same state as a kill before the next save begins), without
    depending on timing, and in a fraction of the time: each run is a fork of one process that has
    loaded the trainer, not a new interpreter.
    """
    from spacy_sapbert.training.common.basemodel import load_base_model
    from spacy_sapbert.training.selfalign.config import TrainConfig
    from spacy_sapbert.training.selfalign.trainer import train

    bert, pairs = training_inputs
    run_dir = tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    settings = dict(base_model=str(bert), batch_size=8, lr=1e-3, checkpoint_every=1, keep_checkpoints=2,
                    log_every=1000, seed=3, device="cpu", amp="no", num_threads=1)
    setup = f"""
from spacy_sapbert.training.selfalign.config import TrainConfig
from spacy_sapbert.training.selfalign.trainer import Trainer
config = TrainConfig(max_steps={STEPS}, **{settings!r})
trainer = Trainer(config, {str(pairs)!r}, None, {str(run_dir)!r})
"""
    model, _, _ = load_base_model(bert)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)

    def newest_loadable() -> int:
        """The newest checkpoint's step (0: none), after loading every one that resume could pick."""
        rng = torch.get_rng_state()
        found = ckpt.list_checkpoints(checkpoints)
        for path in found:
            assert ckpt.load(path, model, optimizer, rank=0)["step"] == int(path.name[len(ckpt.PREFIX):])
        torch.set_rng_state(rng)
        return int(found[-1].name[len(ckpt.PREFIX):]) if found else 0

    def leftovers() -> Set[str]:
        return {p.name for p in checkpoints.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp")} \
            if checkpoints.is_dir() else set()

    def weights(step: int) -> Dict[str, torch.Tensor]:
        return load_file(str(checkpoints / ckpt.checkpoint_name(step) / "model.safetensors"))

    with KillServer(setup, "trainer.train(resume=True)", tmp_path, root=run_dir) as server:
        fresh_events = server.trace()  # a run never killed: its calls, and the weights every resumed run ends with
        reference = weights(STEPS)
        # a save killed after its temporary checkpoint was complete, before it was published
        stop = next(i for i, e in enumerate(fresh_events)
                    if e.call == "os.replace" and e.path == f"checkpoints/{ckpt.checkpoint_name(2)}")
        shutil.rmtree(run_dir)
        server.run(KillPoint(stop, "before", fresh_events[stop]))
        assert leftovers() and newest_loadable() == 1, leftovers()
        killed_save = tmp_path / "killed-save"
        shutil.copytree(run_dir, killed_save)

        starts = {"fresh": lambda: shutil.rmtree(run_dir, ignore_errors=True),
                  "after a killed save": lambda: (shutil.rmtree(run_dir), shutil.copytree(killed_save, run_dir))}
        seen = {"left temporary folders": 0, "three checkpoints (before pruning)": 0, "no checkpoint": 0}
        for start, prepare in starts.items():
            prepare()
            points = boundaries(server.trace())
            for point in points:
                prepare()
                before = newest_loadable()
                server.run(point)
                try:
                    newest = newest_loadable()
                    assert newest >= before, f"the newest checkpoint went back from {before} to {newest}"
                    assert newest or not before, "every checkpoint is gone"
                except AssertionError as err:
                    raise AssertionError(f"{start} run killed {point}: {err}") from err
                seen["left temporary folders"] += bool(leftovers())
                seen["three checkpoints (before pruning)"] += len(ckpt.list_checkpoints(checkpoints)) == 3
                seen["no checkpoint"] += newest == 0
                server.run()  # resumed: completes the run, and its first save clears what the killed one left
                names = sorted(p.name for p in checkpoints.iterdir())
                if newest < STEPS:
                    assert names == [ckpt.checkpoint_name(STEPS - 1), ckpt.checkpoint_name(STEPS)], (point, names)
                else:  # killed after publishing the last step: the resumed run has nothing to do (see the end)
                    assert newest_loadable() == STEPS, (point, names)
                got = weights(STEPS)
                assert got.keys() == reference.keys() and all(torch.equal(got[k], reference[k]) for k in got), \
                    f"{start} run killed {point}, then resumed: not the weights of a run never killed"
            assert len(points) >= 15, (start, points)
    assert all(seen.values()), seen

    threads = torch.get_num_threads()
    try:  # train on from the last resumed run, and compare with one that never checkpointed
        steps = STEPS + 2
        resumed = train(TrainConfig(**dict(settings, max_steps=steps)), pairs, tmp_path / "resumed", run_dir,
                        resume=True)
        straight = train(TrainConfig(**dict(settings, max_steps=steps, checkpoint_every=0)), pairs,
                         tmp_path / "straight", tmp_path / "run-straight")
    finally:
        torch.set_num_threads(threads)
    assert resumed.steps == straight.steps == steps and not resumed.interrupted
    a = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    b = load_file(str(tmp_path / "straight" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert sorted(p.name for p in checkpoints.iterdir()) == [ckpt.checkpoint_name(steps - 1),
                                                             ckpt.checkpoint_name(steps)]
