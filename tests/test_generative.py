"""Generative linking: the prefix tree only ever yields KB names, and a tiny encoder-decoder
overfits a toy KB to 100% through transformers' constrained generate."""
from __future__ import annotations

import torch

from spacy_sapbert.generative.seq2seq import GenerativeModel, Mention
from spacy_sapbert.generative.trie import NameTrie

TOY_KB = {
    "D1": ["heart attack", "myocardial infarction"],
    "D2": ["renal failure", "kidney failure"],
    "D3": ["breast cancer", "breast tumor"],
    "D4": ["diabetes"],
    "D5": ["heart failure"],
    "D6": ["kidney cancer", "renal tumor"],
}
MENTIONS = [("after a", "heart attack", "in may", "D1"), ("acute", "kidney failure", "", "D2"),
            ("", "breast tumor", "was found", "D3"), ("type 2", "diabetes", "", "D4"),
            ("chronic", "heart failure", "", "D5"), ("a", "renal tumor", "", "D6"),
            ("no", "myocardial infarction", "", "D1"), ("", "renal failure", "", "D2")]


def names():
    return [(name, concept) for concept, synonyms in TOY_KB.items() for name in synonyms]


def test_the_trie_allows_only_continuations_of_names():
    trie = NameTrie.build([([5, 6, 7], "A"), ([5, 6], "B"), ([5, 6], "C"), ([8], "A")], eos_id=2)
    assert sorted(trie.allowed([])) == [5, 8]
    assert sorted(trie.allowed([5, 6])) == [2, 7]  # "5 6" is a name (end) and a prefix of "5 6 7"
    assert trie.allowed([5, 6, 2]) == [] and trie.allowed([9]) == []
    assert trie.concepts([5, 6]) == ["B", "C"] and trie.concepts([5, 6, 7, 2]) == ["A"] and trie.concepts([5]) == []
    assert trie.names == 3


def test_constrained_generation_of_an_untrained_model_yields_only_kb_names(tiny_bert):
    torch.manual_seed(0)
    model = GenerativeModel.from_bert(tiny_bert)
    trie = model.build_trie(names())
    allowed = {tuple(model.name_ids(name)) + (model.sep_id,) for name, _ in names()}
    for left, text, right, _ in MENTIONS + [("", "zebra crossing", "qq", None), ("x", "acid", "", None)]:
        for name, _ in model.generate_names(Mention(left, text, right), trie, beams=5):
            assert tuple(name) in allowed, model.tokenizer.decode(name)


def test_a_tiny_model_overfits_a_toy_kb(tiny_bert, tmp_path):
    torch.manual_seed(0)
    model = GenerativeModel.from_bert(tiny_bert)
    trie = model.build_trie(names())
    examples = [(Mention(left, text, right), name) for left, text, right, concept in MENTIONS
                for name in TOY_KB[concept][:1]]
    examples += [(Mention("", name, ""), TOY_KB[concept][0]) for name, concept in names()]
    optimizer = torch.optim.AdamW(model.model.parameters(), lr=3e-3)
    model.model.train()
    for _ in range(300):
        optimizer.zero_grad()
        loss = model.loss([m for m, _ in examples], [n for _, n in examples])
        loss.backward()
        optimizer.step()
    model.model.eval()
    predicted = [model.generate(Mention(left, text, right), trie, top=1)[0][0] for left, text, right, _ in MENTIONS]
    assert predicted == [concept for *_, concept in MENTIONS], float(loss)
    # saved and loaded (safetensors, no pickle), it predicts the same
    loaded = GenerativeModel.load(model.save(tmp_path / "gen"))
    assert [loaded.generate(Mention(left, text, right), trie, top=1)[0][0]
            for left, text, right, _ in MENTIONS] == predicted
    assert (tmp_path / "gen" / "model.safetensors").is_file()
    scores = loaded.score_names(Mention("after a", "heart attack", "in may"), ["heart attack", "diabetes"])
    assert scores[0] > scores[1]
