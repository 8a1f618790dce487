"""The trained model folder: a Hugging Face folder the linker loads, with ``sapbert.json`` saying how it was made
and sentence-transformers' module files, so that ``SentenceTransformer(folder)`` encodes as the linker does.

The folder is written whole or not at all (built in a temporary sibling and swapped in), and
only over a missing or empty folder or an earlier model of the trainer, so an ``--output``
that points at something else is never destroyed.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

from spacy_sapbert.util.atomic import atomic_dir, check_replaceable, remove_stale_temps
from spacy_sapbert.encoding.modelfiles import SETTINGS_FILE
from spacy_sapbert.encoding.st_files import write_sentence_transformers_files

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]


def is_model_output(folder: Path) -> bool:
    """A folder the trainer wrote: its sapbert.json records the training run."""
    try:
        settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(settings, dict) and isinstance(settings.get("training"), dict)


def check_output(folder: PathLike, trained_checkpoint: Optional[Path] = None, starts_from: Optional[str] = None
                 ) -> None:
    """Refuse to replace a folder this trainer did not write: a missing or empty folder, or an earlier
    model (``sapbert.json`` with its training record), is replaced whole; anything else is kept. Never the
    model the run ``starts_from`` (its ``--base-model`` resolved to a folder, when it is one here), which it reads.

    ``trained_checkpoint``: None before training (nothing is lost yet); after training, where the
    trained model is, so that the error says how to export it anyway."""
    if trained_checkpoint is None:
        remedy = "Choose a new or empty --output"
    else:  # the folder changed while training ran
        remedy = (f"The trained model is in the checkpoint {trained_checkpoint}: run again "
                  f"with --resume and a new or empty --output to export it")
    check_replaceable(folder, is_model_output, f"a model written by this trainer (no {SETTINGS_FILE} with a "
                      f"training record)", remedy, reads={"the model this run starts from (--base-model)": starts_from})


def save_model(folder: Path, accelerator: Any, model: Any, tokenizer: Any,
               settings: Callable[[], Dict[str, Any]]) -> None:
    """An HF folder (config, model.safetensors, tokenizer) + sapbert.json + sentence-transformers' module
    files (``modules.json``, ``1_Pooling``, ...: :mod:`spacy_sapbert.encoding.st_files`), written
    by the main process.

    ``settings`` is called once the weights and tokenizer are in the temporary folder; a kill at
    any moment leaves the earlier model or the new one. Every process must call this."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        remove_stale_temps(folder.parent, folder.name)
        with atomic_dir(folder) as tmp:
            unwrapped = accelerator.unwrap_model(model)
            unwrapped.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            recorded = settings()
            (tmp / SETTINGS_FILE).write_text(json.dumps(recorded, indent=2, default=str), encoding="utf-8")
            # SentenceTransformer(folder) then encodes as the linker's Encoder does
            write_sentence_transformers_files(tmp, recorded["pooling"], recorded["max_length"],
                                              unwrapped.config.hidden_size)
        logger.info("model saved to %s", folder)
    accelerator.wait_for_everyone()
