"""The project KBs, the asset step and the `sapbert kb` commands."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_sapbert.cli import app
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.sources import assets as kb_assets
from spacy_sapbert.kb.sources import build
from spacy_sapbert.training.corpora import read_pubtator

REPO = Path(__file__).resolve().parents[3]


def _fetch_assets_module():
    """scripts/fetch_assets.py is a script, not a package module: load it by path."""
    if "fetch_assets" in sys.modules:
        return sys.modules["fetch_assets"]
    spec = importlib.util.spec_from_file_location("fetch_assets", REPO / "scripts" / "fetch_assets.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fetch_assets"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def medic_assets(tmp_path_factory, mirror: Path) -> Path:
    fetch = _fetch_assets_module()
    dest = tmp_path_factory.mktemp("assets")
    fetch.fetch_assets(dest, mirror, only=["vocab/medic", "vocab/CTD", "corpora/ncbi-disease", "corpora/bc5cdr"])
    return dest


def test_medic_kb_from_the_mirror_covers_every_gold_disease_id(medic_assets: Path) -> None:
    kb, report = build.build_kb("medic", medic_assets, show_progress=False)
    assert report.kb.concepts == len(kb) > 11_914  # MEDIC 2012 plus the CTD 2017 concepts it lacks
    assert kb.resolve("OMIM:613097").concept_id == "C567755|OMIM:613097"
    gold = {(m.type, i) for name in ("ncbi-disease/NCBItestset_corpus.txt", "bc5cdr/CDR_DevelopmentSet.PubTator.txt")
            for doc in read_pubtator(medic_assets / "corpora" / name) for m in doc.mentions for i in m.ids}
    diseases = {i for kind, i in gold if kind != "Chemical"}
    assert len(diseases) > 500 and all(kb.resolve(i) is not None for i in diseases)
    assert [s.source for s in report.sources] == ["medic-2012", "medic-ctd-2017"]


def test_build_reads_only_files_the_asset_step_provides() -> None:
    dests = {a.dest for a in _fetch_assets_module().MANIFEST}
    read = [kb_assets.MEDIC_2012, kb_assets.CTD_DISEASES, kb_assets.MESH_TERMS, kb_assets.MESH_TREES,
            kb_assets.DOID, kb_assets.ORDO, kb_assets.NCIT, kb_assets.HPO] + [
        kb_assets.MONDO_TABLE.format(t) for t in kb_assets.MONDO_TABLES]
    assert set(read) <= dests
    assert any(d in dests for d in kb_assets.MESH_DESCRIPTOR_XML)  # what stands in for the mirror-only MeSH TSVs


def test_missing_assets_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="assets folder not found"):
        build.build_kb("medic", tmp_path / "nowhere", show_progress=False)
    with pytest.raises(InputError, match="asset missing: vocab/medic-2012-07-06.txt"):
        build.build_kb("medic", tmp_path, show_progress=False)
    with pytest.raises(ValueError, match="unknown knowledge base"):
        build.build_kb("umls", tmp_path, show_progress=False)


def test_fetch_assets_copies_and_falls_back(tmp_path: Path, monkeypatch) -> None:
    fetch = _fetch_assets_module()
    mirror = tmp_path / "mirror"
    (mirror / "vocab").mkdir(parents=True)
    (mirror / "vocab/medic-2012-07-06.txt").write_text("C565588||Epidermolysis Bullosa\n", encoding="utf-8")
    dest = tmp_path / "assets"
    assert fetch.fetch_assets(dest, mirror, only=["vocab/medic"]) == ["vocab/medic-2012-07-06.txt"]
    assert (dest / "vocab/medic-2012-07-06.txt").read_text(encoding="utf-8").startswith("C565588")
    downloads = []

    def fake_download(url: str, path: Path, compress: bool, timeout: float) -> None:
        downloads.append(url)
        if "nlmpubs" not in url:
            raise OSError("no network")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"<DescriptorRecordSet/>")

    monkeypatch.setattr(fetch, "_download", fake_download)
    # the mirror lacks the MeSH TSVs and upstream has no such file: NLM's desc2024.xml stands in
    assert fetch.fetch_assets(dest, mirror, only=["vocab/mesh"]) == ["vocab/desc2024.xml.gz"]
    assert downloads == [f"{fetch.NLM_MESH_2024}/desc2024.gz"]
    with pytest.raises(fetch.FetchError) as err:
        fetch.fetch_assets(dest, mirror, only=["vocab/doid"])
    assert "vocab/doid-2018-07-05.json.gz" in str(err.value) and "no network" in str(err.value)
    assert "does not exist" in str(err.value)
    with pytest.raises(fetch.FetchError, match="mirror folder"):
        fetch.fetch_assets(dest, tmp_path / "no-mirror")
    assert fetch.main(["--dest", str(dest), "--mirror", str(tmp_path / "no-mirror")]) == 1


def test_kb_cli_build_and_stats(medic_assets: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "kbs/medic.jsonl.gz"
    result = runner.invoke(app, ["kb", "build", "medic", "--assets", str(medic_assets), "--output", str(out),
                                 "--report", str(tmp_path / "medic.json")])
    assert result.exit_code == 0, result.output
    assert "medic-2012: 11,915 records -> 11,914 concepts" in result.output
    report = json.loads((tmp_path / "medic.json").read_text(encoding="utf-8"))
    stats = KnowledgeBase.from_jsonl(out).stats()
    assert report["kb"] == stats.as_dict()
    result = runner.invoke(app, ["kb", "stats", str(out), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["concepts"] == stats.concepts
    result = runner.invoke(app, ["kb", "stats", str(out)])
    assert f"{stats.positive_pairs:,}" in result.output and "concepts with >=2 names" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"concept_id": "D1"}\n', encoding="utf-8")
    result = runner.invoke(app, ["kb", "stats", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl:1" in result.output
    result = runner.invoke(app, ["kb", "build", "umls", "--output", str(tmp_path / "x.jsonl")])
    assert result.exit_code != 0
    built = out.read_bytes()  # an existing KB or report is replaced only when asked
    again = runner.invoke(app, ["kb", "build", "medic", "--assets", str(medic_assets), "--output", str(out)])
    assert again.exit_code == 2 and "exists" in again.output and out.read_bytes() == built
    again = runner.invoke(app, ["kb", "build", "medic", "--assets", str(medic_assets), "--output", str(tmp_path / "m2.jsonl"),
                                "--report", str(tmp_path / "medic.json")])
    assert again.exit_code == 2 and "--report" in again.output and not (tmp_path / "m2.jsonl").exists()
    again = runner.invoke(app, ["kb", "build", "medic", "--assets", str(medic_assets), "--output", str(out),
                                "--report", str(tmp_path / "medic.json"), "--overwrite"])
    assert again.exit_code == 0 and KnowledgeBase.from_jsonl(out).stats() == stats


def _vocab_copy(mirror: Path, dest: Path, names) -> Path:
    (dest / "vocab").mkdir(parents=True, exist_ok=True)
    for name in names:
        (dest / "vocab" / name).write_bytes((mirror / "vocab" / name).read_bytes())
    return dest


def test_medic_report_records_the_ctd_fallback_and_merges(medic_assets: Path) -> None:
    kb, report = build.build_kb("medic", medic_assets, show_progress=False)
    (check,) = report.fallbacks
    assert (check.filled, check.total) == (104, 12_018) == (check.filled, len(kb))  # 0.9%: a complete MEDIC 2012
    assert check.limit == build.MAX_FALLBACK_SHARE and report.kb_merged_records == 0
    as_dict = report.as_dict()
    assert as_dict["fallbacks"][0]["filled"] == 104 and as_dict["kb_merged_records"] == 0
    assert any("CTD 2017 fallback" in line and "104 of 12,018" in line for line in report.lines())


def test_truncated_medic_text_fails_the_build(mirror: Path, tmp_path: Path) -> None:
    """MEDIC 2012 cut at a line boundary (``head -n``) is well-formed line for line; the CTD
    fallback would fill the gap with thousands of concepts. That share fails the build."""
    assets = _vocab_copy(mirror, tmp_path, ["CTD_diseases-2017-06-06.tsv.gz"])
    lines = (mirror / kb_assets.MEDIC_2012).read_text(encoding="utf-8").splitlines(keepends=True)
    (assets / kb_assets.MEDIC_2012).write_text("".join(lines[:2100]), encoding="utf-8")
    with pytest.raises(InputError, match=r"CTD 2017 fallback would add 9,\d{3} of 11,\d{3} concepts") as err:
        build.build_kb("medic", assets, show_progress=False)
    assert err.value.path == str(assets / kb_assets.MEDIC_2012) and "truncated" in str(err.value)
    # a few hundred lines short is still caught: the limit sits well below what any real cut leaves
    (assets / kb_assets.MEDIC_2012).write_text("".join(lines[:-700]), encoding="utf-8")
    with pytest.raises(InputError, match="CTD 2017 fallback"):
        build.build_kb("medic", assets, show_progress=False)


def test_truncated_mesh_tree_table_fails_the_build(mirror: Path, tmp_path: Path) -> None:
    """The tree table decides which descriptors are kept; cut short (here decompressed and cut
    at a line boundary), chemicals would vanish and CTD would type the diseases."""
    import gzip

    assets = _vocab_copy(mirror, tmp_path, ["mesh-2024-descriptor-terms.tsv.gz", "CTD_diseases-2017-06-06.tsv.gz"])
    lines = gzip.decompress((mirror / kb_assets.MESH_TREES).read_bytes()).decode("utf-8").splitlines(keepends=True)
    (assets / kb_assets.MESH_TREES).write_text("".join(lines[: len(lines) * 2 // 3]), encoding="utf-8")
    with pytest.raises(InputError, match=r"descriptors without a row in this tree table: \d[\d,]* of 30,764") as err:
        build.build_kb("mesh", assets, show_progress=False)
    assert err.value.path == str(assets / kb_assets.MESH_TREES)
    (assets / kb_assets.MESH_TREES).write_text("".join(lines), encoding="utf-8")
    kb, report = build.build_kb("mesh", assets, show_progress=False)
    (check,) = report.fallbacks
    assert (check.filled, check.total) == (112, 30_764)  # 23 typed from CTD's tree numbers, 89 without any
