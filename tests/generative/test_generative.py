"""Generative linking: the prefix tree only ever yields KB names, and a tiny encoder-decoder
overfits a toy KB to 100% through transformers' constrained generate."""
from __future__ import annotations

import pytest
import torch

from spacy_sapbert.errors import InputError
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


@pytest.fixture(scope="module")
def trained(tiny_bert, tmp_path_factory):
    """The tiny encoder-decoder trained to overfit the toy KB, saved (the folder)."""
    torch.manual_seed(0)
    model = GenerativeModel.from_bert(tiny_bert)
    examples = [(Mention(left, text, right), TOY_KB[concept][0]) for left, text, right, concept in MENTIONS]
    examples += [(Mention("", name, ""), TOY_KB[concept][0]) for name, concept in names()]
    optimizer = torch.optim.AdamW(model.model.parameters(), lr=3e-3)
    model.model.train()
    for _ in range(150):  # all eight mentions are right from about step 75 on (lr 3e-3, seed 0)
        optimizer.zero_grad()
        loss = model.loss([m for m, _ in examples], [n for _, n in examples])
        loss.backward()
        optimizer.step()
    model.model.eval()
    return model, model.save(tmp_path_factory.mktemp("generative") / "model")


@pytest.mark.slow
def test_a_tiny_model_overfits_a_toy_kb(trained):
    model, folder = trained
    trie = model.build_trie(names())
    predicted = [model.generate(Mention(left, text, right), trie, top=1)[0][0] for left, text, right, _ in MENTIONS]
    assert predicted == [concept for *_, concept in MENTIONS]
    # saved and loaded (safetensors, no pickle), it predicts the same
    loaded = GenerativeModel.load(folder)
    assert [loaded.generate(Mention(left, text, right), trie, top=1)[0][0]
            for left, text, right, _ in MENTIONS] == predicted
    assert (folder / "model.safetensors").is_file()
    scores = loaded.score_names(Mention("after a", "heart attack", "in may"), ["heart attack", "diabetes"])
    assert scores[0] > scores[1]


@pytest.mark.slow
def test_the_genbioel_linker_pipe_links_entities_and_survives_to_disk(trained, tmp_path):
    import spacy

    from spacy_sapbert.kb.concept import Concept
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase

    kb = KnowledgeBase([Concept(cid, synonyms[0], synonyms[1:]) for cid, synonyms in TOY_KB.items()])
    kb_file = kb.to_jsonl(tmp_path / "toy.jsonl.gz")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "DISEASE", "pattern": text} for _, text, _, _ in MENTIONS])
    nlp.add_pipe("genbioel_linker", config={"model": str(trained[1]), "kb": str(kb_file), "top": 3})
    text = "After a heart attack in May, acute kidney failure. Type 2 diabetes."
    doc = nlp(text)
    assert [(e.text, e.kb_id_) for e in doc.ents] == [("heart attack", "D1"), ("kidney failure", "D2"),
                                                        ("diabetes", "D4")]
    assert all(0 < score <= 1 for e in doc.ents for _, score in e._.kb_ents) and len(doc.ents[0]._.kb_ents) <= 3
    nlp.to_disk(tmp_path / "nlp")
    assert (tmp_path / "nlp" / "genbioel_linker" / "model" / "model.safetensors").is_file()
    again = spacy.load(tmp_path / "nlp")(text)
    assert [(e.text, e.kb_id_, e._.kb_ents) for e in again.ents] == [(e.text, e.kb_id_, e._.kb_ents) for e in doc.ents]


@pytest.mark.slow
def test_generation_as_the_sapbert_linkers_first_stage_links_as_the_genbioel_pipe_does(trained, tiny_bert, tmp_path):
    """``get_candidates = sapbert.GenerativeCandidates.v1``: the linker pipe's threshold, cut-off and span
    handling over generated candidates, which are the ``genbioel_linker`` pipe's (one way to generate)."""
    import spacy

    from spacy_sapbert.kb.concept import Concept
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase

    kb = KnowledgeBase([Concept(cid, synonyms[0], synonyms[1:]) for cid, synonyms in TOY_KB.items()])
    kb_file = kb.to_jsonl(tmp_path / "toy.jsonl.gz")
    text = "After a heart attack in May, acute kidney failure. Type 2 diabetes."
    pipes = {}
    for factory, config in (("genbioel_linker", {"model": str(trained[1]), "kb": str(kb_file), "top": 3}),
                            ("sapbert_linker", {"model": str(tiny_bert), "kb": str(kb_file), "pooling": "mean",
                                                "label_to_types": None, "threshold": 0.0, "max_entities_per_mention": 3,
                                                "get_candidates": {"@misc": "sapbert.GenerativeCandidates.v1",
                                                                   "model": str(trained[1]), "top": 3}})):
        nlp = spacy.blank("en")
        nlp.add_pipe("entity_ruler").add_patterns([{"label": "DISEASE", "pattern": t} for _, t, _, _ in MENTIONS])
        nlp.add_pipe(factory, config=config)
        pipes[factory] = [(e.text, e.kb_id_, e._.kb_ents) for e in nlp(text).ents]
    assert [(t, cid) for t, cid, _ in pipes["sapbert_linker"]] == [("heart attack", "D1"), ("kidney failure", "D2"),
                                                                   ("diabetes", "D4")]
    assert pipes["sapbert_linker"] == pipes["genbioel_linker"]
    linker = nlp.get_pipe("sapbert_linker")
    assert linker.linker.cache_info()["misses"] == 0  # no dense search
    tops = [ranked[0][1] for _, _, ranked in pipes["sapbert_linker"]]
    linker.threshold = min(tops) + 1e-6  # the pipe's threshold: the span with the lowest score loses its link
    after = [(e.kb_id_, e._.kb_ents) for e in nlp(text).ents]
    assert [cid != "" for cid, _ in after] == [top >= linker.threshold for top in tops] and not all(
        cid for cid, _ in after)
    assert all(score >= linker.threshold for _, ranked in after for _, score in ranked)
    with pytest.raises(InputError, match="needs its 'model'"):
        spacy.blank("en").add_pipe("sapbert_linker", config={"get_candidates": {
            "@misc": "sapbert.GenerativeCandidates.v1", "model": ""}})


def toy_samples(path):
    from spacy_sapbert.kb.concept import Concept
    from spacy_sapbert.training.generative.samples import kb_guided, write_samples

    concepts = [Concept(cid, synonyms[0], synonyms[1:], [], "a disease of the heart" if cid == "D1" else None)
                for cid, synonyms in TOY_KB.items()] + [Concept("D7", "acid", ["acid syndrome", "acid failure"])]
    samples = list(kb_guided(concepts, seed=1, per_concept=4))
    assert all(s.mention != s.target for s in samples) and {s.concept for s in samples} == {"D1", "D2", "D3", "D6",
                                                                                             "D7"}
    assert any("a disease of the heart" in s.left + s.right for s in samples)
    return write_samples(samples, path)[0]


def test_resumed_training_equals_an_uninterrupted_run(tiny_bert, tmp_path):
    from spacy_sapbert.training.generative.config import GenerativeConfig
    from spacy_sapbert.training.generative.trainer import train

    samples = toy_samples(tmp_path / "samples.jsonl")
    config = GenerativeConfig(base_model=str(tiny_bert), batch_size=4, max_steps=6, checkpoint_every=2,
                              warmup_steps=2, lr=1e-3, amp="no", device="cpu", log_every=1)
    whole = train(config, [samples], tmp_path / "whole", run_dir=tmp_path / "run-whole")

    def stop_at_3(trainer):
        trainer.stop_requested = trainer.step == 3

    first = train(config, [samples], tmp_path / "parts", run_dir=tmp_path / "run-parts", on_step=stop_at_3)
    assert first.interrupted and first.steps == 3 and not (tmp_path / "parts").exists()
    second = train(config, [samples], tmp_path / "parts", run_dir=tmp_path / "run-parts", resume=True)
    assert not second.interrupted and second.steps == 6
    a = GenerativeModel.load(whole.output).model.state_dict()
    b = GenerativeModel.load(second.output).model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [round(h["loss"], 6) for h in whole.history][3:] == [round(h["loss"], 6) for h in second.history][3:]
    # a folder that is not a generative model is refused before any training, and left as it was
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep", encoding="utf-8")
    with pytest.raises(InputError, match="generative model"):
        train(config, [samples], tmp_path / "mine", run_dir=tmp_path / "run-mine")
    assert not (tmp_path / "run-mine").exists() and (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    # nor is the model a run starts from its output, though it is an earlier generative model
    from dataclasses import replace

    with pytest.raises(InputError, match="starts from"):
        train(replace(config, init_from=str(whole.output)), [samples], whole.output, run_dir=tmp_path / "run-again")
    assert not (tmp_path / "run-again").exists()


def test_synonyms_aware_targets_are_the_nearest_name_of_the_gold_concept():
    from spacy_sapbert.training.generative.samples import synonyms_aware

    dictionary = [("D1", "heart attack"), ("D1", "myocardial infarction"), ("D2|X9", "kidney failure"),
                  ("D2|X9", "renal failure"), ("D3", "breast cancer")]
    mentions = [("left", "myocardial infarctions", "", ["D1"], "a:1"), ("", "renal failures", "", ["X9"], "a:2"),
                ("", "unknown", "", ["D8"], "a:3")]
    samples, stats = synonyms_aware(mentions, dictionary)
    assert [(s.target, s.concept) for s in samples] == [("myocardial infarction", "D1"), ("renal failure", "D2|X9")]
    assert stats == {"mentions": 3, "samples": 2, "not_in_dictionary": 1}


def test_inputs_fit_the_model_positions_and_one_context_rule(tiny_bert):
    from spacy_sapbert.pipes.genbioel import DEFAULTS
    from spacy_sapbert.generative.seq2seq import CONTEXT_CHARS

    model = GenerativeModel.from_bert(tiny_bert)  # 64 positions: less than max_context on both sides
    assert model.max_positions == 64 and model.max_name <= (64 - 2 - len(model.prompt_ids)) // 2
    words = " ".join(["renal"] * 200)
    ids = model.encoder_ids(Mention(words, "heart attack", words))
    assert len(ids) == 64 and ids.count(model.marker_ids[0]) == 1 and ids[-1] == model.sep_id
    # the mention stays whole and the context is split between the sides
    start, end = ids.index(model.marker_ids[0]), ids.index(model.marker_ids[1])
    assert ids[start + 1:end] == model.tokens("heart attack") and abs((start - 1) - (62 - end)) <= 1
    one_side = model.encoder_ids(Mention("", "heart attack", words))  # max_context tokens on the one side
    assert len(one_side) == min(64, 4 + len(model.tokens("heart attack")) + model.max_context)
    assert model.encoder_ids(Mention("a", "b", "c")) == [model.cls_id, *model.tokens("a"), model.marker_ids[0],
                                                          *model.tokens("b"), model.marker_ids[1], *model.tokens("c"),
                                                          model.sep_id]
    text = "x" * 300 + "MENTION" + "y" * 300
    mention = Mention.around(text, 300, 307, "mention")
    assert (mention.left, mention.text, mention.right) == ("x" * CONTEXT_CHARS, "mention", "y" * CONTEXT_CHARS)
    assert DEFAULTS["context_chars"] == CONTEXT_CHARS
    log_probs = model.token_log_probs([Mention(words, "heart " * 40, words)], ["renal " * 40])
    assert log_probs[0].numel() <= model.max_name + 1  # teacher forcing fits the decoder's positions too


def test_commands_write_new_files_unless_overwrite_and_never_a_file_read(tmp_path):
    from typer.testing import CliRunner

    from spacy_sapbert.cli import app
    from spacy_sapbert.kb.concept import Concept
    from spacy_sapbert.kb.files import write_jsonl
    from spacy_sapbert.training.cli import register

    register(app)
    kb = write_jsonl([Concept(cid, synonyms[0], synonyms[1:]) for cid, synonyms in TOY_KB.items()],
                     tmp_path / "kb.jsonl")
    output = tmp_path / "kb-samples.jsonl"
    output.write_text("mine\n", encoding="utf-8")
    data_kb = ["generative", "data-kb", str(kb), "-o", str(output)]
    refused = CliRunner().invoke(app, data_kb)
    assert refused.exit_code == 2 and "exists" in refused.output, refused.output
    assert output.read_text(encoding="utf-8") == "mine\n"
    done = CliRunner().invoke(app, data_kb + ["--overwrite"])
    assert done.exit_code == 0, done.output
    assert output.read_text(encoding="utf-8").count("\n") == 4  # the four concepts with two names
    model = tmp_path / "model"
    model.mkdir()
    (model / "settings.json").write_text("{}", encoding="utf-8")
    dictionary = tmp_path / "dictionary.txt"
    dictionary.write_text("D1||heart attack\n", encoding="utf-8")
    data = tmp_path / "data.json"
    data.write_text("{}", encoding="utf-8")
    for command in (["data-kb", str(kb), "-o", str(kb)],
                    ["data-mentions", str(data), "--dictionary", str(dictionary), "-o", str(dictionary)],
                    ["data-mentions", str(data), "--dictionary", str(dictionary), "-o", str(output)],
                    ["evaluate", str(model), str(data), "--dictionary", str(dictionary), "-o",
                     str(model / "settings.json")],
                    ["evaluate", str(model), str(data), "--dictionary", str(dictionary), "-o", str(output)]):
        before = {p: p.read_bytes() for p in (kb, dictionary, data, output, model / "settings.json")}
        overwrite = [] if command[-1] == str(output) else ["--overwrite"]
        result = CliRunner().invoke(app, ["generative", *command, *overwrite])
        message = "exists" if command[-1] == str(output) else "one of the files read"
        assert result.exit_code == 2 and message in result.output, (command, result.output)
        assert {p: p.read_bytes() for p in before} == before
