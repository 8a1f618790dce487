"""`sapbert package-annotations`: a ruler after the NER and the linker's annotated names, the rest byte for byte."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import spacy

from spacy_sapbert.default import DEFAULT_PIPELINE
from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.annotated_names import AnnotatedNames
from spacy_sapbert.linking.exact_names import write_exact_names
from spacy_sapbert.training.package.swap_annotations import add_annotations


def _digests(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _inputs(folder: Path) -> tuple:
    names = folder / "names.json"
    # "zorbitol" is no KB name; the table decides it is Sorbitol (D013012), whatever the dense search says
    AnnotatedNames.from_pairs([("D013012", "zorbitol"), ("D013012", "Zorbitol")]).to_disk(names)
    patterns = folder / "patterns.jsonl"
    patterns.write_text(json.dumps({"label": "CHEMICAL", "pattern": [{"LOWER": "zorbitol"}]}) + "\n", encoding="utf-8")
    return names, patterns


def test_the_ruler_and_table_are_added_and_everything_else_is_kept(tmp_path):
    names, patterns = _inputs(tmp_path)
    out = tmp_path / "out"
    report = add_annotations(DEFAULT_PIPELINE, names, patterns, out)
    assert report["annotations"]["patterns"] == 1 and report["annotations"]["wordings"] == 1
    assert "1 training wordings (BC5CDR and NCBI train: a span" in (out / "README.md").read_text()  # no sources kept
    nlp = spacy.load(out)
    ner = nlp.pipe_names.index("sapbert_ner")
    assert nlp.pipe_names[ner + 1] == "dictionary_entities" and nlp.pipe_names[-1] == "sapbert_linker"
    default = Path(DEFAULT_PIPELINE)
    assert _digests(out / "sapbert_ner") == _digests(default / "sapbert_ner")
    for part in ("encoder", "index", "kb.jsonl.gz", "cfg.json"):
        source, copy = default / "sapbert_linker" / part, out / "sapbert_linker" / part
        assert (_digests(source) == _digests(copy)) if source.is_dir() else source.read_bytes() == copy.read_bytes()
    assert nlp.get_pipe("sapbert_linker").label_thresholds == {"CHEMICAL": 0.9}  # the default's, kept
    # two votes of two mentions score (2 + 1) / (2 + 2) = 0.75: below the CHEMICAL threshold, so no concept ...
    assert {e.text: e.kb_id_ for e in nlp("Patients were given zorbitol daily.").ents}["zorbitol"] == ""
    nlp.get_pipe("sapbert_linker").label_thresholds = None  # ... and at the default threshold, 0.65, the table's
    doc = nlp("Patients were given zorbitol daily.")
    found = {e.text: (e.label_, e.kb_id_) for e in doc.ents}
    assert found["zorbitol"] == ("CHEMICAL", "D013012"), found
    # done again on its own output: the ruler and table are replaced, not doubled; the card names the table's files
    table = AnnotatedNames.from_disk(names)
    table.sources = ["CDR_TrainingSet.PubTator.txt", "biored-disease.PubTator"]
    table.to_disk(names)
    add_annotations(out, names, patterns, out)
    assert "(CDR_TrainingSet.PubTator.txt, biored-disease.PubTator: a span" in (out / "README.md").read_text()
    again = spacy.load(out)
    assert again.pipe_names.count("dictionary_entities") == 1
    assert len(again.get_pipe("dictionary_entities").patterns) == 1
    assert "entity_ruler" not in again.pipe_names
    text = "Patients with hypertension were given zorbitol daily."
    assert ("hypertension", "DISEASE") in [(e.text, e.label_) for e in again(text).ents]
    # with exclusions: the NER's entities that are exactly an excluded wording (with its label) are removed
    exclusions = tmp_path / "exclusions.tsv"
    exclusions.write_text("DISEASE\thypertension\n", encoding="utf-8")
    report = add_annotations(out, names, patterns, out, exclusions=exclusions)
    assert report["annotations"]["exclusions"] == 1
    excluding = spacy.load(out)
    assert [(e.text, e.label_) for e in excluding(text).ents] == [("zorbitol", "CHEMICAL")]
    with pytest.raises(InputError, match="missing.tsv"):
        add_annotations(out, names, patterns, tmp_path / "other", exclusions=tmp_path / "missing.tsv")
    # with KB names to grow to: the NER's "zorbic" and "hypertension" become the one name they lie in
    grow = tmp_path / "grow.tsv"
    grow.write_text("DISEASE\tzorbic hypertension\n", encoding="utf-8")
    text = "Patients with zorbic hypertension were given zorbitol daily."
    assert ("zorbic hypertension", "DISEASE") not in [(e.text, e.label_) for e in spacy.load(out)(text).ents]
    report = add_annotations(out, names, patterns, out, grow_names=grow)
    assert report["annotations"]["grow_names"] == 1
    assert [(e.text, e.label_) for e in spacy.load(out)(text).ents] == [("zorbic hypertension", "DISEASE"),
                                                                        ("zorbitol", "CHEMICAL")]
    # the default's exact-names table stays byte for byte without one given; a given one replaces it
    kept = out / "sapbert_linker" / "exact_names.tsv.xz"
    assert kept.read_bytes() == (default / "sapbert_linker" / "exact_names.tsv.xz").read_bytes()
    small = write_exact_names(tmp_path / "exact.tsv.xz", [("C999999", ("Chemical",), "zorbamide", ["zorbamide"])],
                              0.95, "test.tsv")
    report = add_annotations(out, names, patterns, out, exact_names=small)
    assert report["annotations"]["exact_names"] == {"concepts": 1, "names": 1, "score": 0.95, "source": "test.tsv"}
    assert kept.read_bytes() == small.read_bytes()
    assert "among 1 MeSH supplementary records the KB lacks" in (out / "README.md").read_text()


def test_bad_inputs_are_named(tmp_path):
    names, patterns = _inputs(tmp_path)
    patterns.write_text('{"label": "CHEMICAL", "pattern": [{"LOWER": "x"}]}\n{"pattern": "y"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="patterns.jsonl:2"):
        add_annotations(DEFAULT_PIPELINE, names, patterns, tmp_path / "out")
    with pytest.raises(InputError, match="nowhere.json"):
        add_annotations(DEFAULT_PIPELINE, tmp_path / "nowhere.json", patterns, tmp_path / "out")
    assert not (tmp_path / "out").exists()
