"""A lower bound on the traffic through the innermost storage level while its keeps are open.

With keep/bypass searched, no level *must* keep a tensor, so `bounds.LinkBounds` (the cheapest
traffic into a level over the tiles that fit it, for what it must keep) has nothing to bound,
and the per-MAC floor (`operand_floor`) alone lets a node look as if a tiny register file could
reuse everything. Here the innermost level's choice is enumerated instead of assumed: for each
keep set it may take, each tile that fits it with that keep set, each split of the fanouts
above it and each order of one merged loop per dim above it,
- a tensor it keeps is filled (every copy: instances that differ only in dims the tensor does
  not index hold the same words), each fill read from the tensor's parent and shared by the
  widest multicast the split allows, then read (or updated, for the output) once per MAC;
- a tensor it does not keep is read from (or updated at) the parent once per MAC, shared by the
  split's multicast (or reduction) below the parent.
The parent is the cheapest level that can serve it at that node: the deepest decided keeper or
an undecided level between it and the innermost one that may keep the tensor (whose own fills
are left out, so the bound stays below every completion). The minimum over all these choices
does not depend on the node except through the parent of each tensor, so it is computed once
per combination of parents.

Merging the loops above the level into one per dim in the best order never adds traffic, and
every relaxation here (the node's own tile and loop order ignored, padding ignored, block
rounding ignored) only lowers the minimum: it is a valid bound, taken as the larger of it and
the general bound in `bounds.lower_bound`.
"""
from __future__ import annotations

import copy
import itertools
import math

import numpy as np

from ..mapspace import Mapspace
from .operand_floor import SplitVectors, _shared_dims, fill_energy, read_energy, serve_energy

MAX_CELLS = 1_000_000      # tiles x split vectors priced together at most (else splits relaxed)
MAX_TILES = 200_000        # tile vectors of the innermost level (else no bound from here)


class InnermostFloor:
    def __init__(self, space: Mapspace, splits: SplitVectors):
        self.space = space
        workload = space.workload
        self.level = space.n_levels - 1
        self.cache: dict[tuple[int, ...], float] = {}
        # keep-free pieces, shared with the parts' copies (`for_space`)
        self.refetches: dict[tuple, np.ndarray] = {}
        self.per_word: dict[tuple, np.ndarray] = {}
        values = [np.unique(space.level_view(rows)[2][:, self.level]) for rows in space.dim_tables]
        self.enabled = self.level >= 1 and math.prod(len(v) for v in values) <= MAX_TILES
        if not self.enabled:
            return
        tiles = np.stack([g.ravel() for g in np.meshgrid(*values, indexing="ij")]).astype(float)   # (D, M)
        vectors = splits.at_depth[0]
        if vectors is not None and len(vectors) * tiles.shape[1] <= MAX_CELLS:
            vectors = vectors[:, :self.level]                                    # (V, j, D)
        else:
            vectors = None
        sizes = np.array(workload.sizes, float)
        if vectors is None:
            self.split = np.ones((1, space.n_dims))
        else:
            self.split = vectors.prod(axis=1).astype(float)                      # (V, D)
        # cells: every (tile, split) pair whose tile times split fits the dim
        m, v = tiles.shape[1], len(self.split)
        tile = np.repeat(tiles, v, axis=1)                                       # (D, M*V)
        split = np.tile(self.split.T, (1, m))                                    # (D, M*V)
        fits = (tile * split <= sizes[:, None]).all(axis=0)
        self.tile, split_of = tile[:, fits], np.tile(np.arange(v), m)[fits]
        # per cell, its split vector (per fanout level and dim) and its split per dim
        self.cell_vectors = None if vectors is None else vectors[split_of]          # (cells, j, D)
        self.cell_split = self.split[split_of]                                      # (cells, D)
        split = split[:, fits]
        self.instances = split.prod(axis=0)
        self.trips = np.maximum(sizes[:, None] / (self.tile * split), 1.0)
        self.words = [np.prod([1 + sum(c * (self.tile[d] - 1) for d, c in axis) for axis in tensor.axes], axis=0)
                      for tensor in workload.tensors]
        self.orders = list(itertools.permutations(range(space.n_dims))) if space.n_dims <= 5 else [None]

    def for_space(self, part: Mapspace) -> "InnermostFloor":
        """The same floor for a part of the space (`Mapspace.with_keeps`): the tiles and splits
        do not depend on keeps; the minima, which do, are recomputed."""
        floor = copy.copy(self)
        floor.space, floor.cache = part, {}
        return floor

    def floor(self, depth: int, deepest: list[np.ndarray]) -> np.ndarray | None:
        """Per node, the bound on what is still open at and below the deepest decided keepers,
        given per tensor the deepest decided keeper of each node (`deepest[t]`, (N,)); None when
        the innermost level's keeps are already decided or the bound is disabled."""
        if not self.enabled or depth >= self.level:
            return None
        keys = np.stack(deepest)                                                 # (T, N)
        # one integer per node (levels are small: -1 .. L), as np.unique over columns sorts
        # them as raw bytes, hundreds of times slower
        base = self.space.n_levels + 2
        codes = ((keys + 1) * base ** np.arange(len(keys))[:, None]).sum(axis=0)
        unique, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        values = np.array([self._minimum(depth, tuple(int(x) for x in keys[:, i])) for i in first])
        return values[inverse.reshape(-1)]

    def _minimum(self, depth: int, deepest: tuple[int, ...]) -> float:
        key = (depth,) + deepest
        if key not in self.cache:
            self.cache[key] = self._compute(depth, deepest)
        return self.cache[key]

    def _parents(self, t: int, depth: int, deepest: int) -> list[int]:
        """Levels that may serve tensor t to the innermost level: the deepest decided keeper and
        the undecided levels between that may keep it; where an undecided level must keep it,
        only the deepest such and those below it (the innermost level's words pass through
        it), so that the traffic into the levels between is disjoint from what is charged
        here and `bounds.lower_bounds` adds their link floors to this one."""
        choices = self.space.choices
        may = [lv for lv in range(depth + 1, self.level) if any(t in keep for keep in choices[lv].keeps)]
        must = [lv for lv in may if all(t in keep for keep in choices[lv].keeps)]
        return [lv for lv in may if lv >= must[-1]] if must else [deepest] + may

    def _per_word(self, t: int, parents: list[int], stop: int) -> np.ndarray:
        """(cells,) the cheapest energy per word a parent spends serving tensor t to what lies
        below level `stop`-1's fanout, one transfer shared by the split's multicast (memoised:
        it does not depend on keeps, and the parts of a space ask for the same ones)."""
        key = (t, tuple(parents), stop)
        if key in self.per_word:
            return self.per_word[key]
        arch, workload = self.space.arch, self.space.workload
        tensor = workload.tensors[t]
        shared = _shared_dims(workload, t)
        best = np.full(self.tile.shape[1], np.inf)
        for p in parents:
            spread = np.ones(self.tile.shape[1])
            for x in range(p, stop):
                if not arch.levels[x].shares(tensor) or not shared.any():
                    continue
                if self.cell_vectors is not None and x < self.level:
                    spread = spread * self.cell_vectors[:, x][:, shared].prod(axis=1)
                else:       # not enumerated: the whole fanout may multicast
                    fx, fy = arch.fanout(x)
                    spread = spread * fx * fy
            best = np.minimum(best, serve_energy(arch.levels[p], tensor) / spread)
        self.per_word[key] = best
        return best

    def _compute(self, depth: int, deepest: tuple[int, ...]) -> float:
        space, arch, workload = self.space, self.space.arch, self.space.workload
        j, level = self.level, self.space.arch.levels[self.level]
        macs = float(workload.macs)
        n_tensors = len(workload.tensors)
        parents = [self._parents(t, depth, deepest[t]) for t in range(n_tensors)]
        fill_word = [self._per_word(t, parents[t], j) for t in range(n_tensors)]
        bypass_mac = [macs * self._per_word(t, parents[t], space.n_levels) for t in range(n_tensors)]
        below = [math.prod(arch.fanout(x)[0] * arch.fanout(x)[1] for x in range(j, space.n_levels)
                           if arch.levels[x].shares(tensor)) for tensor in workload.tensors]
        kept_mac = []
        for t, tensor in enumerate(workload.tensors):
            served = macs / below[t] * serve_energy(level, tensor)
            if tensor.is_output:
                # read-modify-write: every update but the first of each word in each copy reads
                copies = self.cell_split[:, ~workload.relevance[t]].prod(axis=1)
                reads = np.maximum(0.0, macs / below[t] - workload.tensor_words(t) * copies)
                served = served + reads * read_energy(level, tensor)
            kept_mac.append(served)
        write = [0.0 if tensor.is_output else fill_energy(level, tensor) for tensor in workload.tensors]
        choice = space.choices[j]
        best = np.inf
        for order in self.orders:
            refetch = [self._refetch(t, order) for t in range(n_tensors)]
            for keep in choice.keeps:
                footprint = sum((self.words[t] * level.word_bytes(workload.tensors[t]) for t in keep),
                                np.zeros(self.tile.shape[1]))
                fits = footprint * min(choice.stages) <= level.capacity
                if not fits.any():
                    continue
                total = np.zeros(self.tile.shape[1])
                for t in range(n_tensors):
                    if t in keep:
                        # a window (p+r) moving along its axis fetches only the new slice,
                        # which the merged loops' whole-tile count does not see: each
                        # instance fills its tile at least once, nothing more is certain
                        sliding = workload.tensors[t].has_sliding_axis
                        fills = self.instances * self.words[t] * (1.0 if sliding else refetch[t])
                        total = total + fills * (write[t] + fill_word[t]) + kept_mac[t]
                    else:
                        total = total + bypass_mac[t]
                best = min(best, float(total[fits].min()))
        return best if np.isfinite(best) else 0.0

    def _refetch(self, t: int, order) -> np.ndarray:
        """(cells,) times each instance's tile of tensor t is filled, with one merged loop per
        dim above the level in `order` (outermost first): the loops out to its innermost
        relevant one (every relevant loop alone when too many orders to enumerate)."""
        dims = self.space.workload.tensors[t].dims
        if order is None:
            outer = tuple(dims)
        else:
            last = max(i for i, d in enumerate(order) if d in dims)
            outer = tuple(order[:last + 1])
        if outer not in self.refetches:         # memoised as `_per_word` is; orders share them
            self.refetches[outer] = (np.prod([self.trips[d] for d in outer], axis=0) if outer
                                     else np.ones(self.tile.shape[1]))
        return self.refetches[outer]
