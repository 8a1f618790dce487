"""The transformer NER: BIO tags and decoding, gazetteer features, windows, model files, the spaCy pipe, training."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc, DocBin, Span

from spacy_sapbert.kb.concept import Concept
from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.files import write_jsonl
from spacy_sapbert.ner import model as tagger_model
from spacy_sapbert.ner.gazetteer import Gazetteer, kb_label_names
from spacy_sapbert.ner.tags import IGNORE, TagScheme
from spacy_sapbert.ner.windows import MAX_PIECES_PER_TOKEN, cut_windows

TOKENIZER_CONFIG = {"nlp": {"tokenizer": {"@tokenizers": "sapbert.ScispacyTokenizer.v1", "split_hyphens": True}}}


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en", config=TOKENIZER_CONFIG)


# -- tags ---------------------------------------------------------------------------------------
def test_gold_tags_keep_missing_annotation_out_of_the_loss(nlp):
    doc = nlp("Cocaine caused renal failure in rats .")
    doc.set_ents([Span(doc, 0, 1, "CHEMICAL"), Span(doc, 2, 4, "DISEASE")], missing=[doc[5:6]], default="outside")
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    assert scheme.tags == ("O", "B-CHEMICAL", "I-CHEMICAL", "B-DISEASE", "I-DISEASE")
    gold = scheme.gold(doc)
    assert [scheme.tags[t] if t != IGNORE else None for t in gold] == \
        ["B-CHEMICAL", "O", "B-DISEASE", "I-DISEASE", "O", None, "O"]


def test_decode_never_starts_a_span_with_inside(nlp):
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    scores = np.log(np.full((3, 5), 0.01))
    scores[0, 0] = np.log(0.6)      # O
    scores[1, 4] = np.log(0.9)      # I-DISEASE after O: not allowed
    scores[1, 3] = np.log(0.05)     # B-DISEASE is the best legal reading
    scores[2, 4] = np.log(0.9)
    tags = scheme.decode(scores)
    assert [scheme.tags[t] for t in tags] == ["O", "B-DISEASE", "I-DISEASE"]
    doc = nlp("the renal failure")
    assert [(s.text, s.label_) for s in scheme.spans(doc, tags)] == [("renal failure", "DISEASE")]


def test_decode_is_the_best_well_formed_path_whether_or_not_each_tokens_best_tag_is_one():
    """Against every path of 5 tokens: the greedy shortcut (each token's best tag, when well formed)
    and the Viterbi search give the best-scoring well-formed sequence."""
    import itertools

    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    rng = np.random.default_rng(0)
    shortcut = 0
    for _ in range(60):
        scores = np.log(rng.dirichlet(np.full(5, 0.3), size=5))
        paths = [p for p in itertools.product(range(5), repeat=5)
                 if not scheme.tags[p[0]].startswith("I-") and all(scheme._allowed[a, b] for a, b in zip(p, p[1:]))]
        best = max(paths, key=lambda p: scores[np.arange(5), p].sum())
        assert scheme.decode(scores) == list(best)
        shortcut += list(scores.argmax(axis=1)) == list(best)
    assert 0 < shortcut < 60  # both ways were taken


def test_tag_scheme_round_trips_and_refuses_other_lists():
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    assert TagScheme.from_tags(scheme.tags).tags == scheme.tags
    with pytest.raises(ValueError):
        TagScheme.from_tags(["O", "I-CHEMICAL", "B-CHEMICAL"])


# -- gazetteer ----------------------------------------------------------------------------------
def test_gazetteer_tags_the_longest_name_per_label(nlp, tmp_path):
    pairs = [("DISEASE", "heart attack"), ("DISEASE", "heart"), ("CHEMICAL", "lithium"),
             ("DISEASE", "lithium toxicity"), ("CHEMICAL", "K")]
    gazetteer = Gazetteer.from_names(pairs, nlp.tokenizer)
    assert len(gazetteer) == 4  # "K" is shorter than 3 characters
    doc = nlp("A heart attack and lithium toxicity")
    feats = gazetteer.features(doc)
    # labels sorted: CHEMICAL weight 1, DISEASE weight 3; states O=0, B=1, I=2
    assert feats == [0, 3, 6, 0, 1 + 3, 6]
    gazetteer.to_disk(tmp_path)
    loaded = Gazetteer.from_disk(tmp_path)
    assert loaded.features(doc) == feats and len(loaded) == 4
    text = gzip.decompress((tmp_path / "gazetteer.tsv.gz").read_bytes()).decode()
    assert text == "CHEMICAL\tlithium\nDISEASE\theart\nDISEASE\theart attack\nDISEASE\tlithium toxicity\n"
    (tmp_path / "again").mkdir()
    loaded.to_disk(tmp_path / "again")  # a loaded gazetteer writes the same file
    assert gzip.decompress((tmp_path / "again" / "gazetteer.tsv.gz").read_bytes()).decode() == text


def test_gazetteer_finds_what_trying_every_length_finds():
    """Matches are looked for only at the lengths of the names that begin with a word; on random names
    and texts they are those of trying every span of up to MAX_TOKENS words (the old search)."""
    import random

    from spacy_sapbert.ner import gazetteer as gazetteer_module

    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(12)]
    names = {("DISEASE" if rng.random() < 0.6 else "CHEMICAL", tuple(rng.choice(vocabulary)
                                                                       for _ in range(rng.choice([1, 1, 2, 3, 5, 14]))))
             for _ in range(40)}
    table = {}
    for label, words in names:
        table.setdefault(label, set()).add(words)
    gazetteer = Gazetteer(table)
    limit = gazetteer_module.MAX_TOKENS

    def every_length(words, label):
        joined = {" ".join(name) for name in table.get(label, ())}
        found, covered = [], 0
        for i in range(len(words)):
            ends = [end for end in range(i + 1, min(len(words), i + limit) + 1) if " ".join(words[i:end]) in joined]
            if ends and i >= covered:
                found.append((i, ends[-1]))
                covered = ends[-1]
        return found

    for _ in range(200):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 30))]
        for label in gazetteer.labels:
            assert gazetteer._longest_matches(words, label) == every_length(words, label)
    assert Gazetteer({"DISEASE": set()})._longest_matches(["w1"], "DISEASE") == []


def test_gazetteer_writes_back_the_file_it_read(nlp, tmp_path):
    """A file written by hand (lines out of order, a name twice, Windows line ends) reads line by line
    and is written back byte for byte: nothing a user gave is rewritten."""
    raw = gzip.compress(b"DISEASE\theart attack\r\nCHEMICAL\tlithium\r\nDISEASE\theart attack\r\nDISEASE\tgout\r\n")
    (tmp_path / "gazetteer.tsv.gz").write_bytes(raw)
    loaded = Gazetteer.from_disk(tmp_path)
    assert len(loaded) == 3 and loaded.features(nlp("gout and a heart attack")) == [3, 0, 0, 3, 6]
    (tmp_path / "out").mkdir()
    assert loaded.to_disk(tmp_path / "out").read_bytes() == raw


def test_gazetteer_read_a_piece_at_a_time_holds_what_it_holds_read_whole(nlp, tmp_path, monkeypatch):
    """The file is read in pieces of whole lines (each decoded alone): pieces of a few lines give the same
    lookup tables as one piece; a byte-order mark or a byte that is not UTF-8 sends the file to the
    line-by-line reader, whose errors name the line."""
    import spacy_sapbert.ner.gazetteer as gazetteer_module

    names = [("DISEASE", f"disease number {i}") for i in range(40)] + [("CHEMICAL", f"drug {i} α") for i in range(30)]
    Gazetteer.from_names(names, nlp.tokenizer).to_disk(tmp_path)
    whole = Gazetteer.from_disk(tmp_path)
    def no_fallback(*args):
        raise AssertionError("read line by line")

    with monkeypatch.context() as patched:
        patched.setattr(gazetteer_module, "PIECE_CHARS", 60)  # pieces of two or three lines
        patched.setattr(gazetteer_module, "_label_lines", no_fallback)
        pieces = Gazetteer.from_disk(tmp_path)
    assert pieces.labels == whole.labels == ("CHEMICAL", "DISEASE") and len(pieces) == 70
    for table in ("_names", "_firsts", "_lengths"):
        for label in whole.labels:
            assert np.array_equal(getattr(pieces, table)[label], getattr(whole, table)[label])
    text = gzip.decompress((tmp_path / "gazetteer.tsv.gz").read_bytes())
    (tmp_path / "bom").mkdir()
    (tmp_path / "bom" / "gazetteer.tsv.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + text))
    assert Gazetteer.from_disk(tmp_path / "bom").features(nlp("drug 3 α")) == whole.features(nlp("drug 3 α")) == [1, 2, 2]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "gazetteer.tsv.gz").write_bytes(gzip.compress(b"DISEASE\tgout\nDISEASE\tg\xffut\n"))
    with pytest.raises(InputError, match=r"gazetteer.tsv.gz:2"):
        Gazetteer.from_disk(tmp_path / "bad")
    import pickle

    empty = pickle.loads(pickle.dumps(Gazetteer({})))  # an empty gazetteer's file is empty: it still unpickles
    assert empty.labels == () and len(empty) == 0 and empty.features(nlp("gout")) == [0]


def test_gazetteer_pickled_into_another_process_hashes_its_names_there(nlp, tmp_path):
    """String hashes are salted per process: a gazetteer pickled into a process with another salt
    (PYTHONHASHSEED) must hash its names again there, not reuse the sender's hashes."""
    import os
    import pickle
    import subprocess
    import sys

    gazetteer = Gazetteer.from_names([("DISEASE", "heart attack"), ("CHEMICAL", "lithium")], nlp.tokenizer)
    (tmp_path / "g.pkl").write_bytes(pickle.dumps(gazetteer))
    probe = ("import pickle, spacy, sys; g = pickle.loads(open(sys.argv[1], 'rb').read()); "
             "nlp = spacy.blank('en'); print(g.features(nlp('a heart attack and lithium')), len(g))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "g.pkl")], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert out == f"{gazetteer.features(nlp('a heart attack and lithium'))} 2" == "[0, 3, 6, 0, 1] 2"


def test_gazetteer_file_errors_name_the_line(tmp_path):
    with gzip.open(tmp_path / "gazetteer.tsv.gz", "wt") as handle:
        handle.write("DISEASE\theart attack\nno tab here\n")
    with pytest.raises(InputError, match=r"gazetteer.tsv.gz:2"):
        Gazetteer.from_disk(tmp_path)


def test_kb_label_names_follow_label_to_types():
    concepts = [Concept("D1", "Aspirin", ["ASA"], ["Chemical"]), Concept("D2", "Fever", [], ["Phenotype"]),
                Concept("D3", "Thing", [], ["Gene"])]
    names = list(kb_label_names(concepts, {"CHEMICAL": ["Chemical"], "DISEASE": ["Disease", "Phenotype"]}))
    assert names == [("CHEMICAL", "Aspirin"), ("CHEMICAL", "ASA"), ("DISEASE", "Fever")]


def test_features_combine_gazetteer_state_shape_and_style(nlp):
    from spacy_sapbert.ner.features import N_SHAPES, n_features, shape_of, token_features

    doc = nlp("NaCl and STZ in Lithium 5 mg")
    assert [shape_of(t) for t in doc] == [4, 1, 3, 1, 2, 0, 1]
    gazetteer = Gazetteer.from_names([("CHEMICAL", "lithium"), ("DISEASE", "heart attack")], nlp.tokenizer)
    assert n_features(gazetteer, shapes=True, n_styles=2) == 9 * N_SHAPES * 2
    plain = token_features(doc, gazetteer, shapes=False)
    assert plain == [0, 0, 0, 0, 1, 0, 0]  # "Lithium" begins a CHEMICAL name
    shaped = token_features(doc, gazetteer, shapes=True)
    assert shaped[4] == 1 * N_SHAPES + 2 and shaped[0] == 4
    second = token_features(doc, gazetteer, shapes=True, style=1)
    assert [b - a for a, b in zip(shaped, second)] == [9 * N_SHAPES] * len(doc)
    assert max(second) < n_features(gazetteer, shapes=True, n_styles=2)


# -- windows ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_tokens,max_pieces,overlap", [(5, 32, 4), (200, 32, 8), (200, 64, 0), (57, 40, 12)])
def test_windows_score_every_token_once(n_tokens, max_pieces, overlap):
    rng = np.random.default_rng(n_tokens)
    pieces = [[7] * int(rng.integers(0, 4)) for _ in range(n_tokens)]
    pieces[3 % n_tokens] = [9] * (MAX_PIECES_PER_TOKEN + 5)  # a very long token is cut
    windows = cut_windows(pieces, list(range(n_tokens)), (101, 102), max_pieces=max_pieces, overlap=overlap)
    scored = [t for w in windows for t in w.tokens]
    assert sorted(scored) == [i for i in range(n_tokens) if pieces[i]]
    for w in windows:
        assert len(w.input_ids) <= max_pieces and w.input_ids[0] == 101 and w.input_ids[-1] == 102
        assert len(w.features) == len(w.input_ids)
        for token, position in zip(w.tokens, w.positions):
            assert w.features[position] == token  # the first piece of the token carries its feature
    if len(windows) > 1 and overlap:
        first, second = windows[0], windows[1]
        assert second.input_ids[1:5] != []  # context carried over


def test_windows_refuse_bad_settings():
    with pytest.raises(ValueError):
        cut_windows([[1]], [0], (101, 102), max_pieces=16, overlap=4)


# -- model and pipe -----------------------------------------------------------------------------
def _tagger_folder(tiny_bert: Path, nlp, folder: Path) -> Path:
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    gazetteer = Gazetteer.from_names([("DISEASE", "cancer"), ("CHEMICAL", "acid")], nlp.tokenizer)
    torch.manual_seed(0)
    model, _ = tagger_model.from_encoder(tiny_bert, scheme.tags, gazetteer.n_features)
    with torch.no_grad():  # an untrained head that still finds spans: B-DISEASE where "cancer" matches
        model.head.weight.zero_()
        model.head.bias[:] = torch.tensor([0.0, -5, -5, -5, -5])
        model.head.weight[3] = 0.0
    tagger_model.save(model.eval(), tiny_bert, scheme.tags, folder)
    gazetteer.to_disk(folder)
    return folder


def test_model_files_round_trip(tiny_bert, nlp, tmp_path):
    folder = _tagger_folder(tiny_bert, nlp, tmp_path / "tagger")
    model, tokenizer, settings = tagger_model.load(folder)
    assert settings["tags"][0] == "O" and settings["n_features"] == 9
    assert "tagger.json" in {p.name for p in folder.iterdir()} and not list(folder.glob("*.bin"))
    ids = torch.tensor([tokenizer.special_ids()[0], 40, 41, tokenizer.special_ids()[1]])[None]
    out = model(ids, torch.zeros_like(ids), torch.ones_like(ids))
    assert out.shape == (1, 4, 5)
    with pytest.raises(ValueError, match="format"):
        (folder / "tagger.json").write_text(json.dumps({**settings, "format": 99}))
        tagger_model.load(folder)


def test_pipe_tags_saves_and_loads(tiny_bert, nlp, tmp_path):
    folder = _tagger_folder(tiny_bert, nlp, tmp_path / "tagger")
    pipeline = spacy.blank("en", config=TOKENIZER_CONFIG)
    ruler = pipeline.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "CHEMICAL", "pattern": "breast"}])
    pipeline.add_pipe("sapbert_ner", config={"model": str(folder), "precision": "float32"})
    doc = pipeline("breast cancer and kidney cancer")
    ents = [(e.text, e.label_) for e in doc.ents]
    assert ents == [("breast", "CHEMICAL")]                     # the ruler's entity is kept; the head says O
    pipe = pipeline.get_pipe("sapbert_ner")
    scores = pipe.predict([pipeline.make_doc("breast cancer")])[0]
    assert scores.shape == (2, 5) and np.allclose(np.exp(scores).sum(1), 1, atol=1e-4)
    with torch.no_grad():  # make B-DISEASE win where the gazetteer says DISEASE-begin (feature 3)
        pipe.tagging.model.head.bias[3] = 5.0
    assert [(e.text, e.label_) for e in pipeline("kidney cancer").ents] == [("kidney", "DISEASE"),
                                                                            ("cancer", "DISEASE")]
    pipeline.to_disk(tmp_path / "saved")
    import shutil
    shutil.rmtree(folder)  # the saved pipeline holds its own copy
    loaded = spacy.load(tmp_path / "saved", config={"components": {"sapbert_ner": {"precision": "float32"}}})
    # the saved pipe holds the files it was created from, not later in-memory changes
    assert [[(e.text, e.label_) for e in d.ents] for d in loaded.pipe(["breast cancer", "acid"])] == \
        [[("breast", "CHEMICAL")], []]
    assert np.allclose(loaded.get_pipe("sapbert_ner").predict([loaded.make_doc("breast cancer")])[0], scores,
                       atol=1e-5)


def test_pipe_refuses_a_folder_that_is_not_a_tagger(tmp_path):
    pipeline = spacy.blank("en")
    pipeline.add_pipe("sapbert_ner", config={"model": str(tmp_path)})
    with pytest.raises(InputError, match="model.safetensors is missing"):
        pipeline("text")


# -- training -----------------------------------------------------------------------------------
def _docbin(nlp, path: Path, n: int, chemicals: bool = True) -> Path:
    docs = []
    for i in range(n):
        doc = nlp(f"Acid {i} caused kidney failure and breast cancer .")
        spans = [Span(doc, 0, 1, "CHEMICAL")] if chemicals else []
        doc.set_ents(spans + [Span(doc, 3, 5, "DISEASE"), Span(doc, 6, 8, "DISEASE")], default="outside")
        docs.append(doc)
    DocBin(docs=docs).to_disk(path)
    return path


def test_trainer_learns_writes_a_pipeline_and_resumes(tiny_bert, nlp, tmp_path):
    from spacy_sapbert.training.ner.tagger.config import NerConfig
    from spacy_sapbert.training.ner.tagger.trainer import NerTrainer

    kb = write_jsonl([Concept("D1", "kidney failure", [], ["Disease"]), Concept("C1", "acid", [], ["Chemical"])],
                     tmp_path / "kb.jsonl.gz")
    train, dev = _docbin(nlp, tmp_path / "train.spacy", 16), _docbin(nlp, tmp_path / "dev.spacy", 4)
    other = _docbin(nlp, tmp_path / "other.spacy", 16, chemicals=False)
    config = NerConfig(base_model=str(tiny_bert), epochs=6, patience=6, batch_size=8, lr=1e-3, head_lr=1e-2,
                       warmup_steps=0, freeze_embeddings=False, device="cpu", amp="no", checkpoint_every=0,
                       styles=["first", "second"])
    with pytest.raises(InputError, match="one file per style"):
        NerTrainer(config, [train], dev, [kb], tmp_path / "out", tmp_path / "run")
    trainer = NerTrainer(config, [train, other], dev, [kb], tmp_path / "out", tmp_path / "run")
    result = trainer.train()
    assert result["step"] == 24 and not result["interrupted"]
    assert result["best"]["dev"]["f"] > 90
    pipeline = spacy.load(tmp_path / "out")
    assert pipeline.pipe_names == ["sapbert_ner", "abbreviation_entities"]
    doc = pipeline("Acid 7 caused kidney failure and breast cancer .")
    assert [(e.text, e.label_) for e in doc.ents] == [("Acid", "CHEMICAL"), ("kidney failure", "DISEASE"),
                                                      ("breast cancer", "DISEASE")]
    # the second style's documents never tag chemicals, and the pipe can be asked for that style
    second = spacy.load(tmp_path / "out", config={"components": {"sapbert_ner": {"style": "second"}}})
    assert [(e.text, e.label_) for e in second("Acid 7 caused kidney failure and breast cancer .").ents] == \
        [("kidney failure", "DISEASE"), ("breast cancer", "DISEASE")]
    with pytest.raises(InputError, match="unknown style 'third'"):
        spacy.load(tmp_path / "out", config={"components": {"sapbert_ner": {"style": "third"}}})("Acid")
    weights = tagger_model.load(tmp_path / "out" / "sapbert_ner")[0]
    from safetensors import safe_open
    with safe_open(str(tmp_path / "out" / "sapbert_ner" / "model.safetensors"), "pt") as handle:
        assert handle.get_tensor("head.weight").dtype == torch.float16
    assert weights is not None
    # a second run into the same run folder must be told to resume
    with pytest.raises(InputError, match="--resume"):
        NerTrainer(config, [train, other], dev, [kb], tmp_path / "out2", tmp_path / "run").train()
    # and an output folder that is not ours is never replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(InputError):
        NerTrainer(config, [train, other], dev, [kb], tmp_path / "mine", tmp_path / "run3").train()
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


# -- a word-piece table shared with another pipe's encoder ---------------------------------------
@spacy.Language.factory("test_table_holder", default_config={"folder": ""})
def _make_table_holder(nlp, name, folder):
    return _TableHolder(folder)


class _TableHolder:
    """Stands in for the linker: a pipe with ``.encoder.model`` (a BERT) that does nothing to docs."""

    def __init__(self, folder: str) -> None:
        from types import SimpleNamespace

        from spacy_sapbert.encoding import bert

        self.encoder = SimpleNamespace(model=bert.load(Path(folder))[0]) if folder else None

    def __call__(self, doc):
        return doc


def test_word_piece_table_is_shared_with_the_linker_and_put_back_without_it(tiny_bert, nlp, tmp_path):
    from safetensors import safe_open

    folder = _tagger_folder(tiny_bert, nlp, tmp_path / "tagger")
    pipeline = spacy.blank("en", config=TOKENIZER_CONFIG)
    ner = pipeline.add_pipe("sapbert_ner", config={"model": str(folder), "precision": "float32"})
    pipeline.add_pipe("test_table_holder", config={"folder": str(tiny_bert)})
    assert ner.share_word_embeddings("test_table_holder")
    text = "breast cancer and kidney failure"
    before = ner.predict([pipeline.make_doc(text)])[0]
    pipeline.to_disk(tmp_path / "shared")
    files = tmp_path / "shared" / "sapbert_ner"
    with safe_open(str(files / "model.safetensors"), "pt") as handle:
        assert tagger_model.WORD_EMBEDDINGS not in handle.keys()
    assert json.loads((files / "tagger.json").read_text())["word_embeddings"]["from"] == "test_table_holder"
    loaded = spacy.load(tmp_path / "shared", config={"components": {"sapbert_ner": {"precision": "float32"}}})
    assert np.allclose(loaded.get_pipe("sapbert_ner").predict([loaded.make_doc(text)])[0], before, atol=1e-2)
    # without the pipe that holds the table, saving writes the table back, and that copy loads alone
    loaded.remove_pipe("test_table_holder")
    loaded.to_disk(tmp_path / "alone")
    with safe_open(str(tmp_path / "alone" / "sapbert_ner" / "model.safetensors"), "pt") as handle:
        assert tagger_model.WORD_EMBEDDINGS in handle.keys()
    alone = spacy.load(tmp_path / "alone", config={"components": {"sapbert_ner": {"precision": "float32"}}})
    assert np.allclose(alone.get_pipe("sapbert_ner").predict([alone.make_doc(text)])[0], before, atol=1e-2)
    # a stripped model whose table holder is missing says so
    missing = spacy.load(tmp_path / "shared", exclude=["test_table_holder"])
    with pytest.raises(InputError, match="tagger.json.*'test_table_holder' pipe"):
        missing("text")


def test_a_different_table_is_not_shared(tiny_bert, nlp, tmp_path):
    from tests.conftest import write_tiny_bert

    other = write_tiny_bert(tmp_path / "other-bert", seed=1)
    pipeline = spacy.blank("en", config=TOKENIZER_CONFIG)
    ner = pipeline.add_pipe("sapbert_ner", config={"model": str(_tagger_folder(tiny_bert, nlp, tmp_path / "t"))})
    pipeline.add_pipe("test_table_holder", config={"folder": str(other)})
    assert not ner.share_word_embeddings("test_table_holder")


def test_spans_lose_stray_punctuation_at_their_edges(nlp):
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    doc = nlp("Hydroxychloroquine ( HCQ ) and vitamin B(12) .")
    words = [t.text for t in doc]
    b, i = scheme.begin("CHEMICAL"), scheme.begin("CHEMICAL") + 1
    tags = [0] * len(doc)
    tags[0], tags[1] = b, i                                   # "Hydroxychloroquine (" -> trimmed
    start = words.index("vitamin")
    end = words.index(")", start) + 1
    tags[start:end] = [b] + [i] * (end - start - 1)          # "vitamin B(12)" keeps its matched ")"
    spans = scheme.spans(doc, tags)
    assert [s.text for s in spans] == ["Hydroxychloroquine", doc[start:end].text]
    assert spans[1].text.endswith(")")
    only = [0] * len(doc)
    only[1] = b                                              # a span of "(" alone disappears
    assert scheme.spans(doc, only) == []


def test_spans_lose_a_function_word_at_their_end_only(nlp):
    scheme = TagScheme(["CHEMICAL", "DISEASE"])
    b = scheme.begin("DISEASE")
    doc = nlp("renal failure and the Tetralogy of Fallot or")
    tags = [b, b + 1, b + 1, 0, b, b + 1, b + 1, b + 1]     # "renal failure and", "Tetralogy of Fallot or"
    assert [s.text for s in scheme.spans(doc, tags)] == ["renal failure", "Tetralogy of Fallot"]
    tags = [0, 0, 0, b, b + 1, b + 1, 0, 0]                  # "the Tetralogy of": a leading word stays
    assert [s.text for s in scheme.spans(doc, tags)] == ["the Tetralogy"]
    assert scheme.spans(doc, [0, 0, b, 0, 0, 0, 0, 0]) == []  # "and" alone is nothing


def test_special_ids_are_the_ones_the_tokenizer_adds(tmp_path):
    """MPNet's vocabulary lists BERT's [CLS]/[SEP] too, but wraps a sequence in <s> … </s>: windows
    must start and end with what the model was trained with."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from spacy_sapbert.encoding.fast_tokenizer import FastTokenizer

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "[UNK]": 3, "[CLS]": 4, "[SEP]": 5, "acid": 6}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0),
                                                                                                    ("</s>", 2)])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    fast = FastTokenizer(tmp_path, None)
    assert fast.special_ids() == (0, 2)
    assert fast.pad_token_id == 1 and fast.word_pieces(["acid"]) == [[6]]


def test_word_pieces_encode_each_distinct_word_once_and_batch_windows_match_one_doc_at_a_time(tiny_bert, nlp,
                                                                                              tmp_path):
    """A batch of documents is read in one word-piece call that encodes each distinct word once; the pieces,
    and the windows made from them, are those of every word and document read on its own."""
    from spacy_sapbert.encoding.fast_tokenizer import FastTokenizer

    fast = FastTokenizer(tiny_bert, None)
    words = ["breast", "cancer", "and", "breast", "", " ", "cancer", "acid-base", "breast"]
    calls = []
    encode_batch = fast._tokenizer.encode_batch
    fast._tokenizer = type("Counting", (), {"encode_batch": lambda self, texts, **kw: calls.append(list(texts))
                                            or encode_batch(texts, **kw),
                                            "no_truncation": lambda self: None})()
    pieces = fast.word_pieces(words)
    assert calls == [["breast", "cancer", "and", "", " ", "acid-base"]]
    assert pieces == [e.ids for e in encode_batch(words, add_special_tokens=False)]
    folder = _tagger_folder(tiny_bert, nlp, tmp_path / "tagger")
    pipeline = spacy.blank("en", config=TOKENIZER_CONFIG)
    pipeline.add_pipe("sapbert_ner", config={"model": str(folder), "precision": "float32"})
    tagging = pipeline.get_pipe("sapbert_ner")._ready()
    docs = [pipeline.make_doc(t) for t in ("breast cancer and kidney cancer", "acid", "kidney\n\nbreast cancer")]
    assert [[vars(w) for w in ws] for ws in tagging.batch_windows(docs)] == \
        [[vars(w) for w in tagging.windows(doc)] for doc in docs]


def test_int8_pipe_tags_like_float32_and_saves_the_float_weights(tiny_bert, nlp, tmp_path):
    from safetensors.torch import load_file

    from spacy_sapbert.encoding.int8 import is_quantized

    folder = _tagger_folder(tiny_bert, nlp, tmp_path / "tagger")
    model, _, settings = tagger_model.load(folder)
    torch.manual_seed(1)
    torch.nn.init.normal_(model.head.weight, std=0.5)  # scores that depend on every layer
    tagger_model.save(model, tiny_bert, settings["tags"], folder)
    runs = {}
    for precision in ("float32", "int8"):
        pipeline = spacy.blank("en", config=TOKENIZER_CONFIG)
        ner = pipeline.add_pipe("sapbert_ner", config={"model": str(folder), "precision": precision})
        pipeline.add_pipe("test_table_holder", config={"folder": str(tiny_bert)})
        runs[precision] = (pipeline, ner, ner.predict([pipeline.make_doc("breast cancer and kidney failure")])[0])
    pipeline, ner, scores = runs["int8"]
    assert ner.tagging.dtype == "int8" and is_quantized(ner.tagging.model)
    assert not is_quantized(runs["float32"][1].tagging.model)
    assert not np.array_equal(scores, runs["float32"][2])          # int8 arithmetic, not float32's
    assert np.allclose(np.exp(scores), np.exp(runs["float32"][2]), atol=0.05)
    # saving rewrites the model (its table now left out): the float weights come from the files, not int8 layers
    assert ner.share_word_embeddings("test_table_holder")
    pipeline.to_disk(tmp_path / "saved")
    written = load_file(str(tmp_path / "saved" / "sapbert_ner" / "model.safetensors"))
    original = load_file(str(folder / "model.safetensors"))
    assert tagger_model.WORD_EMBEDDINGS not in written
    assert set(written) == set(original) - {tagger_model.WORD_EMBEDDINGS}
    for name, tensor in written.items():
        assert torch.equal(tensor.float(), original[name].half().float()), name
    loaded = spacy.load(tmp_path / "saved")
    assert loaded.get_pipe("sapbert_ner").cfg["precision"] == "int8"


def test_bf16_pipe_keeps_linear_weights_in_bf16_tags_as_autocast_does_and_saves_the_float_weights(tiny_bert, nlp,
                                                                                                  tmp_path):
    from safetensors.torch import load_file

    from spacy_sapbert.encoding.half_weights import has_half_linears

    folder = _tagger_folder(tiny_bert, nlp, tmp_path / "tagger")
    model, _, settings = tagger_model.load(folder)
    torch.manual_seed(1)
    torch.nn.init.normal_(model.head.weight, std=0.5)  # scores that depend on every layer
    tagger_model.save(model, tiny_bert, settings["tags"], folder)
    pipeline = spacy.blank("en", config=TOKENIZER_CONFIG)
    ner = pipeline.add_pipe("sapbert_ner", config={"model": str(folder), "precision": "bfloat16"})
    pipeline.add_pipe("test_table_holder", config={"folder": str(tiny_bert)})
    doc = pipeline.make_doc("breast cancer and kidney failure")
    scores = ner.predict([doc])[0]
    linears = [m for m in ner.tagging.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears) and has_half_linears(ner.tagging.model)
    # the float32 weights under the same bf16 autocast: every score the same to the bit
    half, ner.tagging.model = ner.tagging.model, tagger_model.load(folder)[0]
    assert not has_half_linears(ner.tagging.model)
    assert np.array_equal(ner.predict([doc])[0], scores)
    ner.tagging.model = half
    # saving rewrites the model (its table now left out): the float weights come from the files
    assert ner.share_word_embeddings("test_table_holder")
    pipeline.to_disk(tmp_path / "saved")
    written = load_file(str(tmp_path / "saved" / "sapbert_ner" / "model.safetensors"))
    original = load_file(str(folder / "model.safetensors"))
    assert set(written) == set(original) - {tagger_model.WORD_EMBEDDINGS}
    for name, tensor in written.items():
        assert torch.equal(tensor.float(), original[name].half().float()), name
    assert not has_half_linears(tagger_model.load(folder, linear_dtype="float32")[0])  # other precisions: float32


def test_int8_is_a_precision_of_the_ner_only():
    from spacy_sapbert.util.devices import check_dtype

    assert check_dtype("INT8", int8=True) == "int8" == check_dtype("qint8", int8=True)
    with pytest.raises(InputError, match="int8"):
        check_dtype("int4", int8=True)
    with pytest.raises(InputError, match="precision 'int8' is the NER's"):  # the linker's encoder: no
        check_dtype("int8", setting="precision")
