"""scripts/e2e_misses.py: each missed document concept is put down to the right stage."""
import importlib.util
from pathlib import Path

from spacy_sapbert.training.ner.e2e_table import Entity

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "e2e_misses.py"


def load_script():
    spec = importlib.util.spec_from_file_location("e2e_misses", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_miss_causes_name_the_stage_that_lost_each_concept():
    misses = load_script()
    mentions = {("1", "DISEASE", "D1"): [(0, 5)], ("1", "DISEASE", "D2"): [(10, 15)],
                ("1", "DISEASE", "D3"): [(20, 25)], ("1", "DISEASE", "D4"): [(30, 35)],
                ("1", "DISEASE", "D5"): [(40, 45)]}
    entities = [Entity("1", 10, 15, "DISEASE", "D9", 0.9),    # D2: another concept
                Entity("1", 18, 23, "DISEASE", "D3", 0.2),    # D3: overlapping span, right concept, low score
                Entity("1", 30, 35, "CHEMICAL", "C1", 0.9),   # D4: only a span of the other label
                Entity("2", 40, 45, "DISEASE", "D5", 0.9)]    # D5: another document's entity does not count
    causes = misses.miss_causes(set(mentions), entities, mentions)
    assert causes == {"NER: no entity on any mention": 2, "linker: another concept": 1,
                      "linker: the right concept below the threshold": 1, "NER: another label only": 1}


def test_newer_descriptors_have_ten_character_uis():
    misses = load_script()
    assert misses.newer_descriptor("D000077212")
    assert not misses.newer_descriptor("D001463") and not misses.newer_descriptor("C037663")


def test_an_ncbi_corpus_is_read_with_its_own_types():
    from spacy_sapbert.training.corpora import Document, Mention
    misses = load_script()
    ncbi = [Document("1", "Breast cancer", "", [Mention(0, 13, "Breast cancer", "SpecificDisease", ("D001943",)),
                                                Mention(0, 6, "Breast", "Modifier", ("D001943",))])]
    cdr = [Document("2", "Cisplatin nephrotoxicity", "", [Mention(0, 9, "Cisplatin", "Chemical", ("D002945",)),
                                                          Mention(10, 24, "nephrotoxicity", "Disease", ("D007674",))])]
    label_map, labels = misses.corpus_labels(ncbi)
    assert labels == ["DISEASE"] and label_map["SpecificDisease"] == "DISEASE"
    label_map, labels = misses.corpus_labels(cdr)
    assert labels == ["CHEMICAL", "DISEASE"] and "SpecificDisease" not in label_map


def test_annotation_drift_is_a_wording_read_otherwise_in_training():
    from spacy_sapbert.training.corpora import Document, Mention
    misses = load_script()
    train = [Document("1", "An antidepressant and an antidepressant-like drug.", "",
                      [Mention(3, 17, "antidepressant", "Chemical", ("D000928",)),
                       Mention(25, 39, "antidepressant", "Chemical", ("D000928",))]),
             Document("2", "Analgesia; analgesia again.", "", [])]
    dev = [Document("3", "Antidepressants? No: one antidepressant, and analgesia.", "",
                    [Mention(45, 54, "analgesia", "Disease", ("D000699",))])]
    rates = misses.tag_rates(train, {"antidepressant", "analgesia", "lithium"})
    assert rates == {"antidepressant": (2, 2), "analgesia": (0, 2), "lithium": (0, 0)}  # whole words only
    here = misses.tag_rates(dev, {"antidepressant", "analgesia", "lithium"})
    assert misses.drifted({"antidepressant"}, rates, here, stated=True)       # tagged in training, never here
    assert not misses.drifted({"antidepressant"}, rates, here, stated=False)
    assert misses.drifted({"analgesia"}, rates, here, stated=False)           # here tagged, never in training
    assert not misses.drifted({"analgesia", "lithium"}, rates, here, stated=False)  # one wording unseen: not drift
    assert not misses.drifted(set(), rates, here, stated=True)
