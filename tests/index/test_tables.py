"""The compact tables' name lookup (:class:`~spacy_sapbert.index.tables.NameRows`)."""
import os
import pickle
import subprocess
import sys

import numpy as np

from spacy_sapbert.index.tables import NameRows, tables_of


def test_name_rows_gives_each_names_rows_in_row_order():
    names, _, rows = tables_of(["fever", "cold", "fever", "flu", "cold"], ["C1", "C2", "C3", "C4", "C2b"])
    lookup = NameRows(names, rows[:, 0])
    found = lookup.rows(["cold", "fever", "headache", "", "flu"])
    assert [None if r is None else r.tolist() for r in found] == [[1, 4], [0, 2], None, None, [3]]
    assert lookup.numbers(["flu", "Flu"]) == [names.index("flu"), None]  # the text as stored, nothing folded


def test_name_rows_of_no_names():
    lookup = NameRows([], np.zeros(0, dtype=np.int32))
    assert lookup.rows(["fever"]) == [None]


def test_name_rows_checks_the_text_behind_a_hash():
    """Two texts whose hashes are equal (forced here by a name table whose hash array lies) are told
    apart by the text itself: a collision never makes a text a name."""
    lookup = NameRows(["fever"], np.array([0], dtype=np.int32))
    lookup._hashes[:] = hash("cold")  # what a collision would look like
    assert lookup.numbers(["cold", "fever"]) == [None, None]


def test_name_rows_pickled_into_another_process_hashes_there(tmp_path):
    """String hashes are salted per process: a lookup sent to a process with another salt rebuilds them."""
    names, _, rows = tables_of(["fever", "cold", "fever"], ["C1", "C2", "C3"])
    (tmp_path / "rows.pkl").write_bytes(pickle.dumps(NameRows(names, rows[:, 0])))
    probe = ("import pickle, sys; r = pickle.loads(open(sys.argv[1], 'rb').read()); "
             "print([None if x is None else x.tolist() for x in r.rows(['fever', 'cold', 'flu'])])")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "rows.pkl")], capture_output=True, text=True,
                         env=env, check=True).stdout.strip()
    assert out == "[[0, 2], [1], None]"
