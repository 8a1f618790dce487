"""`sapbert corpus-select`: a BioRED-like corpus becomes a file the training commands read (chosen types renamed,
IDs parsed, held-out documents left out), and bad input is named."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from spacy_sapbert.errors import InputError
from spacy_sapbert.training.corpora import read_pubtator
from spacy_sapbert.training.corpus_select import corpus_select, parse_type_map, select_mentions

app = typer.Typer()
app.command("corpus-select")(corpus_select)
app.command("other")(lambda: None)  # two commands: the app keeps sub-command names, as `sapbert` does

BIORED = ("1|t|BRCA1 and breast cancer.\n1|a|Cisplatin was given.\n"
          "1\t0\t5\tBRCA1\tGeneOrGeneProduct\t672\n"
          "1\t10\t23\tbreast cancer\tDiseaseOrPhenotypicFeature\tD001943,D010051\n"
          "1\t25\t34\tCisplatin\tChemicalEntity\tD002945\n"
          "1\tAssociation\t672\tD001943\tNovel\n\n"
          "2|t|Held-out gout.\n2|a|Text.\n2\t9\t13\tgout\tDiseaseOrPhenotypicFeature\tD006073\n\n"
          "3|t|Unexplained fever.\n3|a|Text.\n3\t12\t17\tfever\tDiseaseOrPhenotypicFeature\t-\n\n")
HELD_OUT = "2|t|Held-out gout.\n2|a|Other text.\n\n"


def _files(tmp_path: Path) -> tuple:
    corpus, held_out = tmp_path / "Train.PubTator", tmp_path / "dev.txt"
    corpus.write_text(BIORED, encoding="utf-8")
    held_out.write_text(HELD_OUT, encoding="utf-8")
    return corpus, held_out


def test_the_chosen_types_are_kept_renamed_and_held_out_documents_dropped(tmp_path: Path) -> None:
    corpus, held_out = _files(tmp_path)
    docs, report = select_mentions([corpus], {"DiseaseOrPhenotypicFeature": "Disease"}, [held_out])
    assert [d.pmid for d in docs] == ["1", "3"]
    assert [(m.text, m.type, m.ids) for m in docs[0].mentions] == [("breast cancer", "Disease",
                                                                     ("D001943", "D010051"))]
    assert docs[1].mentions[0].ids == ()
    assert report["documents_dropped_held_out"] == 1 and report["mentions_kept"] == {"Disease": 2}
    assert report["mentions_without_id"] == {"Disease": 1}
    assert report["mentions_left_out"] == {"ChemicalEntity": 1, "GeneOrGeneProduct": 1}


def test_the_cli_writes_a_file_the_corpus_reader_takes_and_never_overwrites_unasked(tmp_path: Path) -> None:
    corpus, held_out = _files(tmp_path)
    out = tmp_path / "out" / "biored-disease.PubTator"
    args = ["corpus-select", str(corpus), "--type", "DiseaseOrPhenotypicFeature=Disease", "--type", "ChemicalEntity",
            "--drop-pmids-of", str(held_out), "--output", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output[result.output.index("{"):])["mentions_kept"] == {"ChemicalEntity": 1,
                                                                                      "Disease": 2}
    docs = list(read_pubtator(out))  # BC5CDR's shape: every command that takes training files reads it
    assert [(m.type, m.ids) for m in docs[0].mentions] == [("Disease", ("D001943", "D010051")),
                                                          ("ChemicalEntity", ("D002945",))]
    written = out.read_bytes()
    again = CliRunner().invoke(app, args)
    assert again.exit_code != 0 and "exists" in again.output and out.read_bytes() == written
    assert CliRunner().invoke(app, args + ["--overwrite"]).exit_code == 0
    kept = corpus.read_bytes()  # an input is never the output, --overwrite or not
    into_input = CliRunner().invoke(app, args[:-2] + ["--output", str(corpus), "--overwrite"])
    assert into_input.exit_code != 0 and "files read" in into_input.output and corpus.read_bytes() == kept


@pytest.mark.parametrize("specs, fragment", [(["=Disease"], "TYPE=NEW_NAME"), (["A=B", "A=C"], "given twice")])
def test_bad_type_specs_are_named(specs: list, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment) as err:
        parse_type_map(specs)
    assert err.value.field == "--type"


def test_a_document_in_two_corpora_is_refused(tmp_path: Path) -> None:
    corpus, held_out = _files(tmp_path)
    with pytest.raises(InputError, match="second time") as err:
        select_mentions([corpus, corpus], {"DiseaseOrPhenotypicFeature": "Disease"}, [])
    assert err.value.path == str(corpus)
