"""benchmarks/compute_share.py's FLOP count of the NER (pipeline_vs_scispacy.py reports it): what the packed pass
computes, its last layer only at the scored pieces, so that the share of the matrix-multiply peak is not inflated."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.benchmarks import load_script

MINILM = SimpleNamespace(hidden_size=384, intermediate_size=1536)


@pytest.fixture(scope="module")
def bench():
    return load_script("compute_share")


def test_a_window_scored_at_every_piece_costs_its_layers_whole(bench):
    assert bench.window_flops(MINILM, 4, 200, 200) == pytest.approx(4 * bench.layer_flops(MINILM, 200))


def test_unscored_pieces_cost_only_their_last_keys_and_values(bench):
    h, i = MINILM.hidden_size, MINILM.intermediate_size
    full, part = bench.window_flops(MINILM, 4, 256, 256), bench.window_flops(MINILM, 4, 256, 156)
    # 100 pieces less: no query, output projection, feed-forward or attention products for them in the last layer
    assert full - part == pytest.approx(100 * (2 * (2 * h * h + 2 * h * i) + 4 * 256 * h))
    assert bench.window_flops(MINILM, 1, 10, 0) == pytest.approx(10 * 2 * 2 * h * h)
