"""Per undecided level, a bound on the traffic into it whatever the rest of the mapping
(`LinkBounds`), kept per largest tile a node still allows (`TileBound`), and the bytes its
feeders must move, which bound their time."""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ...cost.timing import total_rate
from ...mapspace import Mapspace, tables
from .grid import bytes_sent, bytes_written, link_energy, tile_grid
from .innermost import InnermostBound
from .latency import latency_bound
from .operand import SplitVectors
from .split_chain import SplitChain, split_chain
from .split_floor import SplitFloor, split_floor, split_vectors
from .spread import spread_bound

class TileBound(NamedTuple):
    """A link's bound as a function of the largest tile a node leaves level j: the minimum
    over the tiles no larger than it, per dim (every tile below a node's level-k tile is)."""
    index: tuple            # per dim, extent -> the last of its tile extents within it (`_position`)
    least: np.ndarray | None    # over the tile grid: the minimum over the box up to each point
    whole: float            # over every tile (also where `least` was too large to keep)

    def below(self, spans: np.ndarray) -> np.ndarray | float:
        """Per node, the bound over tiles within `spans` ((D, N) extents of the node's tile)."""
        if self.least is None:
            return self.whole
        return self.least[tuple(_position(index, span) for index, span in zip(self.index, spans))]

    @staticmethod
    def of(values: list[np.ndarray], least: np.ndarray | None, whole: float) -> "TileBound":
        """From each dim's tile extents (ascending): a lookup from any extent up to the largest
        to the position of the last extent within it (searched once, not per node), or, for a
        dim longer than MAX_DENSE_INDEX, its extents themselves, searched per node (a table
        as long as a dim of 62 million would take longer to build than any search's limit)."""
        index = tuple(("dense", np.maximum(np.searchsorted(v, np.arange(int(v[-1]) + 1), side="right") - 1, 0))
                      if int(v[-1]) < MAX_DENSE_INDEX else ("sorted", np.asarray(v)) for v in values)
        return TileBound(index, least, whole)


MAX_DENSE_INDEX = 1 << 16   # a dim's largest extent up to which `TileBound` keeps a dense lookup


def _position(index: tuple, span):
    """The position of the last tile extent within `span` (`TileBound.of`'s index of one dim)."""
    kind, table = index
    if kind == "dense":
        return table[np.minimum(span, len(table) - 1)]
    return np.maximum(np.searchsorted(table, span, side="right") - 1, 0)

NO_BOUND = TileBound((), None, 0.0)

MAX_BOUND_CELLS = 200_000   # tile vectors above which only the bound over all tiles is kept
MAX_BIN_CELLS = 4_000_000   # prefix-minimum cells kept over all of a link's busy-instance bins


class UnitsBound(NamedTuple):
    """A link's bound split by how many instances of its level a tile lets work at once: per
    bin, the most instances any tile in it keeps busy and the bound over those tiles
    (`TileBound`). A tile t of level j leaves at most prod_d(extent_d / t_d) instances of j
    anything to hold, so small tiles (much traffic) are what many busy units need: the
    compute time on few units and the traffic of many cannot both be had."""
    bins: tuple[tuple[int, TileBound], ...]

    @staticmethod
    def whole(bound: TileBound, instances: int) -> "UnitsBound":
        return UnitsBound(((instances, bound),))

    def below(self, spans: np.ndarray) -> np.ndarray | float:
        """Per node, the bound over every tile within `spans`, however many units it keeps busy."""
        return functools.reduce(np.minimum, (bound.below(spans) for _, bound in self.bins))

class LinkBounds:
    """Per level j >= 1, a lower bound on the energy of the traffic into it, valid whatever
    the rest of the mapping: the minimum, over every tile vector level j can hold (with only
    the tensors it must keep, at its fewest stages), of the fills into j and the matching
    parent reads (or, for the output, the drains into the parent), with every loop above j
    merged into one loop per dim in the best order (merging and reordering never add
    traffic) and the widest multicast the fanout allows. Kept per largest tile (`TileBound`),
    so that a node whose decided tile above is small is bounded by the tiles it still allows."""

    def __init__(self, space: Mapspace, max_combinations: int = 2_000_000, whole: "LinkBounds | None" = None,
                 give_up=None):
        """`give_up`: an optional callable, True once the search's wall-clock deadline has
        passed: the bounds not computed by then are trivial (0: valid, only weaker), so that
        building them on a large space does not carry the search past its time limit."""
        self.space, self.max_combinations = space, max_combinations
        self.give_up = give_up if whole is None else whole.give_up
        # a level's minimum depends on the keep and stage choices of it and the levels above:
        # memoised on what it reads of them (`_keeps_read`), shared by the parts of a space
        # (`for_space`)
        self._memo = {} if whole is None else whole._memo
        if whole is None:
            self.units = [self._units(space, lv, max_combinations) for lv in range(space.n_levels)]
            self.splits = SplitVectors(space)
            self.innermost = InnermostBound.of_space(space, self.splits, self.give_up)
        else:                   # none of these depends on keeps
            self.units, self.splits = whole.units, whole.splits
            self.innermost = whole.innermost.for_space(space)
        self.energy = [NO_BOUND] + [self._memoised(j, link_energy) for j in range(1, space.n_levels)]
        # the same energy as a function of how widely each tensor's transfers are shared,
        # for the operand bound to take under the split it charges (`spread.py`)
        self.by_spread = [bound for j in range(1, space.n_levels)
                          if (bound := self._memoised(j, spread_bound)) is not None]
        self.latency = [latency_bound(space, p) for p in range(space.n_levels)]
        # a level moves both what fills it and what it sends down: per level p, the bytes
        # written into it at least, and the links j it alone can feed (`_single_feeder`)
        self.own_bytes = [NO_BOUND] + [self._memoised(p, bytes_written) for p in range(1, space.n_levels)]
        # per level, the bytes its feeders move per word of each tensor it must keep
        self.sent_costs = [{}] + [{t: bytes_sent(space, j, t) for t in range(len(space.workload.tensors))
                                    if all(t in k for k in space.choices[j].keeps)} for j in range(1, space.n_levels)]
        # per stage count j may take: more stages, less capacity each, more traffic; the
        # same minimum over bytes drawn from the parent gives a bound on the parent's time
        self.sent_bytes = [[]] + [[(stages, self._memoised(j, bytes_sent, stages, by_units=True))
                                   for stages in sorted(set(space.choices[j].stages))]
                                  for j in range(1, space.n_levels)]
        self.single_feeder = [None] + [_single_feeder(space, j) for j in range(1, space.n_levels)]
        self.fed_by = [[j for j, feeder in enumerate(self.single_feeder) if feeder == p]
                       for p in range(space.n_levels)]

    def for_space(self, part: Mapspace) -> "LinkBounds":
        """The bounds of a part of this space (`Mapspace.part`), sharing what does not
        depend on keeps."""
        return LinkBounds(part, self.max_combinations, whole=self)

    def _keeps_read(self, j: int) -> tuple:
        """What level j's link bounds read of the keep and stage choices: the tensors j must
        keep, its stage counts, and for each of those tensors at every level above whether it
        must and whether it may keep it (where its parent may be). The parts of a space that
        agree on these share them (pe-array's 64 keep vectors: 27 for its registers' link)."""
        choices = self.space.choices
        must = tuple(t for t in range(len(self.space.workload.tensors)) if all(t in k for k in choices[j].keeps))
        above = tuple((all(t in k for k in choices[p].keeps), any(t in k for k in choices[p].keeps))
                      for t in must for p in range(j))
        return must, choices[j].stages, above

    def _memoised(self, j: int, weigh, stages: int | None = None, by_units: bool = False):
        key = (j, weigh.__name__, self._keeps_read(j), stages, by_units)
        if key not in self._memo and self.give_up is not None and self.give_up():
            if weigh is spread_bound:
                return None
            return UnitsBound.whole(NO_BOUND, self.space.arch.levels[j].instances) if by_units else NO_BOUND
        if key not in self._memo:
            self._memo[key] = (weigh(self.space, j, self.splits, self.max_combinations) if weigh is spread_bound else
                               self._level(self.space, j, self.max_combinations, weigh, stages, by_units,
                                           self._split_floor(j) if by_units else None))
        return self._memo[key]

    def _split_floor(self, j: int) -> SplitFloor | None:
        """Level j's bytes per count of busy instances (`split_floor.py`): the same at every
        stage count, so computed once per keep choice of j and the levels above (its splits
        once for the whole space)."""
        key = (j, "split floor", self._keeps_read(j))
        if key not in self._memo and self.give_up is not None and self.give_up():
            return None
        if key not in self._memo:
            if (j, "split vectors") not in self._memo:
                self._memo[j, "split vectors"] = split_vectors(self.space, j)
            self._memo[key] = split_floor(self.space, j, self.sent_costs[j], self._memo[j, "split vectors"])
        return self._memo[key]

    def chain(self, macs: float) -> SplitChain | None:
        """The bound over every fanout's split at once (`split_chain.py`), built on first use."""
        key = ("chain", tuple(self.space.choices))
        if key not in self._memo:
            self._memo[key] = split_chain(self.space, self, macs)
        return self._memo[key]

    def time_bound(self, j: int, spans: np.ndarray, compute_on) -> np.ndarray:
        """Per node, a bound on the time of the levels feeding level j: the fewest bytes they
        must move into it (within the node's tile `spans`) over their largest rate, at each
        stage count j may take and each count of j's instances its tiles keep busy, the least
        over those. `compute_on(j, busy)` is the node's compute time on the units below
        `busy` instances of j: few busy instances (large tiles, little traffic) leave the MACs
        on few units. Under the stage-aware rule one stage leaves the traffic exposed (the
        parent's reads for an unbuffered child, its fills, its drains): it adds to the compute
        time, while more stages hide it but leave each stage a fraction of the capacity, so a
        smaller tile and more traffic (the double-buffering trade of the seed notes)."""
        rate = _parent_rate(self.space, j)
        timeloop = self.space.arch.cycle_rule == "timeloop"    # all traffic overlaps: the most capacity is best
        bounds = []
        for stages, sent in self.sent_bytes[j][:1] if timeloop else self.sent_bytes[j]:
            for busy, bound in sent.bins:
                moved, compute = bound.below(spans) / rate, compute_on(j, busy)
                bounds.append(compute + moved if stages == 1 and not timeloop else np.maximum(compute, moved))
        return functools.reduce(np.minimum, bounds)

    @staticmethod
    def _units(space: Mapspace, lv: int, max_combinations: int) -> int:
        """The most instances level lv's spatial split can reach with the factors the per-dim
        tables allow (at most its fanout)."""
        out = 1
        for kind, limit in zip((1, 2), space.arch.fanout(lv)):
            values = []
            for rows in space.dim_tables:
                cols = [k for k, slot in enumerate(space.slots) if slot == (lv, kind)]
                values.append(np.unique(rows[:, cols[0]]) if cols else np.array([1]))
            if math.prod(len(v) for v in values) > max_combinations:
                out *= limit
                continue
            products = np.prod(np.stack([g.ravel() for g in np.meshgrid(*values, indexing="ij")]), axis=0)
            out *= int(products[products <= limit].max())
        return out

    @staticmethod
    def _level(space: Mapspace, j: int, max_combinations: int, weigh, stages: int | None = None,
               by_units: bool = False, splits: SplitFloor | None = None) -> TileBound | UnitsBound:
        grid = tile_grid(space, j, max_combinations, stages)
        if grid is None:
            return UnitsBound.whole(NO_BOUND, space.arch.levels[j].instances) if by_units else NO_BOUND
        cost = {t: weigh(space, j, t) for t in grid.must}
        best = np.full(grid.grid.shape[1], np.inf)
        for terms in grid.ways:
            best = np.minimum(best, sum(cost[t].total(base, repeats) for t, (base, repeats) in zip(grid.must, terms)))
        best = np.where(grid.fits, best, np.inf)
        if not by_units:
            return _tile_bound(grid.values, best)
        weight = {t: c.per_word() for t, c in cost.items()}
        return _units_bound(space, j, grid.values, grid.grid, best,
                            _copies_floor(space, grid.grid, grid.must, weight, grid.touched, grid.tile), splits)

def _tile_bound(values: list[np.ndarray], best: np.ndarray) -> TileBound:
    """The bound per largest tile from its value at each point of the tile grid (`best`)."""
    whole = float(best.min())
    if len(best) > MAX_BOUND_CELLS:
        return TileBound((), None, whole)
    # the minimum over each box of tiles no larger than a grid point, dim by dim
    least = best.reshape([len(v) for v in values])
    for axis in range(len(values)):
        least = np.minimum.accumulate(least, axis=axis)
    return TileBound.of(values, least, whole)

def _copies_floor(space: Mapspace, grid: np.ndarray, must: list[int], weight: dict, touched: dict, tile: dict):
    """Per tile of level j, the traffic into j of every mapping keeping `busy` instances of j
    at work, as a function of `busy`. The busy instances are a grid of spatial factors s_d,
    each at most the tiles along d. For a tensor t, the instances that differ only in dims
    not indexing t need the same words, and together with those differing in its own dims
    they touch all of it: every touched word goes to at least prod(s_d, d not in t) >= busy
    / (t's tiles along its own dims) of them; and each instance fills (or drains) its tile at
    least once. A parent's access serves at most the children its network shares it with
    (in `weight`). (The merged loops reuse a tile across every loop, spatial ones included.)"""
    workload = space.workload
    extents = _largest_extents(space)
    along = {t: np.prod(extents[sorted(workload.tensors[t].dims), None] // grid[sorted(workload.tensors[t].dims)],
                        axis=0) for t in must}
    return lambda busy: sum(weight[t] * np.maximum(touched[t] * np.maximum(busy / along[t], 1.0), busy * tile[t])
                            for t in must)

def _largest_extents(space: Mapspace) -> np.ndarray:
    """(D,) each dim's largest extent in the space (its size, or its largest padded extent)."""
    return np.array([int(tables.level_view(space, rows)[2][:, 0].max()) for rows in space.dim_tables])

def _units_bound(space: Mapspace, j: int, values: list[np.ndarray], grid: np.ndarray,
                 best: np.ndarray, copies_floor, splits: SplitFloor | None) -> UnitsBound:
    """`best` split by the instances of level j at work: a tile lets at most its tiles over
    the largest extent of each dim be busy (the spatial factors above j multiply to no
    more), and j's instances. A bin of counts (low, high] holds the tiles that can keep
    more than `low` busy, each at the least traffic of `low` + 1 busy (`copies_floor`, and
    over the tensors together `splits`, `split_floor.py`) where more than its own; it is
    charged the compute of `high` busy. Bins are the distinct
    counts, merged geometrically when their tables would take more than `MAX_BIN_CELLS`
    cells."""
    instances = space.arch.levels[j].instances
    busy = np.minimum(np.prod(_largest_extents(space)[:, None] // grid, axis=0), instances)
    counts = np.unique(busy[np.isfinite(best)])
    most_bins = max(1, MAX_BIN_CELLS // len(best))
    if len(counts) > most_bins:             # geometric edges between 1 and the instances
        ratio = instances ** (1 / most_bins)
        edges = np.unique(np.minimum(np.ceil(ratio ** np.arange(1, most_bins + 1)), instances).astype(np.int64))
        counts = np.unique(edges[np.searchsorted(edges, counts)])
    bins, low = [], 0
    for high in counts:
        least = np.maximum(best, copies_floor(low + 1))
        if splits is not None:
            floor = splits.at_least(low + 1)
            if math.isinf(floor):           # no split keeps this many at work: no mapping is here
                break
            least = np.maximum(least, floor)
        bins.append((int(high), _tile_bound(values, np.where(busy > low, least, np.inf))))
        low = high
    return UnitsBound(tuple(bins)) if bins else UnitsBound.whole(NO_BOUND, instances)

def _parent_rate(space: Mapspace, j: int) -> float:
    """The most bytes per cycle the levels that may feed level j can move together, all
    instances (reads and writes together: valid under either cycle rule). Together: the
    tensors j must keep may come from different parents at once, each parent's time bounding
    only its share, so the traffic T takes at least T / the sum of their rates."""
    return sum(total_rate(space.arch.levels[p]) * space.arch.levels[p].instances
               for p in _feeders(space, j)) or np.inf

def _feeders(space: Mapspace, j: int) -> set[int]:
    """The levels that may send level j a tensor it must keep: for each, the nearest level
    above that must keep it and any between that may."""
    feeders = set()
    for t in range(len(space.workload.tensors)):
        if all(t in keep for keep in space.choices[j].keeps):
            nearest = max(p for p in range(j) if all(t in keep for keep in space.choices[p].keeps))
            feeders |= {p for p in range(nearest, j) if any(t in keep for keep in space.choices[p].keeps)}
    return feeders

def _single_feeder(space: Mapspace, j: int) -> int | None:
    """The one level that can send level j everything j must keep, when there is only one
    (no level between it and j may keep any of it); None when j must keep nothing."""
    feeders = _feeders(space, j)
    return feeders.pop() if len(feeders) == 1 else None
