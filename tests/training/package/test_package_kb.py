"""A KB with the training mentions as names (``sapbert kb-add-mentions``) and swapping the KB of
a packaged default pipeline (``sapbert package-kb``): the encoder and the NER stay byte for byte."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

from spacy_sapbert.errors import InputError
from spacy_sapbert.index.name_index import NameIndex
from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.training.kb_mentions import add_training_mentions, annotated_names_from_corpora
from spacy_sapbert.training.package.build import build_default_pipeline
from spacy_sapbert.training.package.swap_kb import replace_kb

from tests.linker_fixtures import small_kb, write_small_kb
from tests.training.package.test_package import _blank_ner

FIX = Path(__file__).parents[2] / "fixtures" / "evaluate"
TRAIN, KB = FIX / "train.PubTator.txt", FIX / "kb.jsonl"


def _app():
    from spacy_sapbert.cli import app
    from spacy_sapbert.training.cli import register

    register(app)
    return app


def test_training_mentions_become_names_and_unknown_ids_typed_concepts():
    kb = KnowledgeBase.from_jsonl(KB)
    extended, report = add_training_mentions(kb, [TRAIN])
    assert "breast tumour" in KnowledgeBase.normalized_names(extended["D001943"])
    assert extended.alias_to_concepts.get("heart attacks") == ["D009203"]
    # "ACTH deficiency" has an ID the KB lacks: a concept of its own, typed by its mention (Disease)
    assert extended["C535668"].types == ["Disease"] and "C535668" not in kb
    assert report["concepts_before"] == len(kb) and report["concepts_after"] == len(extended)
    # 6 mentions: 4 single, one text-pattern composite (not added), one aligned composite (2 names)
    assert report["mentions_with_ids"] == 6 and report["training_names"] == 6 and report["names_added"] == 6


def test_the_kbs_own_senses_win_over_annotators_conventions(tmp_path):
    text = "Hemorrhagic cystitis. Yyy disease, yyy disease and yyy disease. Zzz syndrome and zzz syndrome."
    mentions = [("Hemorrhagic", "D003556"), ("Yyy disease", "D007674"), ("yyy disease", "D007674"),
                ("yyy disease", "D009369"), ("Zzz syndrome", "D007674"), ("zzz syndrome", "D009369")]
    lines, at = [f"9|t|{text}", "9|a|"], 0
    for mention, cid in mentions:
        start = text.index(mention, at)
        at = start + len(mention)
        lines.append(f"9\t{start}\t{at}\t{mention}\tDisease\t{cid}")
    corpus = tmp_path / "conventions.PubTator"
    corpus.write_text("\n".join(lines) + "\n")
    kb = KnowledgeBase.from_jsonl(KB)  # "hemorrhagic" is a name of D006470 (Hemorrhage) there
    kept, report = add_training_mentions(kb, [corpus])
    assert kept.alias_to_concepts["hemorrhagic"] == ["D006470"]  # not tied with the annotators' Cystitis
    assert kept.alias_to_concepts["yyy disease"] == ["D007674"]  # the majority sense of a new name
    assert "zzz syndrome" not in kept.alias_to_concepts  # a tie: no sense
    assert report["names_skipped"] == {"kb_name_of_other_concepts": 1, "minority_or_tied_sense_in_training": 3}
    every, report = add_training_mentions(kb, [corpus], keep_kb_senses=False)  # the papers' test dictionary
    assert set(every.alias_to_concepts["hemorrhagic"]) == {"D003556", "D006470"}
    assert set(every.alias_to_concepts["zzz syndrome"]) == {"D007674", "D009369"} and report["names_skipped"] == {}


def test_command_writes_a_new_kb_and_never_overwrites(tmp_path):
    out = tmp_path / "kb-train.jsonl.gz"
    result = CliRunner().invoke(_app(), ["kb-add-mentions", str(KB), str(TRAIN), "-o", str(out),
                                         "--report", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert "C535668" in KnowledgeBase.from_jsonl(out)
    assert json.loads((tmp_path / "r.json").read_text())["output"] == str(out)
    before = out.read_bytes()
    again = CliRunner().invoke(_app(), ["kb-add-mentions", str(KB), str(TRAIN), "-o", str(out)])
    assert again.exit_code == 2 and "nothing is overwritten unasked" in again.output and out.read_bytes() == before


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_replace_kb_keeps_encoder_and_ner_and_indexes_the_new_names(tiny_bert, tmp_path, monkeypatch):
    kb_path = write_small_kb(tmp_path)
    package = tmp_path / "default"
    build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, kb_path, package, pq_m=8)
    extended, _ = add_training_mentions(KnowledgeBase.from_jsonl(kb_path), [TRAIN])
    new_kb = extended.to_jsonl(tmp_path / "small-train.jsonl")
    out = tmp_path / "swapped"
    report = replace_kb(package, new_kb, out, exact_index=tmp_path / "flat")
    for part in ("ner", "sapbert_linker/encoder", "vocab"):
        assert _tree(out / part) == _tree(package / part)
    nlp = spacy.load(out)
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.index.kind == "pq" and linker.index.manifest["params"]["pq_m"] == 8  # the package's kind
    assert len(linker.kb) == len(extended) and report["index_rows"] == len(linker.index)
    assert linker.index.manifest["kb_fingerprint"] == extended.fingerprint()
    assert nlp.config["components"]["sapbert_linker"]["kb"] == str(new_kb)
    assert json.loads((out / "build.json").read_text())["kb"] == "small-train"
    # in place, reusing the exact index saved above (its fingerprints match): nothing is encoded
    before = {part: _tree(out / part) for part in ("ner", "sapbert_linker/encoder", "vocab")}
    with monkeypatch.context() as patch:
        patch.setattr(NameIndex, "build", lambda *a, **k: pytest.fail("the saved exact index was not reused"))
        replace_kb(out, new_kb, out, exact_index=tmp_path / "flat", reuse_exact=True)
    assert {part: _tree(out / part) for part in before} == before
    assert len(spacy.load(out).get_pipe("sapbert_linker").index) == report["index_rows"]
    with pytest.raises(InputError, match="not a packaged default pipeline"):
        replace_kb(tmp_path / "ner", new_kb, tmp_path / "x")
    # a folder that is not a saved index is refused before anything is encoded, and kept
    stray = tmp_path / "not-an-index"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with monkeypatch.context() as patch:
        patch.setattr(NameIndex, "build", lambda *a, **k: pytest.fail("encoded before checking --exact-index"))
        with pytest.raises(InputError, match="--exact-index"):
            replace_kb(out, new_kb, tmp_path / "elsewhere", exact_index=stray)
    assert (stray / "notes.txt").read_text() == "mine" and not (tmp_path / "elsewhere").exists()


def test_replace_kb_fits_the_calibration_again_on_the_new_kb(tiny_bert, tmp_path):
    from spacy_sapbert.linking.calibration import Calibration

    from tests.linking.test_calibration import write_gold_corpus

    kb_path = write_small_kb(tmp_path)
    package = tmp_path / "default"
    build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, kb_path, package, pq_m=8)
    extended, _ = add_training_mentions(KnowledgeBase.from_jsonl(kb_path), [TRAIN])
    new_kb = extended.to_jsonl(tmp_path / "small-train.jsonl")
    report = replace_kb(package, new_kb, package, calibrate_on=write_gold_corpus(tmp_path), min_precision=0.5,
                        kb_description="a test KB")
    fitted = report["calibration"]
    assert fitted["fitted_on"] == "gold.PubTator: 8 gold spans" and not report["calibration_fitted_on_previous_kb"]
    nlp = spacy.load(package)
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.threshold == fitted["threshold"] == nlp.config["components"]["sapbert_linker"]["threshold"]
    assert fitted["threshold"] == math.ceil(fitted["fitted_threshold"] * 1e4) / 1e4  # rounded up to 4 decimals
    assert isinstance(linker.calibration, Calibration)
    card = (package / "README.md").read_text()
    assert "## Calibration" in card and "a test KB" in card and f"threshold is {fitted['threshold']}" in card


def test_replace_kb_sets_the_default_threshold_chosen_for_the_new_kb_and_drops_the_old_choice(tiny_bert, tmp_path):
    from tests.linking.test_calibration import write_gold_corpus

    kb_path = write_small_kb(tmp_path)
    package = tmp_path / "default"
    build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, kb_path, package, pq_m=8)
    gold = write_gold_corpus(tmp_path)
    with pytest.raises(InputError, match="between 0 and 1"):  # refused before any encoding
        replace_kb(package, kb_path, tmp_path / "never", calibrate_on=gold, threshold=1.5)
    assert not (tmp_path / "never").exists()
    renamed = tmp_path / "renamed-kb.jsonl"  # the config must record the new KB file's path
    renamed.write_bytes(kb_path.read_bytes())
    report = replace_kb(package, renamed, package, calibrate_on=gold, min_precision=0.5, threshold=0.3,
                        threshold_reason="the best document F1 on dev")
    assert report["default_threshold"] == {"value": 0.3, "chosen_for": "the best document F1 on dev"}
    nlp = spacy.load(package)
    assert nlp.get_pipe("sapbert_linker").threshold == 0.3 == nlp.config["components"]["sapbert_linker"]["threshold"]
    assert "the threshold is 0.3 (the best document F1 on dev)" in (package / "README.md").read_text()
    assert spacy.util.load_config(package / "config.cfg")["components"]["sapbert_linker"]["kb"] == str(renamed)
    config = spacy.util.load_config(package / "config.cfg")  # a per-label choice made on these scores
    config["components"]["sapbert_linker"]["label_thresholds"] = {"ENT": 0.8}
    config.to_disk(package / "config.cfg")
    assert spacy.load(package).get_pipe("sapbert_linker").label_thresholds == {"ENT": 0.8}
    again = replace_kb(package, kb_path, package, calibrate_on=gold, min_precision=0.5)  # calibrated again, no choice
    assert "default_threshold" not in again
    assert spacy.load(package).get_pipe("sapbert_linker").threshold == again["calibration"]["threshold"]
    assert spacy.load(package).get_pipe("sapbert_linker").label_thresholds is None  # chosen on the old scores


def _pubtator(pmid: str, title: str, abstract: str, mentions: list) -> str:
    """A PubTator document whose mentions are (text, IDs, parts or None), each at its first place after the last."""
    text, lines, at = f"{title} {abstract}", [f"{pmid}|t|{title}", f"{pmid}|a|{abstract}"], 0
    for mention, ids, parts in mentions:
        at = text.index(mention, at)
        lines.append("\t".join([pmid, str(at), str(at + len(mention)), mention, "Disease", ids] + ([parts] if parts else [])))
        at += len(mention)
    return "\n".join(lines) + "\n\n"


def test_a_coordinated_training_mention_votes_once_for_its_set_whatever_the_order_of_its_ids(tmp_path):
    corpus = tmp_path / "train.PubTator.txt"
    corpus.write_text(
        # BC5CDR's 7th column can give a part that is the whole wording: that part casts no vote of its own
        _pubtator("1", "Heart attack of the kidney.", "Kidney and heart failure was seen.",
                  [("Heart attack of the kidney", "D009203|D007674", "Heart attack|Heart attack of the kidney"),
                   ("Kidney and heart failure", "D051437|D009203", "Kidney failure|heart failure")])
        # another corpus writes the same pair in the other order
        + _pubtator("2", "Kidney and heart failure.", "None else.", [("Kidney and heart failure", "D009203|D051437", None)]),
        encoding="utf-8")
    table = annotated_names_from_corpora([corpus])
    assert table.names.get("heart attack of the kidney") is None
    assert table.names["heart attack"] == {"D009203": 1}  # the aligned part that is not the whole still counts
    assert table.composites["heart attack of the kidney"] == {("D009203", "D007674"): 1}
    assert table.composites["kidney and heart failure"] == {("D051437", "D009203"): 1, ("D009203", "D051437"): 1}
    decided = table.for_kb(small_kb())
    assert decided.parts(["Heart attack of the kidney", "kidney and heart failure"], None, [None, None]) == [
        [("D009203", pytest.approx(2 / 3)), ("D007674", pytest.approx(2 / 3))],  # 1 of 1, not a tie with a part
        [("D009203", pytest.approx(3 / 4)), ("D051437", pytest.approx(3 / 4))]]  # 2 of 2: both orders vote together
    # (one mention each: the first order by ID, the same after the table is written and read back)
    table.to_disk(tmp_path / "names.json")
    from spacy_sapbert.linking.annotated_names import AnnotatedNames

    assert AnnotatedNames.from_disk(tmp_path / "names.json").for_kb(small_kb()).parts(
        ["kidney and heart failure"], None, [None]) == decided.parts(["kidney and heart failure"], None, [None])
    assert len(table) == len(set(table.names) | {"heart attack of the kidney", "kidney and heart failure"})


def test_annotation_commands_write_new_files_from_the_training_mentions_and_never_overwrite(tmp_path):
    names, patterns = tmp_path / "names.json", tmp_path / "patterns.jsonl"
    for command, out in (["annotated-names", str(TRAIN), "--kb", str(KB), "-o", str(names)], names), \
                        (["ner-dictionary", str(TRAIN), "-o", str(patterns)], patterns):
        result = CliRunner().invoke(_app(), command)
        assert result.exit_code == 0, result.output
        before = out.read_bytes()
        again = CliRunner().invoke(_app(), command)
        assert again.exit_code == 2 and "nothing is overwritten unasked" in again.output
        assert out.read_bytes() == before
    from spacy_sapbert.linking.annotated_names import AnnotatedNames

    table = AnnotatedNames.from_disk(names).for_kb(KnowledgeBase.from_jsonl(KB))
    assert table.lookup("heart attacks") == ("D009203", pytest.approx(2 / 3))  # one mention, one vote
    wordings = {" ".join(t["LOWER"] for t in json.loads(line)["pattern"]) for line in patterns.open()}
    assert "heart attacks" in wordings
    exclusions = tmp_path / "exclusions.tsv"
    args = ["ner-dictionary", str(TRAIN), "-o", str(tmp_path / "p2.jsonl"), "--exclusions", str(exclusions),
            "--min-seen", "1"]
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["exclusions"]["min_seen"] == 1
    from spacy_sapbert.pipes.dictionary import read_exclusions

    written = read_exclusions(exclusions)
    assert written and all(label in ("CHEMICAL", "DISEASE") for label, _ in written)
    again = CliRunner().invoke(_app(), args[:3] + [str(tmp_path / "p3.jsonl")] + args[4:])
    assert again.exit_code == 2 and "--exclusions" in again.output and not (tmp_path / "p3.jsonl").exists()
    # --grow-names: the KB's names of the label's types, cut by the pipeline's tokenizer; a label the linker
    # has no types for is refused before anything is read or written
    grow = tmp_path / "grow.tsv.gz"
    bad = CliRunner().invoke(_app(), ["ner-dictionary", str(TRAIN), "-o", str(tmp_path / "p4.jsonl"),
                                      "--grow-names", str(grow), "--kb", str(KB), "--grow-label", "GENE"])
    assert bad.exit_code == 2 and "GENE" in bad.output, bad.output
    assert not (tmp_path / "p4.jsonl").exists() and not grow.exists()
    untyped = CliRunner().invoke(_app(), ["ner-dictionary", str(TRAIN), "-o", str(tmp_path / "p4.jsonl"),
                                          "--grow-names", str(grow), "--kb", str(KB), "--overwrite"])
    assert untyped.exit_code == 2 and "no name of 2 or more word tokens" in untyped.output  # the fixture has no types
    typed = tmp_path / "typed.jsonl"
    typed.write_text("".join(line.replace('"types": []', '"types": ["Disease"]') for line in KB.open()), encoding="utf-8")
    good = CliRunner().invoke(_app(), ["ner-dictionary", str(TRAIN), "-o", str(tmp_path / "p4.jsonl"),
                                       "--grow-names", str(grow), "--kb", str(typed), "--overwrite"])
    assert good.exit_code == 0, good.output
    from spacy_sapbert.ner.name_growth import read_grow_names

    grown = read_grow_names(grow)
    assert grown.labels == ("DISEASE",) and len(grown) == json.loads(good.stdout)["grow_names"]["names"] > 0
    assert all(" " in name for _, name in grown.pairs())


def test_refinement_codes_are_added_to_a_package_whose_kb_stays_leaving_its_index_file_byte_for_byte(tiny_bert,
                                                                                                  tmp_path):
    kb_path = write_small_kb(tmp_path)
    package = tmp_path / "default"
    build_default_pipeline(_blank_ner(tmp_path / "ner"), tiny_bert, kb_path, package, pq_m=8, refine_m=0)
    index_dir = package / "sapbert_linker" / "index"
    codes = (index_dir / "index.faiss").read_bytes()
    assert not (index_dir / "refine.faiss").exists()
    out = tmp_path / "refined"
    report = replace_kb(package, kb_path, out, index_params={"refine_m": 8}, rescore_gap=0.02,
                        kb_description="a test KB")
    refined_dir = out / "sapbert_linker" / "index"
    assert (refined_dir / "index.faiss").read_bytes() == codes and (refined_dir / "refine.faiss").is_file()
    assert report["index_params"]["refine_m"] == 8 and report["rescore_gap"] == 0.02
    nlp = spacy.load(out)
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.index.refine_codes is not None and linker.settings.rescore_gap == 0.02
    assert nlp.config["components"]["sapbert_linker"]["rescore_gap"] == 0.02
    assert "and 8 bytes of residual codes" in (out / "README.md").read_text()
    assert nlp("heart attack").ents == ()  # the blank NER finds nothing, but the package runs
    replace_kb(out, kb_path, out, index_params={"refine_m": 0})  # and taken away again
    assert (refined_dir / "index.faiss").read_bytes() == codes and not (refined_dir / "refine.faiss").exists()
