"""The tiles a level can hold and what a word fetched into it costs, shared by the link
bounds (`link.py`) and the link bounds by spread (`spread.py`)."""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ... import tiles
from ...mapspace import Mapspace, tables
from .energy import fill_energy, serve_energy, sharing_fanout
from .refetch import merged_orders

class TileGrid(NamedTuple):
    """The tiles level j can hold with the tensors it must keep (`must`), as a grid over each
    dim's tile extents (`values`; `grid`, (D, M)), which of them fit, their words per tensor
    (`tile`), each tensor's touched words, and per merged loop order (`merged_orders`) per
    tensor the (distinct words, times brought down) the merged loops imply."""
    values: list[np.ndarray]
    grid: np.ndarray
    must: list[int]
    fits: np.ndarray
    tile: dict
    touched: dict
    ways: list[list[tuple]]

def tile_grid(space: Mapspace, j: int, max_combinations: int, stages: int | None = None) -> TileGrid | None:
    """The tile grid of level j at `stages` (default its fewest), or None where it must keep
    nothing, the grid is too large or nothing fits. It depends on what level j must keep and
    its stages alone: kept with what the parts of the space share (`Mapspace.shared`; 64 parts
    of a pe-array GEMM ask for the grids of a few keep sets)."""
    must = [t for t in range(len(space.workload.tensors)) if all(t in k for k in space.choices[j].keeps)]
    if not must:
        return None
    stages = stages or min(space.choices[j].stages)
    memo = space.shared.setdefault("tile grids", {})
    key = (j, tuple(must), stages, max_combinations)
    if key not in memo:
        memo[key] = _tile_grid(space, j, max_combinations, must, stages)
    return memo[key]


def _tile_grid(space: Mapspace, j: int, max_combinations: int, must: list[int], stages: int) -> TileGrid | None:
    arch, workload = space.arch, space.workload
    values = [np.unique(tables.level_view(space, rows)[2][:, j]) for rows in space.dim_tables]
    if math.prod(len(v) for v in values) > max_combinations:
        return None
    grid = np.stack([g.ravel() for g in np.meshgrid(*values, indexing="ij")])        # (D, M)
    trips = np.maximum(np.array(workload.sizes, float)[:, None] / grid, 1.0)         # Q_d
    tile = {t: tiles.words(workload.tensors[t], grid) for t in must}
    footprint = sum(tile[t] * arch.levels[j].word_bytes(workload.tensors[t]) for t in must)
    fits = tiles.fits_level(arch.levels[j], footprint * stages)
    if not fits.any():
        return None
    # a sliding window (p+r) fetches only the new slice as it moves, which the merged
    # loops' tile-by-tile count does not see: it could exceed a mapping's traffic (conv1d,
    # p and r of 2, under a level-1 tile of p = 1: 4 words against 3). Such a tensor is
    # charged instead the words its windows touch, once per iteration of the merged
    # loops over dims it does not index outside its innermost relevant one: each such
    # iteration starts its windows' sweep again from a tile that moved back, fetched
    # whole, and every word the sweep touches is fetched in it at least once
    touched = {t: workload.touched_words(t) for t in must}
    ways = []
    for way in merged_orders(workload, set(must)):
        terms = []
        for t in must:
            tensor = workload.tensors[t]
            # its distinct words (whole tiles, or the words a window touches), then how many
            # times the loops over dims it does not index bring them down again
            repeats = np.prod([trips[d] for d in way[t] if d not in tensor.dims], axis=0)
            base = (touched[t] if tensor.has_sliding_axis else
                    tile[t] * np.prod([trips[d] for d in way[t] if d in tensor.dims], axis=0))
            terms.append((base, repeats))
        ways.append(terms)
    return TileGrid(values, grid, must, fits, tile, touched, ways)

class LinkCost(NamedTuple):
    """What a word fetched into level j (drained from it, for the output) costs: `fill` at j,
    per fill of every instance, and the parent's side, per candidate parent (cost per word,
    the most children one of its transfers serves). A parent's transfer serves at most
    `spread` instances at once, and every word of the tensor at least once: over a merged
    loop nest that moves `base` distinct words, `repeats` times over (the loops over dims
    the tensor does not index, between its tiles), the parent moves at least
    base x max(1, repeats / spread) words, where base x repeats / spread would charge even
    the compulsory words a share of the widest multicast."""
    fill: float
    parents: tuple[tuple[float, int], ...]

    def with_spread(self, spread: float) -> "LinkCost":
        """The same, each parent's transfers shared by at most `spread` instances."""
        return LinkCost(self.fill, tuple((cost, min(most, spread)) for cost, most in self.parents))

    def per_word(self) -> float:
        """Per word filled, each parent's transfer shared as widely as its network allows."""
        return self.fill + min((cost / spread for cost, spread in self.parents), default=0.0)

    def total(self, base, repeats):
        """Over `base` x `repeats` words filled (arrays over tiles)."""
        parent = functools.reduce(np.minimum, (cost * base * np.maximum(1.0, repeats / spread)
                                               for cost, spread in self.parents), 0.0 if not self.parents else np.inf)
        return self.fill * base * repeats + parent

def bytes_sent(space: Mapspace, j: int, t: int) -> LinkCost:
    """Bytes the parent moves per word fetched into (or drained from) level j, at best: the
    parent may be any level from the nearest that must keep the tensor on (each with the
    narrowest word and widest multicast between it and j, keeping this a bound)."""
    tensor = space.workload.tensors[t]
    nearest_must = max(p for p in range(j) if all(t in k for k in space.choices[p].keeps))
    spread = max(sharing_fanout(space.arch, tensor, p, j) for p in range(nearest_must, j))
    word = min(space.arch.levels[p].word_bytes(tensor) for p in range(nearest_must, j))
    return LinkCost(0.0, ((word, spread),))

def bytes_written(space: Mapspace, j: int, t: int) -> LinkCost:
    """Bytes level j itself writes per word of an input filled into it (the output's drains
    are its parent's updates, counted there: none here)."""
    tensor = space.workload.tensors[t]
    return LinkCost(0.0 if tensor.is_output else space.arch.levels[j].word_bytes(tensor), ())

def link_weight(space: Mapspace, j: int, t: int) -> float:
    """Energy per word fetched into level j (fill at j plus the cheapest parent read, divided
    by the widest multicast), or per word drained from j for the output."""
    return link_energy(space, j, t).per_word()

def link_energy(space: Mapspace, j: int, t: int) -> LinkCost:
    """The energy of a word fetched into level j: its fill at j, and per candidate parent (at
    or below the nearest level that must keep it, and keeping it) its read (an output's
    update) and the multicast (reduction) between it and j."""
    arch, tensor = space.arch, space.workload.tensors[t]
    level = arch.levels[j]
    own = 0.0 if tensor.is_output else fill_energy(level, tensor)
    parents = []
    nearest_must = max(p for p in range(j) if all(t in k for k in space.choices[p].keeps))
    for p in range(nearest_must, j):      # the parent is at or below the nearest level that must keep t
        if not any(t in k for k in space.choices[p].keeps):
            continue
        lp = arch.levels[p]
        spread = sharing_fanout(arch, tensor, p, j)
        parents.append((serve_energy(lp, tensor), spread))
    return LinkCost(own, tuple(parents))
