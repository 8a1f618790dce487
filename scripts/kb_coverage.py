#!/usr/bin/env python
"""How well a KB covers a corpus's gold concepts: the numbers behind the KB table of docs/kb.md.

For each PubTator file and mention type: the share of distinct gold IDs the KB resolves
(by primary or equivalent ID), the share of mentions whose every gold ID resolves, and
the share of single-ID mentions whose text (normalised) is already one of the gold
concept's names (what an exact dictionary lookup would get right).

    python scripts/kb_coverage.py kbs/medic.jsonl.gz assets/corpora/ncbi-disease/NCBItestset_corpus.txt
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from spacy_sapbert.kb.knowledge_base import KnowledgeBase
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.training.corpora import read_pubtator


def coverage(kb: KnowledgeBase, corpus: Path) -> Dict[str, Dict[str, float]]:
    """Mention type → gold IDs / mentions / exact-name numbers for one corpus file."""
    ids: Dict[str, set] = defaultdict(set)
    mentions: Dict[str, List] = defaultdict(list)
    for doc in read_pubtator(corpus):
        for mention in doc.mentions:
            if mention.has_id:
                ids[mention.type].update(mention.ids)
                mentions[mention.type].append(mention)
    table: Dict[str, Dict[str, float]] = {}
    for kind in sorted(mentions):
        covered = {i for i in ids[kind] if kb.resolve(i) is not None}
        whole = [m for m in mentions[kind] if all(i in covered for i in m.ids)]
        single = [m for m in mentions[kind] if len(m.ids) == 1 and m.ids[0] in covered]
        exact = sum(1 for m in single
                    if normalize(m.text) in KnowledgeBase.normalized_names(kb.resolve(m.ids[0])))
        table[kind] = {"ids": len(ids[kind]), "ids_covered": len(covered), "mentions": len(mentions[kind]),
                       "mentions_covered": len(whole), "single_id_mentions": len(single), "exact_name": exact}
    return table


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kb", type=Path)
    parser.add_argument("corpora", type=Path, nargs="+")
    args = parser.parse_args(argv)
    kb = KnowledgeBase.from_jsonl(args.kb)
    out = sys.stdout
    out.write("| KB | corpus | type | gold IDs covered | mentions with all IDs covered | mention text is a name |\n")
    out.write("|---|---|---|---|---|---|\n")
    for corpus in args.corpora:
        for kind, row in coverage(kb, corpus).items():
            out.write(f"| {args.kb.name} | {corpus.name} | {kind} | "
                      f"{row['ids_covered']:,}/{row['ids']:,} ({row['ids_covered'] / row['ids']:.1%}) | "
                      f"{row['mentions_covered']:,}/{row['mentions']:,} ({row['mentions_covered'] / row['mentions']:.1%}) | "
                      f"{row['exact_name']:,}/{row['single_id_mentions']:,} "
                      f"({row['exact_name'] / max(row['single_id_mentions'], 1):.1%}) |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
