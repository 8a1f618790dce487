"""Chemical names MeSH's descriptors lack: supplementary concept records (gilda's MeSH mappings)
and DrugBank's open vocabulary.

About 14% of BC5CDR chemical mentions point to a MeSH *supplementary* record (``C…``), which the
descriptor files do not hold. gilda's ``mesh_mappings.tsv`` gives 24,837 of them with their MeSH
name and, for most, the name of the ChEBI (or DOID, HP…) entry they map to: one concept each,
typed by that target (ChEBI: Chemical; DOID, HP, EFO: Disease).

DrugBank's open vocabulary has brand names and synonyms but no MeSH IDs. A drug joins the MeSH
chemical whose name equals (after :func:`~spacy_sapbert.kb.normalize.normalize`) the drug's common
name or one of its synonyms, when exactly one chemical concept has that name; its names then
become aliases of that concept. A drug that matches none, or several, is left out and counted:
a name shared by two concepts would make the join a guess.
"""
from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple, Union

from spacy_sapbert.errors import InputError
from spacy_sapbert.kb.concept import Concept, ordered_union
from spacy_sapbert.kb.normalize import normalize
from spacy_sapbert.kb.sources.stats import ReadStats, ensure_stats
from spacy_sapbert.util.textfile import iter_lines

PathLike = Union[str, Path]
GILDA_COLUMNS = 6
CHEMICAL_TARGETS = frozenset({"CHEBI"})
DISEASE_TARGETS = frozenset({"DOID", "HP", "EFO", "MONDO", "ORPHANET"})
DRUGBANK_COLUMNS = ("DrugBank ID", "Common name", "Synonyms")


def read_gilda_mesh(path: PathLike, stats: Optional[ReadStats] = None) -> Iterator[Concept]:
    """MeSH supplementary records (``C…`` IDs) of gilda's ``mesh_mappings.tsv``, one concept each:
    the MeSH name, the mapped entry's name as an alias, typed by the mapped vocabulary."""
    stats = ensure_stats(stats, "gilda-mesh-supplementary", path)
    records: Dict[str, Tuple[str, List[str], Set[str]]] = {}
    for line_no, line in iter_lines(path):
        cols = line.split("\t")
        stats.records += 1
        if len(cols) != GILDA_COLUMNS or cols[0] != "MESH":
            raise InputError(f"expected {GILDA_COLUMNS} tab-separated columns starting with MESH, got {line[:80]!r}",
                             path, line_no)
        mesh_id, name, target, target_name = cols[1], cols[2].strip(), cols[3], cols[5].strip()
        if not mesh_id.startswith("C"):
            stats.skip("descriptor (already in the MeSH descriptor files)")
            continue
        if not mesh_id[1:].isdigit() or not name:
            raise InputError(f"bad MeSH supplementary ID or empty name: {mesh_id!r} {name!r}", path, line_no, "id")
        kind = "Chemical" if target in CHEMICAL_TARGETS else "Disease" if target in DISEASE_TARGETS else None
        if kind is None:
            stats.skip(f"mapped to {target}")
            continue
        _, aliases, types = records.setdefault(mesh_id, (name, [], set()))
        aliases.append(target_name)
        types.add(kind)
    for mesh_id, (name, aliases, types) in records.items():
        names = ordered_union([name], aliases)
        stats.kept(len(names))
        yield Concept(mesh_id, name, [a for a in names[1:] if a.lower() != name.lower()], sorted(types))


class Drug(NamedTuple):
    drugbank_id: str
    names: List[str]
    """Common name first, then the synonyms."""


def read_drugbank(path: PathLike, stats: Optional[ReadStats] = None) -> Iterator[Drug]:
    """Drugs of DrugBank's open vocabulary CSV (``DrugBank ID``, ``Common name``, ``Synonyms`` split on ``|``)."""
    stats = ensure_stats(stats, "drugbank-open-vocabulary", path)
    text = "\n".join(line for _, line in iter_lines(path))
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in DRUGBANK_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"the header lacks the column(s) {missing}", path, 1)
    for row_no, row in enumerate(reader, 2):
        stats.records += 1
        names = ordered_union([(row["Common name"] or "").strip()],
                              [s.strip() for s in (row["Synonyms"] or "").split(" | ")])
        if not row["DrugBank ID"] or not names:
            raise InputError("a drug needs an ID and a common name", path, row_no, "DrugBank ID")
        stats.kept(len(names))
        yield Drug(row["DrugBank ID"], names)


def join_drugs(concepts: List[Concept], drugs: Iterable[Drug], stats: Optional[ReadStats] = None) -> List[Concept]:
    """``concepts`` with the names of each drug that one Chemical concept names added as its aliases."""
    stats = ensure_stats(stats, "drugbank-join", unit="drugs")
    owners: Dict[str, Set[int]] = defaultdict(set)
    for index, concept in enumerate(concepts):
        if "Chemical" in concept.types:
            for name in concept.names:
                owners[normalize(name)].add(index)
    added: Dict[int, List[str]] = defaultdict(list)
    for drug in drugs:
        stats.records += 1
        matched = set().union(*(owners.get(normalize(name), set()) for name in drug.names))
        if len(matched) != 1:
            stats.skip("no MeSH chemical of that name" if not matched else "names of several MeSH chemicals")
            continue
        index = matched.pop()
        added[index].extend(drug.names)
        stats.kept(len(drug.names))  # counts drugs joined (the unit) and their names
    out = list(concepts)
    for index, names in added.items():
        concept = out[index]
        out[index] = concept._replace(aliases=[a for a in ordered_union(concept.aliases, names)
                                               if a != concept.canonical_name])
    return out
