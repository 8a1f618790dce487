"""The data order of a run: which pairs each process encodes at each step, as a pure function of the seed.

Because the order depends on nothing but (seed, epoch, step, micro-batch, rank), a resumed
run sees exactly the batches an uninterrupted one would have: no data-loader state needs to
be saved in a checkpoint.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch


class BatchPlan:
    """Which pairs each process encodes at each (step, micro-batch): a pure function of the
    seed, so a resumed run sees the batches an uninterrupted one would have.

    Per optimiser step the run consumes ``world × grad_accum × batch_size`` pairs of the
    epoch's permutation; the remainder of an epoch that does not fill a step is skipped.
    """

    def __init__(self, n_pairs: int, batch_size: int, grad_accum: int, world: int, seed: int) -> None:
        self.n_pairs = n_pairs
        self.batch_size = batch_size
        self.grad_accum = grad_accum
        self.world = world
        self.seed = seed
        self.pairs_per_step = batch_size * grad_accum * world
        self.steps_per_epoch = n_pairs // self.pairs_per_step
        self._perm: Tuple[int, Optional[torch.Tensor]] = (-1, None)

    def permutation(self, epoch: int) -> torch.Tensor:
        """The epoch's order of all pairs (cached: consecutive steps share an epoch)."""
        if self._perm[0] != epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm = (epoch, torch.randperm(self.n_pairs, generator=generator))
        return self._perm[1]  # type: ignore[return-value]

    def indices(self, step: int, micro: int, rank: int) -> List[int]:
        """Pair indices of micro-batch ``micro`` of optimiser step ``step`` on process ``rank``."""
        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        chunk = (in_epoch * self.grad_accum + micro) * self.world + rank
        perm = self.permutation(epoch)
        return perm[chunk * self.batch_size:(chunk + 1) * self.batch_size].tolist()
