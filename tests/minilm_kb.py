"""Thirty-two hand-written MeSH concepts for the one test that uses the real MiniLM."""
from __future__ import annotations

from spacy_sapbert.kb.knowledge_base import Concept, KnowledgeBase

_ROWS = [
    ("D006886", "Hydroxychloroquine", ["Plaquenil", "HCQ", "hydroxychloroquine sulfate", "Oxychlorochin"], "Chemical"),
    ("D002738", "Chloroquine", ["Aralen", "chloroquine phosphate", "Chlorochin"], "Chemical"),
    ("D001241", "Aspirin", ["acetylsalicylic acid", "Acylpyrin"], "Chemical"),
    ("D000082", "Acetaminophen", ["paracetamol", "Tylenol"], "Chemical"),
    ("D007052", "Ibuprofen", ["Advil", "Motrin"], "Chemical"),
    ("D008687", "Metformin", ["dimethylbiguanidine", "Glucophage"], "Chemical"),
    ("D007328", "Insulin", ["regular insulin"], "Chemical"),
    ("D004317", "Doxorubicin", ["Adriamycin", "hydroxydaunorubicin"], "Chemical"),
    ("D002945", "Cisplatin", ["cis-diamminedichloroplatinum", "Platinol"], "Chemical"),
    ("D016190", "Carboplatin", ["Paraplatin"], "Chemical"),
    ("D009203", "Myocardial Infarction", ["heart attack", "cardiac infarction", "myocardial infarct"], "Disease"),
    ("D006333", "Heart Failure", ["cardiac failure", "congestive heart failure"], "Disease"),
    ("D006973", "Hypertension", ["high blood pressure", "arterial hypertension"], "Disease"),
    ("D020521", "Stroke", ["cerebrovascular accident", "apoplexy"], "Disease"),
    ("D001943", "Breast Neoplasms", ["breast cancer", "breast tumor", "mammary neoplasm"], "Disease"),
    ("D008175", "Lung Neoplasms", ["lung cancer", "pulmonary neoplasm"], "Disease"),
    ("D011471", "Prostatic Neoplasms", ["prostate cancer", "prostate tumor"], "Disease"),
    ("D015179", "Colorectal Neoplasms", ["colorectal cancer", "colorectal tumor"], "Disease"),
    ("D003920", "Diabetes Mellitus", ["diabetes"], "Disease"),
    ("D003922", "Diabetes Mellitus, Type 1", ["type 1 diabetes", "insulin-dependent diabetes", "IDDM"], "Disease"),
    ("D003924", "Diabetes Mellitus, Type 2", ["type 2 diabetes", "non-insulin-dependent diabetes", "NIDDM"], "Disease"),
    ("D051437", "Renal Insufficiency", ["kidney failure", "renal failure"], "Disease"),
    ("D008103", "Liver Cirrhosis", ["hepatic cirrhosis", "cirrhosis of liver"], "Disease"),
    ("D001249", "Asthma", ["bronchial asthma"], "Disease"),
    ("D000544", "Alzheimer Disease", ["Alzheimer's disease", "senile dementia of the Alzheimer type"], "Disease"),
    ("D010300", "Parkinson Disease", ["Parkinson's disease", "paralysis agitans"], "Disease"),
    ("D009103", "Multiple Sclerosis", ["disseminated sclerosis"], "Disease"),
    ("D004827", "Epilepsy", ["seizure disorder"], "Disease"),
    ("D012559", "Schizophrenia", ["dementia praecox"], "Disease"),
    ("D015658", "HIV Infections", ["HIV disease", "human immunodeficiency virus infection"], "Disease"),
    ("D014376", "Tuberculosis", ["TB", "consumption"], "Disease"),
    ("D008288", "Malaria", ["plasmodium infection", "paludism"], "Disease"),
]


def minilm_kb() -> KnowledgeBase:
    return KnowledgeBase([Concept(cid, name, aliases, [kind]) for cid, name, aliases, kind in _ROWS], name="mesh30")
