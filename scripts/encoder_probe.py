"""A quick before/after probe of a linker encoder, for deciding whether a retrained one is worth a rebuild:
`python scripts/encoder_probe.py MODEL INDEX_DIR --kb kbs/mesh-medic-chem-train.jsonl.gz CORPUS...`.

Each single-ID gold mention's normalised text is encoded and the top concept of an exact (flat) index over
the KB is checked against the gold ID as the evaluation checks it (``spacy_sapbert.kb.matching.is_gold``: a
concept's alternative IDs count), per mention type. INDEX_DIR is loaded when it holds this model's
index of this KB (fingerprints checked), else every KB name is encoded and the index saved there. No
abbreviation expansion and no type filter: the absolute figures sit below the linker's, so only the
difference between two encoders on the same KB reads. ``--by-wording`` splits each type into the mentions whose
text is a KB name ("seen": the index answers with that name's stored vector, so every encoder finds it) and the
others ("unseen"), where two encoders differ. The linker's own figures: `sapbert evaluate`, `sapbert ner-e2e`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="encoder folder (or hub name)")
    parser.add_argument("index_dir", type=Path, help="exact index of this model and KB: loaded, or built and saved")
    parser.add_argument("corpora", nargs="+", type=Path, help="PubTator files")
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--by-wording", action="store_true", help="split each type into mentions whose text is a KB "
                        "name and the others")
    args = parser.parse_args()

    from spacy_sapbert.encoding.encoder import Encoder
    from spacy_sapbert.index.name_index import NameIndex
    from spacy_sapbert.kb.knowledge_base import KnowledgeBase
    from spacy_sapbert.kb.matching import is_gold
    from spacy_sapbert.kb.normalize import normalize
    from spacy_sapbert.training.corpora import read_pubtator

    encoder = Encoder(args.model, device="cpu")
    encoder.round_weights("float16")  # as the shipped default stores it
    kb = KnowledgeBase.from_jsonl(args.kb)
    if args.index_dir.is_dir():
        index = NameIndex.load(args.index_dir, encoder=encoder, kb=kb)
    else:
        index = NameIndex.build(kb, encoder, kind="flat")
        index.save(args.index_dir)
    for path in args.corpora:
        mentions = [(normalize(m.text), m.ids, m.type) for doc in read_pubtator(path) for m in doc.mentions
                    if len(m.ids) == 1]
        texts = [text for text, _, _ in mentions]
        _, rows = index.search(encoder.encode(texts), 1, texts=texts)
        names = set(index.names) if args.by_wording else None
        counts: dict = {}
        for (text, ids, kind), row in zip(mentions, rows[:, 0]):
            if args.by_wording:
                kind = f"{kind} {'seen' if text in names else 'unseen'}"
            right, total = counts.get(kind, (0, 0))
            counts[kind] = (right + int(row >= 0 and is_gold(index.concept_ids[row], ids, kb)), total + 1)
        print(json.dumps({"corpus": path.name, "mentions": len(mentions),
                          **{kind: round(100 * r / n, 2) for kind, (r, n) in sorted(counts.items())},
                          "counts": {kind: n for kind, (_, n) in sorted(counts.items())}}))


if __name__ == "__main__":
    main()
