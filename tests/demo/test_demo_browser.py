"""The demo in a real browser: Debian's headless Chromium driven by Playwright.

The app is served on a free local port from a thread of this process, over a 30-concept KB
written here (MeSH 2024 descriptor IDs and terms) with the real MiniLM as the encoder and a
tiny random BERT as the comparison space. Screenshots go to test-artifacts/ (git-ignored).
Where the browser (/usr/bin/chromium, or $SAPBERT_CHROMIUM) is missing every test here FAILS,
saying how to install it (``apt-get install chromium``; ``make test`` does that when it can):
a skipped browser test would pass unnoticed. No browser is ever downloaded.
"""
from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

CHROMIUM = Path(os.environ.get("SAPBERT_CHROMIUM") or "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 90_000  # two shared CPU cores: the first encoder call can be slow

MISSING_BROWSER = (f"the demo's browser test needs Debian's headless Chromium at {CHROMIUM}, which is missing: "
                   "install it with `sudo apt-get install chromium` (`make test` does so when run as root), or "
                   "point SAPBERT_CHROMIUM at a Chromium binary")


@pytest.fixture(scope="module", autouse=True)
def chromium() -> Path:
    """Fail (not skip) every test of this module when there is no browser to drive."""
    if not CHROMIUM.is_file():
        pytest.fail(MISSING_BROWSER, pytrace=False)
    return CHROMIUM


# (DescriptorUI, name, some of its MeSH 2024 entry terms, type)
MESH = [
    ("D006886", "Hydroxychloroquine", ["Oxychloroquine", "Plaquenil", "Hydroxychloroquine Sulfate"], "Chemical"),
    ("D002738", "Chloroquine", ["Chlorochin", "Aralen", "Nivaquine"], "Chemical"),
    ("D002945", "Cisplatin", ["cis-Platinum", "Platinol", "Dichlorodiammineplatinum"], "Chemical"),
    ("D001241", "Aspirin", ["Acetylsalicylic Acid", "Ecotrin"], "Chemical"),
    ("D006493", "Heparin", ["Unfractionated Heparin", "Heparin Sodium"], "Chemical"),
    ("D008687", "Metformin", ["Glucophage", "Dimethylbiguanidine"], "Chemical"),
    ("D008274", "Magnesium", [], "Chemical"),
    ("D008180", "Lupus Erythematosus, Systemic", ["Systemic Lupus Erythematosus", "Libman-Sacks Disease"], "Disease"),
    ("D001172", "Arthritis, Rheumatoid", ["Rheumatoid Arthritis"], "Disease"),
    ("D012164", "Retinal Diseases", [], "Disease"),
    ("D009202", "Cardiomyopathies", ["Myocardial Diseases", "Myocardiopathies"], "Disease"),
    ("D051436", "Renal Insufficiency, Chronic", ["Chronic Kidney Insufficiency", "Chronic Kidney Diseases"], "Disease"),
    ("D058186", "Acute Kidney Injury", ["Acute Renal Failure", "Acute Kidney Failure"], "Disease"),
    ("D010051", "Ovarian Neoplasms", ["Ovarian Cancer", "Cancer of the Ovary"], "Disease"),
    ("D001943", "Breast Neoplasms", ["Breast Cancer", "Breast Tumors", "Breast Carcinoma"], "Disease"),
    ("D064726", "Triple Negative Breast Neoplasms", ["Triple-Negative Breast Cancer"], "Disease"),
    ("D000740", "Anemia", [], "Disease"),
    ("D009503", "Neutropenia", [], "Disease"),
    ("D003924", "Diabetes Mellitus, Type 2", ["Type 2 Diabetes Mellitus", "NIDDM", "Type 2 Diabetes"], "Disease"),
    ("D006973", "Hypertension", ["Blood Pressure, High"], "Disease"),
    ("D009203", "Myocardial Infarction", ["Heart Attack", "Myocardial Infarct", "Cardiovascular Stroke"], "Disease"),
    ("D002637", "Chest Pain", [], "Disease"),
    ("D008288", "Malaria", ["Paludism", "Plasmodium Infections"], "Disease"),
    ("D007674", "Kidney Diseases", [], "Disease"),
    ("D001249", "Asthma", ["Bronchial Asthma"], "Disease"),
    ("D008881", "Migraine Disorders", ["Migraine", "Sick Headache"], "Disease"),
    ("D020521", "Stroke", ["Cerebrovascular Accident", "Cerebral Stroke"], "Disease"),
    ("D006333", "Heart Failure", ["Cardiac Failure", "Congestive Heart Failure"], "Disease"),
    ("D011014", "Pneumonia", ["Pneumonitis", "Lung Inflammation"], "Disease"),
    ("D004827", "Epilepsy", ["Seizure Disorder"], "Disease"),
]
TEXT = ("Hydroxychloroquine (HCQ) was stopped in a woman with systemic lupus erythematosus after she "
        "developed cardiomyopathy; HCQ levels were high and she later had a heart attack.")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory, minilm_path, tiny_bert):
    from spacy_sapbert.demo.app import build_app, launch
    from spacy_sapbert.demo.resources import add_compare_space, build_pipeline

    kb = KnowledgeBase((Concept(cid, name, aliases, [kind]) for cid, name, aliases, kind in MESH), name="mesh-mini")
    kb_file = kb.to_jsonl(tmp_path_factory.mktemp("demo-kb") / "mesh-mini.jsonl")
    resources = build_pipeline(str(minilm_path), kb_file, device="cpu", show_progress=False)
    add_compare_space(resources, str(tiny_bert), device="cpu", label="random tiny BERT", show_progress=False)
    app = build_app(resources)
    _, url, share_url = launch(app, port=_free_port(), block=False)
    yield {"url": url, "share_url": share_url}
    app.close()


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(WAIT_MS)
        page.goto(server["url"])
        yield page
        browser.close()


def _rows(page, table_id: str):
    """Cell texts of the data rows of a Gradio dataframe (rendered as a virtual grid)."""
    rows = page.locator(f"#{table_id} [role=row].virtual-row")
    return [rows.nth(i).locator("[role=gridcell]").all_inner_texts() for i in range(rows.count())]


def _clean(cells):
    return [c.strip() for c in cells]


def test_served_locally_without_share_link(server):
    assert re.match(r"http://127\.0\.0\.1:\d+/?$", server["url"])
    assert server["share_url"] is None


def test_link_text_highlights_entities_and_lists_candidates(page):
    from playwright.sync_api import expect

    expect(page.locator("body")).to_contain_text("dictionary matcher")  # no NER in this pipeline: the page says so
    page.locator("#link-text textarea").fill(TEXT)
    page.get_by_role("button", name="Link entities").click()
    expect(page.locator("#link-status")).to_contain_text("mention(s) found", timeout=WAIT_MS)

    entities = page.locator("#link-entities")
    expect(entities).to_contain_text("HCQ")
    hcq = entities.locator(".token.highlighted", has_text="HCQ").first
    expect(hcq).to_contain_text("CHEMICAL · D006886 Hydroxychloroquine")
    expect(entities.locator(".token.highlighted", has_text="heart attack").first).to_contain_text(
        "D009203 Myocardial Infarction")
    expect(entities.locator(".token.highlighted", has_text="cardiomyopathy").first).to_contain_text("D009202")

    rows = [_clean(r) for r in _rows(page, "link-table")]
    top = {(r[0], r[4]) for r in rows if r[3] == "1"}  # (mention, concept ID) of rank-1 rows
    assert ("HCQ", "D006886") in top and ("systemic lupus erythematosus", "D008180") in top
    hcq_rows = [r for r in rows if r[0] == "HCQ"]
    assert hcq_rows and all(r[2] == "Hydroxychloroquine" for r in hcq_rows)  # linked via its long form
    assert len(hcq_rows) == 2 * 3  # two occurrences, three candidates each (the default)
    assert ["HCQ", "Hydroxychloroquine"] in [_clean(r) for r in _rows(page, "link-abbreviations")]
    page.screenshot(path=str(ARTIFACTS / "demo-link.png"), full_page=True)


def test_empty_text_gets_a_message_not_a_traceback(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Link text").click()
    page.locator("#link-text textarea").fill("   ")
    page.get_by_role("button", name="Link entities").click()
    expect(page.locator("#link-status")).to_contain_text("Please enter some text", timeout=WAIT_MS)
    assert "Traceback" not in page.content()
    assert _rows(page, "link-table") == []


def test_neighbour_table_and_charts(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Neighbours").click()
    query = page.locator("#nb-query textarea")
    query.fill("")
    query.press_sequentially("high blood pressure")
    page.get_by_role("button", name="Find neighbours").click()
    expect(page.locator("#nb-status")).to_contain_text("Closest name", timeout=WAIT_MS)
    rows = [_clean(r) for r in _rows(page, "nb-table")]
    assert len(rows) == 10  # k's default
    # MiniLM puts "blood pressure high" (MeSH's inverted entry term) nearest to the paraphrase
    assert rows[0][:4] == ["1", "blood pressure high", "D006973", "Hypertension"]
    assert [float(r[4]) for r in rows] == sorted((float(r[4]) for r in rows), reverse=True)
    expect(page.locator("#nb-bars img")).to_be_visible()
    expect(page.locator("#nb-projection img")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "demo-neighbours.png"), full_page=True)


def test_compare_shows_both_spaces(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Compare").click()
    page.locator("#cmp-query textarea").fill("heart attack")
    page.get_by_role("button", name="Compare").click()
    summary = page.locator("#cmp-summary")
    expect(summary).to_contain_text("random tiny BERT", timeout=WAIT_MS)
    for i in (0, 1):  # an exact KB name is its own nearest neighbour in any space
        assert _clean(_rows(page, f"cmp-table-{i}")[0])[:3] == ["1", "heart attack", "D009203 Myocardial Infarction"]
        expect(page.locator(f"#cmp-projection-{i} img")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "demo-compare.png"), full_page=True)
