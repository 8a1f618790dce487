"""One evaluation run: several systems × datasets × dictionary modes, one JSON per result.

Systems are built once and reused across datasets (a dense model's name vectors are
cached, scispaCy's index is rebuilt only when the dictionary changes); the KB-alone
dictionaries come first because three of the four datasets share MEDIC, so that
dictionary is indexed once. Each result is written as soon as it is measured, so a run
that stops half-way keeps what it measured; the run summary (command, wall time,
machine) is written at the end.

A model argument may be ``LABEL=MODEL``, may end in ``@cls``/``@mean`` (pooling; else the
model folder's own setting), and MODEL may hold ``{dataset}`` (``ncbi-test``), ``{family}``
(``ncbi``, ``bc5cdr-disease``, ``bc5cdr-chemical``) or ``{corpus}`` (``ncbi``, ``bc5cdr``), so
a per-corpus fine-tuned model is one argument: ``"ours, fine-tuned=models/sapbert-{corpus}"``.
"""
from __future__ import annotations

import json
import logging
import os
import platform
import re
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from spacy_sapbert.default import DEFAULT_MODEL
from spacy_sapbert.encoding.encoder import MINILM_ALIASES
from spacy_sapbert.errors import InputError

from .accuracy import evaluate
from .baselines import BASELINES, make_system
from .context_systems import DEFAULT_GENERATIVE_WEIGHT, parse_spec, spec_models
from .datasets import DATASETS, EvalSet, Loader
from .systems import LinkingSystem

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]


@dataclass(frozen=True)
class SystemSpec:
    """What the user asked for: an optional label and a model/baseline, maybe templated."""

    label: Optional[str]
    model: str
    pooling: Optional[str] = None

    @classmethod
    def parse(cls, text: str) -> "SystemSpec":
        """``[LABEL=]MODEL[@cls|@mean]``."""
        label: Optional[str] = None
        model = text.strip()
        head, sep, tail = model.partition("=")
        if sep and head.strip() and tail.strip() and not Path(model).exists():
            label, model = head.strip(), tail.strip()
        pooling = None
        for option in ("cls", "mean"):
            if model.endswith("@" + option):
                model, pooling = model[: -len(option) - 1], option
        return cls(label, model, pooling)

    def resolve(self, dataset: str) -> str:
        return self.model.format(dataset=dataset, family=dataset_family(dataset), corpus=dataset.split("-")[0])


def dataset_family(name: str) -> str:
    """``ncbi-test`` → ``ncbi``; ``bc5cdr-disease-dev`` → ``bc5cdr-disease``: what a fine-tuned model is for."""
    return re.sub(r"-(dev|test|train)$", "", name)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "system"


def result_path(output_dir: PathLike, result: Dict[str, Any]) -> Path:
    mode = "kb-only" if result["dictionary"] == "kb" else "kb-train"
    return Path(output_dir) / f"{result['dataset']}__{mode}__{slug(result['system'])}.json"


def _available(spec: str) -> bool:
    """Baselines, the packaged MiniLM, the embedded default or existing folders (hub names count as missing)."""
    return all(m.lower() in BASELINES or m.lower() in MINILM_ALIASES or m == DEFAULT_MODEL or Path(m).exists()
               for m in spec_models(spec))


class Suite:
    """Runs every (system, mode, dataset) and writes the results."""

    def __init__(self, datasets: Sequence[str], systems: Sequence[str], modes: Sequence[str],
                 assets_dir: PathLike = "assets", kbs_dir: PathLike = "kbs", output_dir: Optional[PathLike] = None,
                 pooling: Optional[str] = None, device: str = "auto", batch_size: int = 256,
                 skip_missing: bool = False, expand_abbreviations: bool = True,
                 predictions_dir: Optional[PathLike] = None, custom: Optional[Dict[str, Any]] = None,
                 precision: str = "float32", generative_weight: float = DEFAULT_GENERATIVE_WEIGHT) -> None:
        for name in datasets:
            if name not in DATASETS and not (custom and name == custom.get("name")):
                raise InputError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}", field="dataset")
        for mode in modes:
            if mode not in ("kb", "kb+train"):
                raise InputError(f"unknown dictionary mode {mode!r}", field="mode")
        self.datasets = list(datasets)
        self.specs = [SystemSpec.parse(s) for s in systems]
        self.modes = list(modes)
        self.assets_dir, self.kbs_dir = Path(assets_dir), Path(kbs_dir)
        self.output_dir = Path(output_dir) if output_dir else None
        self.pooling, self.device, self.batch_size, self.precision = pooling, device, batch_size, precision
        self.generative_weight = generative_weight
        self.skip_missing = skip_missing
        self.predictions_dir = Path(predictions_dir) if predictions_dir else None
        self.custom = custom
        self.loader = Loader(expand_abbreviations=expand_abbreviations)
        self.skipped: List[Dict[str, str]] = []

    def eval_set(self, dataset: str, mode: str) -> EvalSet:
        kb_only = mode == "kb"
        if self.custom and dataset == self.custom["name"]:
            c = self.custom
            return self.loader.eval_set(dataset, c["eval_file"], c["train_files"], c["kb_file"], c.get("types"),
                                        kb_only)
        return self.loader.dataset(dataset, self.assets_dir, self.kbs_dir, kb_only)

    def jobs(self) -> Iterator[Tuple[SystemSpec, str, str]]:
        # KB-alone first: datasets sharing a KB then share one prepared dictionary.
        for spec in self.specs:
            for mode in sorted(self.modes, key=lambda m: m != "kb"):
                for dataset in self.datasets:
                    yield spec, mode, dataset

    def run(self) -> List[Dict[str, Any]]:
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        started = time.perf_counter()
        results: List[Dict[str, Any]] = []
        systems: Dict[str, LinkingSystem] = {}
        current_spec: Optional[SystemSpec] = None
        for spec, mode, dataset in self.jobs():
            if spec != current_spec:
                systems.clear()  # free the previous system's model and indexes
                current_spec = spec
            model = spec.resolve(dataset)
            if self.skip_missing and not _available(model):
                if not any(s["model"] == model for s in self.skipped):
                    logger.warning("skipping %s: %s does not exist (yet)", spec.label or spec.model, model)
                    self.skipped.append({"system": spec.label or spec.model, "model": model})
                continue
            system = systems.get(model)
            if system is None:
                parsed = parse_spec(model)
                no_pooling = model.lower() in BASELINES or (parsed is not None and parsed[0] is None)
                pooling = None if no_pooling else (spec.pooling or self.pooling)
                system = make_system(model, pooling=pooling, device=self.device, batch_size=self.batch_size,
                                     label=spec.label, precision=self.precision,
                                     generative_weight=self.generative_weight)
                systems[model] = system
            eval_set = self.eval_set(dataset, mode)
            predictions = None
            if self.predictions_dir is not None:
                tag = "kb-only" if mode == "kb" else "kb-train"
                predictions = self.predictions_dir / f"{dataset}__{tag}__{slug(system.name)}.jsonl"
            result = evaluate(system, eval_set, predictions=predictions)
            result["system_spec"] = {"label": spec.label, "model": spec.model, "resolved": model,
                                     "order": self.specs.index(spec)}
            result["run_started"] = started_at
            results.append(result)
            if self.output_dir is not None:
                path = result_path(self.output_dir, result)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        summary = self.summary(started_at, time.perf_counter() - started, results)
        if self.output_dir is not None:
            runs = self.output_dir / "runs"
            runs.mkdir(parents=True, exist_ok=True)
            name = started_at.replace(":", "").replace("+0000", "Z").replace("+00:00", "Z")
            (runs / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
        logger.info("evaluation run: %d results in %.0f s", len(results), summary["wall_seconds"])
        return results

    def summary(self, started_at: str, seconds: float, results: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
        return {
            "started": started_at,
            "wall_seconds": round(seconds, 1),
            # `sapbert …` and `python -m spacy_sapbert.cli …` are the same command
            "command": " ".join(["sapbert"] + [shlex.quote(a) for a in sys.argv[1:]]),
            "datasets": self.datasets, "modes": self.modes,
            "systems": [{"label": s.label, "model": s.model, "pooling": s.pooling} for s in self.specs],
            "skipped": self.skipped,
            "results": len(results),
            "machine": {"python": platform.python_version(), "platform": platform.platform(),
                        "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                        else os.cpu_count(), "nice": os.nice(0) if hasattr(os, "nice") else None},
        }
