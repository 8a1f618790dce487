"""scripts/encoder_probe.py --by-wording: a mention whose text is a KB name counts apart from the others."""
import json
import subprocess
import sys
from pathlib import Path

from spacy_sapbert.default import DEFAULT_PIPELINE
from tests.minilm_kb import minilm_kb

ROOT = Path(__file__).resolve().parents[2]


def test_seen_and_unseen_wordings_are_counted_apart(tmp_path):
    kb_file = minilm_kb().to_jsonl(tmp_path / "kb.jsonl")
    text = "breast cancer and cancer of the breast; heart attack"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"1|t|{text}\n1|a|\n"
                      "1\t0\t13\tbreast cancer\tDisease\tD001943\n"
                      "1\t18\t38\tcancer of the breast\tDisease\tD001943\n"
                      "1\t40\t52\theart attack\tDisease\tD009203\n\n", encoding="utf-8")
    encoder = Path(DEFAULT_PIPELINE) / "sapbert_linker" / "encoder"
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "encoder_probe.py"), str(encoder), str(tmp_path / "index"),
                          str(corpus), "--kb", str(kb_file), "--by-wording"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["counts"] == {"Disease seen": 2, "Disease unseen": 1}
    assert row["Disease seen"] == 100.0  # a KB name is answered by its own stored vector
    assert (tmp_path / "index").is_dir()  # built once, then loaded
    again = subprocess.run([sys.executable, str(ROOT / "scripts" / "encoder_probe.py"), str(encoder),
                            str(tmp_path / "index"), str(corpus), "--kb", str(kb_file)],
                           capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(again.stdout.strip().splitlines()[-1])["counts"] == {"Disease": 3}
