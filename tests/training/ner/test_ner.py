"""PubTator → DocBin conversion for the NER model, its tokenizer and its raw-text scorer."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_sapbert.errors import InputError
from spacy_sapbert.pipes.tokenizer import TOKENIZER_NAME, scispacy_blank
from spacy_sapbert.training.corpora import read_pubtator
from spacy_sapbert.training.ner.corpus import CorpusPaths, build_ner_corpus
from spacy_sapbert.training.ner.data import (BC5CDR_LABELS, NCBI_LABELS, chemical_lexicon, convert_documents,
                                             mask_unannotated, split_sentences)
from spacy_sapbert.training.ner.scores import PRF, evaluate_corpus, reachable_share, score_spans

BC5_TITLE = "Cocaine-induced seizures in rats."
BC5_ABSTRACT = "Naloxone reversed the seizures and the renal failure caused by cocaine."
# text = title + " " + abstract; offsets below index into it.
BC5CDR = f"""100|t|{BC5_TITLE}
100|a|{BC5_ABSTRACT}
100\t0\t7\tCocaine\tChemical\tD003042
100\t16\t24\tseizures\tDisease\tD012640
100\t34\t42\tNaloxone\tChemical\tD009270
100\t56\t64\tseizures\tDisease\tD012640
100\t73\t86\trenal failure\tDisease\tD051437
100\t97\t104\tcocaine\tChemical\tD003042
100\tCID\tD003042\tD012640

"""
NCBI_TEXT = "Naloxone and cocaine in ataxia-telangiectasia. Ataxia patients had breast cancer."
NCBI = f"""200|t|Naloxone and cocaine in ataxia-telangiectasia.
200|a|Ataxia patients had breast cancer.
200\t24\t45\tataxia-telangiectasia\tSpecificDisease\tD001260
200\t47\t53\tAtaxia\tModifier\tD001260
200\t67\t80\tbreast cancer\tDiseaseClass\tD001943

"""


@pytest.fixture(scope="module")
def nlp():
    return scispacy_blank()


@pytest.fixture(scope="module")
def nlp_split():
    return scispacy_blank(split_hyphens=True)


@pytest.fixture
def corpus_files(tmp_path: Path) -> Path:
    (tmp_path / "bc5cdr").mkdir()
    (tmp_path / "ncbi-disease").mkdir()
    (tmp_path / "bc5cdr" / "CDR_TrainingSet.PubTator.txt").write_text(BC5CDR, encoding="utf-8")
    (tmp_path / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt").write_text(BC5CDR.replace("100", "101"), encoding="utf-8")
    (tmp_path / "ncbi-disease" / "NCBItrainset_corpus.txt").write_text(NCBI, encoding="utf-8")
    (tmp_path / "ncbi-disease" / "NCBItestset_corpus.txt").write_text(NCBI.replace("200", "201"), encoding="utf-8")
    (tmp_path / "ncbi-disease" / "NCBIdevelopset_corpus.txt").write_text(NCBI.replace("200", "202"), encoding="utf-8")
    return tmp_path


def _write(tmp_path: Path, text: str, name: str = "c.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_tokenizer_is_scispacy_and_registered(nlp, nlp_split):
    assert nlp.config["nlp"]["tokenizer"]["@tokenizers"] == TOKENIZER_NAME
    assert [t.text for t in nlp("Cocaine-induced seizures (i.v.)")] == ["Cocaine-induced", "seizures", "(", "i.v", ".", ")"]
    assert [t.text for t in nlp_split("Cocaine-induced 5-FU IL-2")] == ["Cocaine", "-", "induced", "5", "-", "FU", "IL-2"]


def test_tokenizer_is_scispacys_own_rules_and_all(nlp):
    """Built without the exceptions and given them once at the end, it is byte for byte the tokenizer
    scispaCy's combined_rule_tokenizer makes (exceptions, abbreviations, affixes)."""
    import warnings

    from scispacy.custom_tokenizer import combined_rule_tokenizer

    reference_nlp = spacy.blank("en")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        reference = combined_rule_tokenizer(reference_nlp)
    assert nlp.tokenizer.rules == reference.rules and len(reference.rules) > 1000
    assert "Fig." in nlp.tokenizer.rules and "can't" in nlp.tokenizer.rules  # scispaCy's and the language's
    assert nlp.tokenizer.to_bytes(exclude=["vocab"]) == reference.to_bytes(exclude=["vocab"])


def test_tokenizer_survives_to_disk_and_spacy_load(nlp_split, tmp_path):
    nlp_split.to_disk(tmp_path / "pipe")
    loaded = spacy.load(tmp_path / "pipe")  # found through the spacy_tokenizers entry point
    assert loaded.config["nlp"]["tokenizer"] == {"@tokenizers": TOKENIZER_NAME, "split_hyphens": True}
    assert [t.text for t in loaded("naloxone/morphine-treated")] == ["naloxone", "/", "morphine", "-", "treated"]


def test_a_saved_tokenizer_equal_to_the_factorys_is_not_read_again_and_any_other_is(nlp_split, tmp_path, monkeypatch):
    import spacy.util

    read = []
    original = spacy.util.from_bytes  # what spaCy's Tokenizer.from_bytes reads its fields with

    def spy(data, setters, exclude):
        read.extend(["tokenizer"] if "prefix_search" in setters else [])
        return original(data, setters, exclude)

    monkeypatch.setattr(spacy.util, "from_bytes", spy)
    nlp_split.to_disk(tmp_path / "same")
    assert [t.text for t in spacy.load(tmp_path / "same")("IL-2-treated")] == ["IL-2", "-", "treated"]
    assert read == []  # the saved state is the one the config builds: skipped
    nlp_split.tokenizer.add_special_case("IL-2-treated", [{"ORTH": "IL-2-treated"}])
    nlp_split.to_disk(tmp_path / "own")
    assert [t.text for t in spacy.load(tmp_path / "own")("IL-2-treated")] == ["IL-2-treated"]
    assert read == ["tokenizer"]  # a user's special case: read as spaCy reads it


def test_bc5cdr_offsets_labels_and_misaligned_count(nlp, tmp_path):
    docs, stats = convert_documents(nlp, read_pubtator(_write(tmp_path, BC5CDR)), BC5CDR_LABELS)
    (doc,) = docs
    assert doc.text == f"{BC5_TITLE} {BC5_ABSTRACT}"
    ents = [(e.start_char, e.end_char, e.label_) for e in doc.ents]
    # "Cocaine" is the first half of the single scispaCy token "Cocaine-induced": not an entity ...
    assert ents == [(16, 24, "DISEASE"), (34, 42, "CHEMICAL"), (56, 64, "DISEASE"), (73, 86, "DISEASE"),
                    (97, 104, "CHEMICAL")]
    # ... but counted, and its token marked unknown rather than O
    assert stats.mentions == {"CHEMICAL": 3, "DISEASE": 3}
    assert stats.misaligned == {"CHEMICAL": 1}
    assert stats.entities == {"CHEMICAL": 2, "DISEASE": 3}
    assert stats.expand_possible == 1 and stats.contract_possible == 0
    assert doc[0].text == "Cocaine-induced" and doc[0].ent_iob_ == ""
    assert doc[1].ent_iob_ == "B"
    assert "Cocaine" in stats.misaligned_examples[0] and "Cocaine-induced" in stats.misaligned_examples[0]
    assert stats.documents == 1 and stats.sentences == 2 and stats.tokens == len(doc)


def test_alignment_modes(nlp, nlp_split, tmp_path):
    path = _write(tmp_path, BC5CDR)
    (expanded,), _ = convert_documents(nlp, read_pubtator(path), BC5CDR_LABELS, misaligned="expand")
    assert (expanded.ents[0].text, expanded.ents[0].label_) == ("Cocaine-induced", "CHEMICAL")
    (contracted,), stats = convert_documents(nlp, read_pubtator(path), BC5CDR_LABELS, misaligned="contract")
    assert contracted.ents[0].text == "seizures" and contracted[0].ent_iob_ == ""  # no token inside: missing
    assert stats.misaligned == {"CHEMICAL": 1}
    (split,), stats = convert_documents(nlp_split, read_pubtator(path), BC5CDR_LABELS)
    assert (split.ents[0].start_char, split.ents[0].end_char, split.ents[0].text) == (0, 7, "Cocaine")
    assert sum(stats.misaligned.values()) == 0 and sum(stats.entities.values()) == 6
    with pytest.raises(ValueError):
        convert_documents(nlp, read_pubtator(path), BC5CDR_LABELS, misaligned="drop")


def test_ncbi_labels_mapped_and_unknown_types_counted(nlp, tmp_path):
    extra = NCBI.rstrip("\n") + "\n200\t13\t20\tcocaine\tChemical\t-1\n\n"
    docs, stats = convert_documents(nlp, read_pubtator(_write(tmp_path, extra)), NCBI_LABELS)
    assert {e.label_ for e in docs[0].ents} == {"DISEASE"}
    assert [e.text for e in docs[0].ents] == ["ataxia-telangiectasia", "Ataxia", "breast cancer"]
    assert stats.unlabelled == {"Chemical": 1}
    assert stats.mentions == {"DISEASE": 3}


def test_overlapping_mentions_keep_the_longest_and_are_counted(nlp, tmp_path):
    text = BC5CDR.replace("100\t73\t86\trenal failure", "100\t79\t86\tfailure\tDisease\tD005355\n100\t73\t86\trenal failure")
    docs, stats = convert_documents(nlp, read_pubtator(_write(tmp_path, text)), BC5CDR_LABELS)
    assert "renal failure" in [e.text for e in docs[0].ents]
    assert stats.overlapping == {"DISEASE": 1}


def test_sentences_never_cut_a_mention(nlp, tmp_path):
    # The sentencizer would start a sentence at "Cancer" after the "." token; the mention spans it.
    text = "300|t|Risk of St . Cancer syndrome. Second one.\n300|a|Third one.\n300\t8\t28\tSt . Cancer syndrome\tDisease\tD009369\n\n"
    docs, stats = convert_documents(nlp, read_pubtator(_write(tmp_path, text)), BC5CDR_LABELS)
    (ent,) = docs[0].ents
    assert ent.text == "St . Cancer syndrome" and ent[1].text == "."
    assert all(not t.is_sent_start for t in ent[1:])
    assert stats.sentences == 3
    sentences = split_sentences(docs)
    assert [s.text.strip() for s in sentences] == ["Risk of St . Cancer syndrome.", "Second one.", "Third one."]
    assert [e.text for s in sentences for e in s.ents] == ["St . Cancer syndrome"]


def test_ncbi_chemicals_masked_by_lexicon(nlp, tmp_path):
    bc5_docs, _ = convert_documents(nlp, read_pubtator(_write(tmp_path, BC5CDR, "b.txt")), BC5CDR_LABELS)
    lexicon = chemical_lexicon(bc5_docs)
    assert lexicon == {"naloxone", "cocaine"}
    ncbi_docs, _ = convert_documents(nlp, read_pubtator(_write(tmp_path, NCBI, "n.txt")), NCBI_LABELS)
    assert ncbi_docs[0][0].ent_iob_ == "O"
    assert mask_unannotated(nlp, ncbi_docs, lexicon) == 2
    doc = ncbi_docs[0]
    assert doc[0].text == "Naloxone" and doc[0].ent_iob_ == ""
    assert doc[2].text == "cocaine" and doc[2].ent_iob_ == ""
    assert doc[1].ent_iob_ == "O"
    assert [e.text for e in doc.ents] == ["ataxia-telangiectasia", "Ataxia", "breast cancer"]
    assert sum(1 for _ in doc.sents) == 2  # sentence starts kept


def test_build_ner_corpus_writes_docbins_and_stats(nlp, corpus_files, tmp_path):
    out = tmp_path / "out"
    stats = build_ner_corpus(CorpusPaths.from_folder(corpus_files), out)
    assert set(stats) == {"train/bc5cdr", "train/ncbi", "dev", "ncbi_test", "ncbi_dev"}
    train = list(DocBin().from_disk(out / "train.spacy").get_docs(nlp.vocab))
    assert len(train) == 2
    assert [e.label_ for e in train[1].ents] == ["DISEASE"] * 3
    assert train[1][0].ent_iob_ == ""  # NCBI "Naloxone": masked (a BC5CDR train chemical)
    assert train[0][0].text == "Cocaine" and train[0].ents[0].text == "Cocaine"  # split_hyphens default
    dev = list(DocBin().from_disk(out / "dev.spacy").get_docs(nlp.vocab))
    assert [e.label_ for e in dev[0].ents].count("CHEMICAL") == 3
    assert len(list(DocBin().from_disk(out / "ncbi_test.spacy").get_docs(nlp.vocab))) == 1
    written = json.loads((out / "stats.json").read_text())
    assert written["stats"]["train/ncbi"]["masked_spans"] == 2
    assert written["settings"]["tokenizer"]["split_hyphens"] is True

    out2 = tmp_path / "out2"
    stats = build_ner_corpus(CorpusPaths.from_folder(corpus_files, with_ncbi=False), out2, unit="sentence",
                             split_hyphens=False)
    assert "train/ncbi" not in stats
    assert stats["train/bc5cdr"].misaligned == {"CHEMICAL": 1}
    assert len(list(DocBin().from_disk(out2 / "train.spacy").get_docs(nlp.vocab))) == 2  # two sentences


def test_scoring_commands_write_new_reports_unless_overwrite_and_never_a_file_read(corpus_files, tmp_path):
    from tests.output_guard import assert_output_guarded

    ner = scispacy_blank(split_hyphens=True)
    ner.add_pipe("entity_ruler").add_patterns([{"label": "CHEMICAL", "pattern": "cocaine"}])
    ner.to_disk(tmp_path / "ner")
    gold = corpus_files / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt"
    output = tmp_path / "scores.json"
    for command, key in (("ner-evaluate", "reports"), ("ner-e2e", "results")):
        # the reads: a corpus file; a file of the pipeline
        assert_output_guarded(lambda path: [command, str(tmp_path / "ner"), str(corpus_files), "-o", str(path)],
                              output, reads=[gold, tmp_path / "ner" / "config.cfg"])
        assert key in json.loads(output.read_text(encoding="utf-8"))


def test_missing_corpus_file_is_an_input_error(corpus_files):
    (corpus_files / "bc5cdr" / "CDR_DevelopmentSet.PubTator.txt").unlink()
    with pytest.raises(InputError, match="bc5cdr_dev"):
        CorpusPaths.from_folder(corpus_files)


def test_score_spans_exact_match_and_ignored_labels():
    gold = {("1", 0, 5, "CHEMICAL"), ("1", 10, 15, "DISEASE"), ("2", 0, 3, "DISEASE")}
    pred = {("1", 0, 5, "CHEMICAL"), ("1", 10, 14, "DISEASE"), ("2", 0, 3, "DISEASE"), ("2", 5, 9, "CHEMICAL")}
    scores = score_spans(gold, pred)
    assert scores["CHEMICAL"] == PRF(1, 1, 0)
    assert scores["DISEASE"] == PRF(1, 1, 1)
    assert scores["ALL"] == PRF(2, 2, 1)
    assert scores["DISEASE"].precision == 50.0 and round(scores["ALL"].f1, 2) == 57.14
    only_disease = score_spans(gold, pred, ["DISEASE"])
    assert set(only_disease) == {"DISEASE", "ALL"} and only_disease["ALL"] == PRF(1, 1, 1)
    assert PRF(0, 0, 0).f1 == 0.0


def test_evaluate_corpus_counts_unreachable_gold_as_misses(nlp, tmp_path):
    pipe = scispacy_blank()
    ruler = pipe.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "CHEMICAL", "pattern": [{"LOWER": {"IN": ["cocaine", "naloxone"]}}]},
                        {"label": "DISEASE", "pattern": "seizures"}])
    docs = list(read_pubtator(_write(tmp_path, BC5CDR)))
    report = evaluate_corpus(pipe, docs, BC5CDR_LABELS, name="tiny")
    chem, dis = report["scores"]["CHEMICAL"], report["scores"]["DISEASE"]
    # "Cocaine" inside "Cocaine-induced" cannot be predicted with scispaCy's tokens: one miss.
    assert (chem["tp"], chem["fp"], chem["fn"]) == (2, 0, 1)
    assert (dis["tp"], dis["fp"], dis["fn"]) == (2, 0, 1)  # "renal failure" not in the ruler
    assert report["reachable_percent"]["CHEMICAL"] == pytest.approx(66.67)
    assert report["reachable_percent"]["DISEASE"] == 100.0
    assert report["gold_mentions"] == 6


def test_reachable_share():
    tokens = {"1": [(0, 5), (6, 10)]}
    assert reachable_share({("1", 0, 5, "A"), ("1", 0, 3, "A"), ("1", 6, 10, "B")}, tokens) == {
        "A": 50.0, "B": 100.0, "ALL": pytest.approx(66.67)}


def test_abbreviation_entities_label_short_forms_like_their_long_form():
    pipe = scispacy_blank(split_hyphens=True)
    ruler = pipe.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "CHEMICAL", "pattern": "retinoic acid"},
                        {"label": "DISEASE", "pattern": [{"LOWER": "ra"}, {"LOWER": "levels"}]},
                        {"label": "DISEASE", "pattern": "acute lymphoblastic leukemia"}])
    pipe.add_pipe("abbreviation_entities", config={"labels": ["CHEMICAL"]})
    doc = pipe("We gave all-trans retinoic acid (RA) in acute lymphoblastic leukemia (ALL). "
               "RA levels rose; RA was stopped.")
    ents = [(e.text, e.label_) for e in doc.ents]
    # every "RA" becomes CHEMICAL, also where a wrong prediction overlapped it ("RA levels")
    assert ents.count(("RA", "CHEMICAL")) == 3 and ("RA levels", "DISEASE") not in ents
    assert ("retinoic acid", "CHEMICAL") in ents
    # DISEASE is not in the labels given: "ALL" stays unlabelled
    assert ("ALL", "DISEASE") not in ents and ("acute lymphoblastic leukemia", "DISEASE") in ents
    assert pipe.pipe_names[-1] == "abbreviation_entities"


def test_a_short_form_in_the_other_number_takes_the_same_long_form():
    """"septal defects (VSDs)" then "a VSD"; "(NSAID)" then "NSAIDs": scispaCy's detector finds only the form
    defined, so the other one lost its long form (the linker then linked "VSD" alone: VISCERAL MYOPATHY)."""
    from spacy_sapbert.pipes.abbreviations import abbreviation_pairs, other_number

    assert [other_number(s) for s in ("VSDs", "NSAID", "MS", "Hs", "Ca", "IL-2", "ND-NMBAs")] == \
        ["VSD", "NSAIDs", "MSs", None, None, None, None]
    pipe = scispacy_blank(split_hyphens=True)
    ruler = pipe.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "DISEASE", "pattern": "ventricular septal defects"},
                        {"label": "CHEMICAL", "pattern": "nonsteroidal anti-inflammatory drug"}])
    pipe.add_pipe("abbreviation_entities")
    doc = pipe("They had ventricular septal defects (VSDs) after a nonsteroidal anti-inflammatory drug (NSAID). "
               "A VSD was closed; two NSAIDs and an NSAID were stopped.")
    pairs = [(short.text, long_text) for short, long_text in abbreviation_pairs(doc)]
    assert ("VSD", "ventricular septal defects") in pairs and ("NSAIDs", "nonsteroidal anti-inflammatory drug") in pairs
    assert pairs.count(("NSAID", "nonsteroidal anti-inflammatory drug")) == 2  # the definition and the later use, as before
    ents = [(e.text, e.label_) for e in doc.ents]
    assert ("VSD", "DISEASE") in ents and ("NSAIDs", "CHEMICAL") in ents


def test_a_short_form_whose_long_form_is_no_entity_is_dropped():
    """"bone mineral density (BMD)": the abstract says what BMD is, so a NER's "BMD" (Becker muscular dystrophy
    elsewhere) is no disease here; a short form whose long form is an entity stays, and so does every other
    entity, also one of a label the pipe does not handle."""
    def run(**config):
        pipe = scispacy_blank(split_hyphens=True)
        ruler = pipe.add_pipe("entity_ruler")
        ruler.add_patterns([{"label": "DISEASE", "pattern": "BMD"}, {"label": "CHEMICAL", "pattern": "HT"},
                            {"label": "CHEMICAL", "pattern": "retinoic acid"}])
        pipe.add_pipe("abbreviation_entities", config=config)
        doc = pipe("Bone mineral density (BMD) fell with retinoic acid (RA) and hydroxytryptamine (HT). "
                   "BMD was low; RA and HT were stopped.")
        return [(e.text, e.label_) for e in doc.ents]

    ents = run()
    assert ("BMD", "DISEASE") not in ents and ents.count(("RA", "CHEMICAL")) == 2
    assert ("HT", "CHEMICAL") not in ents
    assert run(labels=["DISEASE"]).count(("HT", "CHEMICAL")) == 2  # CHEMICAL is not this pipe's to drop
    assert run(drop_unlabelled_short_forms=False).count(("BMD", "DISEASE")) == 2


def test_abbreviation_entities_leave_docs_without_abbreviations_alone():
    pipe = scispacy_blank()
    ruler = pipe.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "CHEMICAL", "pattern": "cocaine"}])
    pipe.add_pipe("abbreviation_entities")
    doc = pipe("Seizures after cocaine (in rats) were seen.")
    assert [(e.text, e.label_) for e in doc.ents] == [("cocaine", "CHEMICAL")]
