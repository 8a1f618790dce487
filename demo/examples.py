"""Example inputs shown in the demo, written for it (not taken from the evaluation corpora,
so that trying the demo never looks at test data).

Each abstract defines at least one abbreviation, so a first-time user sees the long forms,
and mixes diseases with chemicals, so both entity types show up.
"""
from __future__ import annotations

from typing import List

EXAMPLE_LABELS: List[str] = [
    "Hydroxychloroquine in lupus", "Cisplatin and the kidney", "BRCA1 and breast cancer", "Chest pain in diabetes",
]
EXAMPLE_ABSTRACTS: List[str] = [
    "Hydroxychloroquine (HCQ) is widely used in systemic lupus erythematosus (SLE) and "
    "rheumatoid arthritis. Long-term HCQ treatment is associated with retinopathy, and "
    "cardiomyopathy has been reported in patients with chronic kidney disease.",
    "Cisplatin-induced acute kidney injury (AKI) limits the treatment of ovarian cancer. "
    "We studied whether magnesium supplementation reduces nephrotoxicity and hypomagnesemia "
    "in women receiving cisplatin.",
    "Germline mutations in BRCA1 predispose to hereditary breast and ovarian cancer. Carriers "
    "with triple-negative breast cancer (TNBC) responded to olaparib; anemia and neutropenia "
    "were the most common adverse events.",
    "A 58-year-old man with type 2 diabetes mellitus (T2DM) and hypertension presented with "
    "chest pain; an acute myocardial infarction (MI) was diagnosed and aspirin and heparin were given.",
]

EXAMPLE_QUERIES: List[str] = ["HCQ", "Plaquenil", "heart attack", "kidney failure", "high blood pressure"]
