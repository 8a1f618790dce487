"""The one test with the real all-MiniLM-L6-v2: the pipe's default model links sensibly."""
from __future__ import annotations

import spacy

from tests.minilm_kb import minilm_kb

# Variants that are not KB names (plurals, spelling, synonyms the KB lacks, brand + dose form).
EXPECTED = {
    "hydroxychloroquine sulphate": "D006886",
    "Plaquenil tablets": "D006886",
    "hydroxy-chloroquine": "D006886",
    "heart attacks": "D009203",
    "acute myocardial infarction": "D009203",
    "breast carcinoma": "D001943",
    "carcinoma of the lung": "D008175",
    "type II diabetes": "D003924",
    "elevated blood pressure": "D006973",
    "chronic renal failure": "D051437",
    "Alzheimer dementia": "D000544",
    "cancer of the prostate": "D011471",
    "tylenol overdose": "D000082",
    "cisplatinum": "D002945",
    "pulmonary tuberculosis": "D014376",
}


def test_minilm_links_synonyms_and_abbreviations(tmp_path):
    import scispacy.abbreviation  # noqa: F401  (registers abbreviation_detector)

    kb_path = minilm_kb().to_jsonl(tmp_path / "mesh30.jsonl")
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns(
        [{"label": "ENT", "pattern": m} for m in EXPECTED] + [{"label": "ENT", "pattern": "PT"}])
    nlp.add_pipe("abbreviation_detector")
    nlp.add_pipe("sapbert_linker", config={"kb": str(kb_path), "max_entities_per_mention": 3})
    linker = nlp.get_pipe("sapbert_linker")

    docs = list(nlp.pipe([f"We saw {mention} here." for mention in EXPECTED]))
    got = {doc.ents[0].text: doc.ents[0].kb_id_ for doc in docs}
    assert got == EXPECTED
    assert linker.encoder.pooling == "mean"  # read from the model folder's sentence-transformers config
    assert all(0.7 < doc.ents[0]._.kb_ents[0][1] <= 1.0 + 1e-6 for doc in docs)

    # An abbreviation the KB does not know is linked through its long form.
    doc = nlp("Plaquenil tablets (PT) were given; PT was stopped.")
    short_forms = [e for e in doc.ents if e.text == "PT"]
    assert len(short_forms) == 2 and all(e.kb_id_ == "D006886" for e in short_forms)
    assert short_forms[0]._.kb_ents == doc.ents[0]._.kb_ents
