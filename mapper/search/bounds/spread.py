"""The energy of the traffic into each undecided level as a function of how widely each
tensor's transfers into it are shared (`SpreadBound`), so that the operand bound can add it
under the same split vector it charges the compute units' operands with
(`operand.operand_bound`).

Why: the link bounds (`link.LinkBounds`) give every tensor the widest multicast its path
allows, each on its own; but one split serves all tensors at once. On a 16 x 16 PE array
whose register files take A and B straight from DRAM and send Z's partial sums back there,
Z's updates are few only where the reduction dim k is split over the PEs, and then no PE
shares A's or B's words with another (both are indexed by k): with the link and operand
bounds apart, each assumed the split that suits it, and a part of the space that cannot
hold the optimum stayed open and was walked for most of the search (docs/RESULTS.md).

A transfer into level j is shared by the instances of j that differ only in dims the tensor
does not index (an identical tile requested at the same step), over the fanouts between its
parent and j whose networks share it: at most the product of those splits, its *spread*.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...mapspace import Mapspace
from .energy import sharing_fanout
from .grid import link_energy, tile_grid
from .operand import SplitVectors

MAX_SPREAD_CELLS = 30_000_000   # (spread combinations x tiles) evaluated at most per level


class SpreadBound(NamedTuple):
    """Level j's link energy over every tile that fits, per combination of the spreads its
    tensors' transfers get: `least[i0, i1, ...]` with spread `values[k][ik]` for
    `tensors[k]`, whose spread is the product of the splits over dims it does not index at
    `levels[k]` (the sharing fanouts between its nearest sure keeper above and j)."""
    j: int
    tensors: tuple[int, ...]
    levels: tuple[tuple[int, ...], ...]
    values: tuple[np.ndarray, ...]
    least: np.ndarray

    def at(self, spreads: list[np.ndarray]) -> np.ndarray:
        """The bound at each tensor's `spreads` (arrays alike): each rounded up to a value
        listed (more sharing never costs more, so the bound stays one; the last value listed
        is the widest spread the fanouts allow)."""
        index = tuple(np.minimum(np.searchsorted(v, s - 1e-9), len(v) - 1) for v, s in zip(self.values, spreads))
        return self.least[index]


def spread_bound(space: Mapspace, j: int, splits: SplitVectors, max_combinations: int) -> SpreadBound | None:
    """Level j's `SpreadBound`, or None: it must keep nothing, nothing it keeps can be shared
    on the way in, or the split vectors are not enumerable."""
    vectors = splits.at_depth[0]
    if vectors is None or not splits.any_sharing:
        return None
    arch, workload = space.arch, space.workload
    grid = tile_grid(space, j, max_combinations)
    if grid is None:
        return None
    levels, values = [], []
    for t in grid.must:
        tensor = workload.tensors[t]
        nearest_must = max(p for p in range(j) if all(t in k for k in space.choices[p].keeps))
        shared = tuple(x for x in range(nearest_must, j)
                       if arch.levels[x].shares(tensor) and arch.fanout_units(x) > 1)
        irrelevant = ~workload.relevance[t]
        # each level's split over the dims the tensor ignores, at most what its network shares
        spreads = np.ones(1, np.int64)
        for x in shared:
            spreads = spreads * np.minimum(vectors[:, x][:, irrelevant].prod(axis=1), arch.sharing_units(x, tensor))
        widest = sharing_fanout(arch, tensor, nearest_must, j)
        levels.append(shared)
        values.append(np.unique(np.append(spreads, widest)).astype(float))
    if not any(len(v) > 1 for v in values):
        return None                 # nothing is shared: the link bound says the same
    fits = np.flatnonzero(grid.fits)            # only the least over all tiles is kept
    if math.prod(len(v) for v in values) * len(fits) > MAX_SPREAD_CELLS:
        return None
    costs = [link_energy(space, j, t) for t in grid.must]
    least = None
    n = len(grid.must)
    for terms in grid.ways:
        total = 0.0
        for k, ((base, repeats), cost, spread) in enumerate(zip(terms, costs, values)):
            shape = [1] * n + [-1]
            shape[k] = len(spread)
            base, repeats = (np.broadcast_to(x, grid.fits.shape)[fits] for x in (base, repeats))
            total = total + np.stack([cost.with_spread(s).total(base, repeats) for s in spread]).reshape(shape)
        way_least = total.min(axis=-1)
        least = way_least if least is None else np.minimum(least, way_least)
    return SpreadBound(j, tuple(grid.must), tuple(levels), tuple(values), least)
