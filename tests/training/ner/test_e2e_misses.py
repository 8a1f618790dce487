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


def test_annotation_drift_is_a_wording_read_otherwise_in_training(tmp_path):
    import spacy

    misses = load_script()
    train, dev = tmp_path / "train.txt", tmp_path / "dev.txt"
    train.write_text("1|t|An antidepressant and an antidepressant-like drug.\n1|a|\n"
                     "1\t3\t17\tantidepressant\tChemical\tD000928\n1\t25\t39\tantidepressant\tChemical\tD000928\n\n"
                     "2|t|Analgesia; analgesia again.\n2|a|\n2\t0\t9\tAnalgesia\tChemical\tD000700\n\n",
                     encoding="utf-8")
    dev.write_text("3|t|Antidepressants? No: one antidepressant, and analgesia.\n3|a|\n"
                   "3\t45\t54\tanalgesia\tDisease\tD000699\n\n", encoding="utf-8")
    nlp = spacy.blank("en")
    keys = {("CHEMICAL", "antidepressant"), ("DISEASE", "analgesia"), ("CHEMICAL", "lithium")}
    rates = misses.annotation_rates_in(nlp, [train], keys)
    # whole tokens only; train annotates no disease, so its "analgesia" counts for no DISEASE rate
    assert rates == {("CHEMICAL", "antidepressant"): (2, 2), ("DISEASE", "analgesia"): (0, 0),
                     ("CHEMICAL", "lithium"): (0, 0)}
    assert misses.annotation_rates_in(nlp, [train], {("CHEMICAL", "analgesia")}) == {("CHEMICAL", "analgesia"): (1, 2)}
    here = misses.annotation_rates_in(nlp, [dev], keys | {("CHEMICAL", "analgesia")})
    assert here[("CHEMICAL", "antidepressant")] == (0, 0)  # dev annotates no chemical
    assert here[("DISEASE", "analgesia")] == (1, 1)
    antidepressant = {("CHEMICAL", "antidepressant")}
    assert misses.drifted(antidepressant, rates, here, stated=True)        # tagged in training, never here
    assert not misses.drifted(antidepressant, rates, here, stated=False)
    never = {("DISEASE", "analgesia"): (0, 2), ("CHEMICAL", "lithium"): (0, 0)}
    assert misses.drifted({("DISEASE", "analgesia")}, never, here, stated=False)  # here tagged, never in training
    assert not misses.drifted({("DISEASE", "analgesia"), ("CHEMICAL", "lithium")}, never, here, stated=False)
    assert not misses.drifted(set(), rates, here, stated=True)
