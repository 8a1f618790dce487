"""The NER's packed pass (:func:`spacy_sapbert.ner.model.packed_log_probs`, what :meth:`Tagging.scores` runs): the
padded batch's log-probabilities without its padding, whatever the passes and attention groups the windows fall
into, in a few row counts only."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import spacy
import torch

from spacy_sapbert.encoding import packed
from spacy_sapbert.ner import model as tagger_model
from spacy_sapbert.ner.gazetteer import Gazetteer
from spacy_sapbert.ner.tagging import Tagging
from spacy_sapbert.ner.tags import TagScheme

TOKENIZER_CONFIG = {"nlp": {"tokenizer": {"@tokenizers": "sapbert.ScispacyTokenizer.v1", "split_hyphens": True}}}
TEXTS = ["Cisplatin nephrotoxicity.", "acid",
         "Breast cancer and kidney cancer after acid exposure in patients with renal failure. " * 4,
         "A\n\nB cancer", "cancer " * 70, "The acid-induced cancer of the breast (BC) was treated with cisplatin."]


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en", config=TOKENIZER_CONFIG)


@pytest.fixture(scope="module")
def tagging(tiny_bert: Path, nlp) -> Tagging:
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    gazetteer = Gazetteer.from_names([("DISEASE", "cancer"), ("CHEMICAL", "acid"), ("DISEASE", "renal failure")],
                                     nlp.tokenizer)
    torch.manual_seed(0)
    model, tokenizer = tagger_model.from_encoder(tiny_bert, scheme.tags, gazetteer.n_features)
    with torch.no_grad():  # features that matter: a zero gazetteer embedding would hide a misplaced one
        model.gazetteer_embed.weight.normal_()
    return Tagging(model.eval(), tokenizer, gazetteer, scheme, max_pieces=48, overlap=8, batch_size=3)


def padded_scores(tagging: Tagging, docs) -> list:
    """The same log-probabilities from padded batches of ``batch_size`` windows (the pass before packing)."""
    jobs = [(d, w) for d, windows in enumerate(tagging.batch_windows(docs)) for w in windows]
    out = [np.full((len(doc), len(tagging.scheme)), -1e4, dtype=np.float32) for doc in docs]
    for doc_scores in out:
        doc_scores[:, 0] = 0.0
    with torch.inference_mode():
        for start in range(0, len(jobs), tagging.batch_size):
            batch = jobs[start:start + tagging.batch_size]
            windows = [w for _, w in batch]
            ids, feats, mask = tagger_model.collate(windows, tagging.tokenizer.pad_token_id or 0)
            logits = tagging.model(ids, feats, mask).float().log_softmax(-1)
            for (d, window), rows in zip(batch, tagger_model.scores_at(logits, windows)):
                out[d][window.tokens] = rows.numpy()
    return out


@pytest.mark.parametrize("batch_size", [1, 3, 16])
def test_packed_equals_padded_in_float32(tagging, nlp, batch_size):
    docs = [nlp(text) for text in TEXTS]
    assert sum(len(w) for w in tagging.batch_windows(docs)) > len(docs)  # some doc has several windows
    reference = padded_scores(tagging, docs)
    before = tagging.batch_size
    tagging.batch_size = batch_size
    try:
        ours = tagging.scores(docs)
    finally:
        tagging.batch_size = before
    for got, expected in zip(ours, reference):
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_window_is_tagged_alone_whatever_shares_its_pass(tagging, nlp):
    docs = [nlp(text) for text in TEXTS]
    alone = [tagging.scores([doc])[0] for doc in docs]
    for got, expected in zip(tagging.scores(docs), alone):
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_linear_layers_see_row_counts_of_a_few_sizes(tagging, nlp):
    """oneDNN keeps a kernel per shape: the rows of every linear layer, the head's too, are padded_rows counts."""
    seen = set()
    hooks = [m.register_forward_hook(lambda module, args, out: seen.add(args[0].shape[0]))
             for m in tagging.model.modules() if isinstance(m, torch.nn.Linear)]
    try:
        for n in range(1, len(TEXTS) + 1):
            tagging.scores([nlp(text) for text in TEXTS[:n]])
    finally:
        for hook in hooks:
            hook.remove()
    assert seen and all(rows == packed.padded_rows(rows) for rows in seen)


def test_a_window_without_one_feature_per_piece_is_refused(tagging, nlp):
    window = tagging.windows(nlp("acid cancer"))[0]
    window.features = window.features[:-1]
    with pytest.raises(ValueError, match="one feature per word piece"):
        tagger_model.packed_log_probs(tagging.model, [window], 2)
