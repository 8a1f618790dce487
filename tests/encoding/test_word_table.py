"""The word-piece table stays in the half precision its file stores; outputs are the same to the bit."""
from __future__ import annotations

import numpy as np
import torch

import spacy_sapbert
from spacy_sapbert.default import DEFAULT_MODEL
from spacy_sapbert.encoding.encoder import Encoder

TEXTS = ["renal failure", "Hydroxychloroquine retinopathy", "a longer mention of chronic kidney disease"]


def test_the_default_encoder_keeps_its_float16_table_and_encodes_as_with_a_float32_one():
    encoder = Encoder(DEFAULT_MODEL, device="cpu", dtype="float32", backend="native")
    table = encoder.model.embeddings.word_embeddings
    assert table.weight.dtype == torch.float16 and not table.weight.requires_grad
    assert encoder.model.encoder.layer[0].attention.self.query.weight.dtype == torch.float32
    narrow = encoder.encode(TEXTS)
    table.weight = torch.nn.Parameter(table.weight.detach().float(), requires_grad=False)  # widened, as before
    assert np.array_equal(encoder.encode(TEXTS), narrow)


def test_the_default_pipelines_ner_shares_the_encoders_table_in_that_precision():
    nlp = spacy_sapbert.load()
    nlp("Lupus.")  # the NER loads on first use
    encoder_table = nlp.get_pipe("sapbert_linker").encoder.model.embeddings.word_embeddings.weight
    ner_table = nlp.get_pipe("sapbert_ner").tagging.model.encoder.embeddings.word_embeddings.weight
    assert ner_table.data_ptr() == encoder_table.data_ptr() and ner_table.dtype == torch.float16
