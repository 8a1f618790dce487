"""End-to-end NER + linking scores, and a short training run of configs/ner.cfg."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import spacy

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase
from spacy_sapbert.pipes.tokenizer import scispacy_blank
from spacy_sapbert.training.corpora import read_pubtator
from spacy_sapbert.training.ner.corpus import CorpusPaths, build_ner_corpus
from spacy_sapbert.training.ner.data import BC5CDR_LABELS
from spacy_sapbert.training.ner.e2e import evaluate_e2e, gold_pairs, ner_linker_pipeline, score_pairs
from spacy_sapbert.training.ner.scores import PRF

REPO = Path(__file__).resolve().parents[3]

TEXT = "Cocaine-induced seizures in rats. Naloxone reversed the seizures and the renal failure caused by cocaine."
BC5CDR = """100|t|Cocaine-induced seizures in rats.
100|a|Naloxone reversed the seizures and the renal failure caused by cocaine.
100\t0\t7\tCocaine\tChemical\tD003042
100\t16\t24\tseizures\tDisease\tD012640
100\t34\t42\tNaloxone\tChemical\tD009270
100\t56\t64\tseizures\tDisease\tD012640
100\t73\t86\trenal failure\tDisease\tOMIM:123456
100\t87\t93\tcaused\tChemical\t-1
100\t97\t104\tcocaine\tChemical\tD003042|D009270

"""


@pytest.fixture
def kb() -> KnowledgeBase:
    return KnowledgeBase([
        Concept("D003042", "cocaine"),
        Concept("D009270", "naloxone"),
        Concept("D012640", "seizures"),
        Concept("D051437|OMIM:123456", "renal failure"),
        Concept("D051381", "rats"),
    ], name="tiny")


def test_gold_pairs_split_composites_and_set_aside_mentions_without_id(kb, tmp_path):
    path = tmp_path / "c.txt"
    path.write_text(BC5CDR, encoding="utf-8")
    pairs, no_id = gold_pairs(read_pubtator(path), BC5CDR_LABELS, kb)
    assert ("100", 73, 86, "D051437") in pairs
    assert {p for p in pairs if p[1] == 97} == {("100", 97, 104, "D003042"), ("100", 97, 104, "D009270")}
    assert len(pairs) == 7 and no_id == {("100", 87, 93)}


def test_score_pairs_ignores_predictions_on_spans_without_id():
    gold = {("1", 0, 5, "A"), ("1", 6, 9, "B")}
    predicted = {("1", 0, 5, "A"), ("1", 6, 9, "C"), ("1", 10, 12, "X")}
    assert score_pairs(gold, predicted) == PRF(1, 2, 1)
    assert score_pairs(gold, predicted, {("1", 10, 12)}) == PRF(1, 1, 1)


def test_a_coordinated_span_states_the_concepts_of_its_parts():
    from spacy_sapbert.training.ner.e2e_table import Entity, score

    gold = ({("1", 0, 25, "DISEASE")}, {("1", 0, 25, "DISEASE", "D1"), ("1", 0, 25, "DISEASE", "D2")},
            {("1", "DISEASE", "D1"), ("1", "DISEASE", "D2")}, set())
    whole = Entity("1", 0, 25, "DISEASE", "D3", 0.9)
    split = Entity("1", 0, 25, "DISEASE", "D3", 0.9, parts=(("D1", 0.8), ("D2", 0.6)))
    assert score([whole], gold, ["DISEASE"], 0.5)["DISEASE"]["documents"] == PRF(0, 1, 2)
    assert score([split], gold, ["DISEASE"], 0.5)["DISEASE"]["documents"] == PRF(2, 0, 0)
    assert score([split], gold, ["DISEASE"], 0.7)["DISEASE"]["mentions"] == PRF(1, 0, 1)  # the part below it drops
    assert score([split], gold, ["DISEASE"], 0.95)["DISEASE"]["documents"] == PRF(0, 0, 2)  # no part: its own, too low
    assert score([split], gold, ["DISEASE"], {"DISEASE": 0.7})["DISEASE"]["mentions"] == PRF(1, 0, 1)  # per label
    assert score([split], gold, ["DISEASE"], {"CHEMICAL": 0.99, "DISEASE": 0.5})["DISEASE"]["documents"] == PRF(2, 0, 0)


def test_a_linker_with_one_threshold_attribute_is_collected_at_zero_and_given_back():
    """scispaCy's EntityLinker (the pipeline benchmark's peer) has a ``threshold`` and no ``configure``,
    ``label_thresholds`` or parts extension: ``collect`` reads it at 0 and restores its own."""
    from spacy.language import Language
    from spacy.tokens import Span

    from spacy_sapbert.training.corpora import Document, Mention
    from spacy_sapbert.training.ner.e2e_table import collect, collect_runs, thresholds_at

    class OneThreshold:
        def __init__(self) -> None:
            self.threshold, self.seen = 0.7, []

        def __call__(self, doc):
            self.seen.append(self.threshold)
            for ent in doc.ents:
                ent._.kb_ents = [("D1", 0.5)] if self.threshold <= 0.5 else []
            return doc

    if not Span.has_extension("kb_ents"):
        Span.set_extension("kb_ents", default=[])
    linker = OneThreshold()
    Language.component("one_threshold_linker_test", func=linker)
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "DISEASE", "pattern": "asthma"}])
    nlp.add_pipe("one_threshold_linker_test")
    document = Document("1", "asthma", "", [Mention(0, 6, "asthma", "Disease", ("D1",))])
    (entity,) = collect(nlp, [document], ["DISEASE"], None, linker="one_threshold_linker_test")
    assert (entity.concept, entity.score, entity.parts) == ("D1", 0.5, ()) and linker.seen == [0.0]
    assert linker.threshold == 0.7
    # at its own threshold, as a user runs it; both runs from one pass of the pipes before the linker
    before = []
    Language.component("count_docs_e2e_test", func=lambda doc: before.append(doc.text) or doc)
    nlp.add_pipe("count_docs_e2e_test", before="one_threshold_linker_test")
    own, zero = collect_runs(nlp, [document, document], ["DISEASE"], None, "one_threshold_linker_test", (False, True))
    assert [(e.concept, e.score) for e in own] == [("", float("-inf"))] * 2 and [e.concept for e in zero] == ["D1"] * 2
    assert linker.seen == [0.0, 0.7, 0.7, 0.0, 0.0] and linker.threshold == 0.7 and before == [document.text] * 2
    (at_own,) = collect(nlp, [document], ["DISEASE"], None, linker="one_threshold_linker_test", at_zero=False)
    assert at_own.concept == "" and linker.seen[-1] == 0.7
    # a sweep: a linker run at each threshold, after the own one, over the same pass of the pipes before it
    del linker.seen[:], before[:]
    own, at_half, at_six = collect_runs(nlp, [document], ["DISEASE"], None, "one_threshold_linker_test", (False,),
                                        at_thresholds=(0.5, 0.6))
    assert linker.seen == [0.7, 0.5, 0.6] and linker.threshold == 0.7 and before == [document.text]
    assert [e.concept for e in own + at_half + at_six] == ["", "D1", ""]
    with thresholds_at(linker, None):
        assert linker.threshold == float("-inf")
    assert linker.threshold == 0.7


@pytest.mark.filterwarnings("ignore:.*W036")  # scispaCy's abbreviation matcher starts empty
def test_both_runs_link_the_same_documents_and_the_own_run_is_the_pipeline(kb, tiny_bert, tmp_path):
    """scispaCy's abbreviation detector (as ``ner_linker_pipeline`` adds it) keeps Span objects in a Doc's
    user_data, which ``Doc.copy`` cannot copy: the linker runs again on the same documents, and the run at the
    pipe's own threshold reads what the pipeline gives a user."""
    from spacy_sapbert.training.corpora import Document
    from spacy_sapbert.training.ner.e2e_table import collect_runs

    ner = scispacy_blank(split_hyphens=True)
    ner.add_pipe("entity_ruler").add_patterns([{"label": "CHEMICAL", "pattern": [{"LOWER": {"IN": ["naloxone", "nx"]}}]}])
    ner.to_disk(tmp_path / "ner")
    kb.to_jsonl(tmp_path / "kb.jsonl")
    nlp = ner_linker_pipeline(tmp_path / "ner", tmp_path / "kb.jsonl", model=str(tiny_bert),
                              linker_config={"device": "cpu", "threshold": 0.999})
    document = Document("1", "Naloxone (NX) reversed the seizures.", "NX was given again.", [])
    own, zero = collect_runs(nlp, [document], ["CHEMICAL"], None, at_zero=(False, True))
    doc = nlp(document.text)
    assert doc._.abbreviations and not isinstance(doc._.abbreviations[0], dict)  # Spans, not their serialised form
    assert [(e.start, e.end, e.concept) for e in own] == [
        (ent.start_char, ent.end_char, ent._.kb_ents[0][0] if ent._.kb_ents else "") for ent in doc.ents]
    assert [(e.start, e.end) for e in zero] == [(e.start, e.end) for e in own] and len(own) == 3
    assert all(e.concept == "D009270" for e in zero)  # at 0 every span keeps its best


@pytest.mark.filterwarnings("ignore:.*W036")  # scispaCy's abbreviation matcher starts empty
def test_evaluate_e2e_with_a_rule_ner_and_the_linker(kb, tiny_bert, tmp_path):
    ner = scispacy_blank(split_hyphens=True)
    ruler = ner.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "CHEMICAL", "pattern": [{"LOWER": {"IN": ["cocaine", "naloxone", "caused"]}}]},
                        {"label": "DISEASE", "pattern": [{"LOWER": {"IN": ["seizures", "rats"]}}]}])
    ner.to_disk(tmp_path / "ner")
    kb.to_jsonl(tmp_path / "kb.jsonl")
    nlp = ner_linker_pipeline(tmp_path / "ner", tmp_path / "kb.jsonl", model=str(tiny_bert),
                              linker_config={"device": "cpu"})
    assert nlp.pipe_names == ["entity_ruler", "abbreviation_detector", "sapbert_linker"]
    path = tmp_path / "c.txt"
    path.write_text(BC5CDR, encoding="utf-8")
    result = evaluate_e2e(nlp, list(read_pubtator(path)), BC5CDR_LABELS, name="tiny")
    # An identical name is its own nearest neighbour, whatever the encoder: every found span is
    # linked right. Found: Cocaine, seizures x2, Naloxone, cocaine (one of its two gold pairs),
    # plus "rats" (no such gold mention); "caused" has gold ID -1 and is ignored; "renal failure"
    # is not found.
    assert (result.pairs.tp, result.pairs.fp, result.pairs.fn) == (5, 1, 2)
    assert result.gold_pairs == 7
    # Gold spans, linker alone: the 5 single-concept mentions (the composite is left out) all right.
    assert (result.gold_span_accuracy, result.gold_span_mentions) == (100.0, 5)

    # A NER pipeline that already detects abbreviations gets no second detector.
    with_abbr = scispacy_blank()
    with_abbr.add_pipe("abbreviation_entities")
    with_abbr.to_disk(tmp_path / "ner_abbr")
    assert ner_linker_pipeline(tmp_path / "ner_abbr", tmp_path / "kb.jsonl", model=str(tiny_bert)).pipe_names == [
        "abbreviation_entities", "sapbert_linker"]

    # The same linker saved as a pipeline (encoder, KB and index inside) and sourced from there.
    saved = spacy.blank("en")
    saved.add_pipe("sapbert_linker", source=nlp)
    saved.to_disk(tmp_path / "linker")
    sourced = ner_linker_pipeline(tmp_path / "ner", tmp_path / "linker", abbreviations=False)
    assert sourced.pipe_names == ["entity_ruler", "sapbert_linker"]
    again = evaluate_e2e(sourced, list(read_pubtator(path)), BC5CDR_LABELS, name="tiny")
    assert again.pairs == result.pairs


def test_ner_config_trains_and_the_pipeline_loads(tmp_path):
    """A few steps of configs/ner.cfg (made tiny) on a two-document corpus: the config is valid
    and the saved pipeline loads with its tokenizer found through the entry point."""
    from spacy.cli.train import train

    corpora = tmp_path / "corpora"
    (corpora / "bc5cdr").mkdir(parents=True)
    (corpora / "ncbi-disease").mkdir()
    for name in ("CDR_TrainingSet.PubTator.txt", "CDR_DevelopmentSet.PubTator.txt"):
        (corpora / "bc5cdr" / name).write_text(BC5CDR, encoding="utf-8")
    build_ner_corpus(CorpusPaths(corpora / "bc5cdr" / "CDR_TrainingSet.PubTator.txt",
                                 corpora / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt"), tmp_path / "corpus")
    overrides = {
        "paths.train": str(tmp_path / "corpus" / "train.spacy"),
        "paths.dev": str(tmp_path / "corpus" / "dev.spacy"),
        "components.tok2vec.model.encode.width": 16,
        "components.tok2vec.model.encode.depth": 1,
        "components.tok2vec.model.embed.rows": [500, 100, 100, 100],
        "components.ner.model.hidden_width": 16,
        "training.max_epochs": 0,
        "training.max_steps": 4,
        "training.eval_frequency": 2,
    }
    train(REPO / "configs" / "ner.cfg", tmp_path / "out", overrides=overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["tok2vec", "ner", "abbreviation_entities"]
    assert set(nlp.get_pipe("ner").labels) == {"CHEMICAL", "DISEASE"}
    assert nlp.config["nlp"]["tokenizer"]["split_hyphens"] is True
    assert [t.text for t in nlp("Cocaine-induced")] == ["Cocaine", "-", "induced"]
    # A fresh interpreter that never imports spacy_sapbert: the tokenizer comes from the entry point.
    code = ("import sys, spacy; nlp = spacy.load(sys.argv[1]); "
            "assert 'spacy_sapbert.pipes.tokenizer' in sys.modules; print(len(nlp('Cocaine-induced seizures')))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out" / "model-last")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "4"


def test_minilm_vectors_vocabulary_and_file(kb, tiny_bert, tmp_path):
    from spacy_sapbert.training.ner.vectors import build_minilm_vectors, vocabulary

    nlp = scispacy_blank(split_hyphens=True)
    words = vocabulary(nlp, ["Cocaine-induced seizures, seizures."], ["renal failure", "Renal cyst", "cyst"],
                       min_kb_count=2)
    # corpus words by frequency, then KB words seen twice that the corpus lacks
    assert words == ["seizures", "cocaine", "-", "induced", ",", ".", "renal", "cyst"]
    assert vocabulary(nlp, ["a b a"], [], max_words=1) == ["a"]
    corpus = tmp_path / "c.txt"
    corpus.write_text(BC5CDR, encoding="utf-8")
    kb.to_jsonl(tmp_path / "kb.jsonl")
    out = build_minilm_vectors([corpus], [tmp_path / "kb.jsonl"], tmp_path / "v.txt", model=str(tiny_bert),
                               min_kb_count=1, device="cpu")
    lines = out.read_text(encoding="utf-8").splitlines()
    n, dim = map(int, lines[0].split())
    assert dim == 32 and n == len(lines) - 1
    table = {line.split(" ")[0]: [float(x) for x in line.split(" ")[1:]] for line in lines[1:]}
    assert {"cocaine", "naloxone", "rats"} <= set(table)  # "rats": a KB name, not in the text
    assert all(len(v) == dim for v in table.values())
    assert abs(sum(x * x for x in table["cocaine"]) - 1.0) < 1e-3
