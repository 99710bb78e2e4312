"""Lower bounds on the objective of every mapping below a tree node (see `tree.py`).

A node at depth j has decided every level above j, and level j's tile, stages and keeps. Its
completion (the node's table) is priced by the cost model; from that pricing the bound keeps
only what no deeper decision can change:
- fills of levels <= j, and reads/updates of levels < j whose consumer is a decided level;
- the times of those levels with that known traffic (compute time bounded below by the most
  compute units the remaining fanout could reach).
What is still open is bounded below by what every completion must pay: the compute units' one
operand read (or output update and read-modify-write) per MAC at the innermost level keeping
each tensor, divided by the largest multicast the fanout below it allows; for each undecided
level, the cheapest traffic into it over every tile that fits it (`LinkBounds`), or where
larger, the words the node's own loops must refetch into it (`refetched_links`); MAC energy;
leakage over the bounded cycles. A second bound on the same open traffic enumerates the
innermost level's keep sets, tiles and splits (`innermost_floor.py`), plus the link floors of
the levels between; the larger one is used. Under an incumbent (`refine_below`) that second
bound is refined, for the nodes it does not beat yet, with the words the node's own loops
bring down again and again. Each level's time is also bounded by everything it
must move together: its own fills at least and, where it alone can feed an undecided level,
that level's link floor (`_moved_floor`).
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple

import numpy as np

from .. import tiles
from ..cost import Costs
from ..mapping import MappingTable
from ..mapspace import Mapspace
from .objective import SLACK, TIE, Objective, beaten, cost_bound
from .innermost_floor import InnermostFloor
from .operand_floor import SplitVectors, fill_energy, operand_floor, read_energy, serve_energy
from ..cost.occupancy import gpu_levels
from ..cost.timing import level_time, total_rate


def _action_energy(level, count, word_bytes, per_access, per_byte):
    blocks = count if level.block_size == 1 else -(-count // level.block_size)
    return blocks * per_access + count * (word_bytes * per_byte)


class TileFloor(NamedTuple):
    """A link's floor as a function of the largest tile a node leaves level j: the minimum
    over the tiles no larger than it, per dim (every tile below a node's level-k tile is)."""
    index: tuple            # per dim, extent -> the last of its tile extents within it
    least: np.ndarray | None    # over the tile grid: the minimum over the box up to each point
    whole: float            # over every tile (also where `least` was too large to keep)

    def below(self, spans: np.ndarray) -> np.ndarray | float:
        """Per node, the floor over tiles within `spans` ((D, N) extents of the node's tile)."""
        if self.least is None:
            return self.whole
        return self.least[tuple(index[np.minimum(span, len(index) - 1)]
                                for index, span in zip(self.index, spans))]

    @staticmethod
    def of(values: list[np.ndarray], least: np.ndarray | None, whole: float) -> "TileFloor":
        """From each dim's tile extents (ascending): a lookup from any extent up to the largest
        to the position of the last extent within it (searched once, not per node)."""
        index = tuple(np.maximum(np.searchsorted(v, np.arange(int(v[-1]) + 1), side="right") - 1, 0)
                      for v in values)
        return TileFloor(index, least, whole)


NO_FLOOR = TileFloor((), None, 0.0)
MAX_FLOOR_CELLS = 200_000   # tile vectors above which only the floor over all tiles is kept


class LinkBounds:
    """Per level j >= 1, a lower bound on the energy of the traffic into it, valid whatever
    the rest of the mapping: the minimum, over every tile vector level j can hold (with only
    the tensors it must keep, at its fewest stages), of the fills into j and the matching
    parent reads (or, for the output, the drains into the parent), with every loop above j
    merged into one loop per dim in the best order (merging and reordering never add
    traffic) and the widest multicast the fanout allows. Kept per largest tile (`TileFloor`),
    so that a node whose decided tile above is small is bounded by the tiles it still allows."""

    def __init__(self, space: Mapspace, max_combinations: int = 2_000_000, whole: "LinkBounds | None" = None):
        self.space, self.max_combinations = space, max_combinations
        # a level's minimum depends on the keep and stage choices of it and the levels above:
        # memoised on them, shared by the parts of a space (`for_space`)
        self._memo = {} if whole is None else whole._memo
        if whole is None:
            self.units = [self._units(space, lv, max_combinations) for lv in range(space.n_levels)]
            self.splits = SplitVectors(space)
            self.innermost = InnermostFloor(space, self.splits)
        else:                   # none of these depends on keeps
            self.units, self.splits = whole.units, whole.splits
            self.innermost = whole.innermost.for_space(space)
        self.energy = [NO_FLOOR] + [self._memoised(j, link_weight) for j in range(1, space.n_levels)]
        self.latency = [latency_floor(space, p) for p in range(space.n_levels)]
        # a level moves both what fills it and what it sends down: per level p, the bytes
        # written into it at least, and the links j it alone can feed (`_single_feeder`)
        self.own_bytes = [NO_FLOOR] + [self._memoised(p, _own_bytes) for p in range(1, space.n_levels)]
        # per stage count j may take: more stages, less capacity each, more traffic; the
        # same minimum over bytes drawn from the parent gives a floor on the parent's time
        self.sent_bytes = [[]] + [[(stages, self._memoised(j, _link_bytes, stages))
                                   for stages in sorted(set(space.choices[j].stages))]
                                  for j in range(1, space.n_levels)]
        self.single_feeder = [None] + [_single_feeder(space, j) for j in range(1, space.n_levels)]
        self.fed_by = [[j for j, feeder in enumerate(self.single_feeder) if feeder == p]
                       for p in range(space.n_levels)]

    def for_space(self, part: Mapspace) -> "LinkBounds":
        """The bounds of a part of this space (`Mapspace.with_keeps`), sharing what does not
        depend on keeps."""
        return LinkBounds(part, self.max_combinations, whole=self)

    def _memoised(self, j: int, weigh, stages: int | None = None) -> float:
        key = (j, weigh.__name__, tuple(self.space.choices[:j + 1]), stages)
        if key not in self._memo:
            self._memo[key] = self._level(self.space, j, self.max_combinations, weigh, stages)
        return self._memo[key]

    def time_floor(self, j: int, spans: np.ndarray, compute: np.ndarray) -> np.ndarray:
        """Per node, a floor on the time of the levels feeding level j: the fewest bytes they
        must move into it (within the node's tile `spans`) over their largest rate, at each
        stage count j may take, the least over those. Under the stage-aware rule one stage
        leaves that traffic exposed (the parent's reads for an unbuffered child, its fills, its
        drains): it adds to the node's `compute` floor, while more stages hide it but leave
        each stage a fraction of the capacity, so a smaller tile and more traffic (the
        double-buffering trade of the seed notes)."""
        rate = _parent_rate(self.space, j)
        if self.space.arch.cycle_rule == "timeloop":    # all traffic overlaps: the most capacity is best
            return self.sent_bytes[j][0][1].below(spans) / rate
        floors = []
        for stages, sent in self.sent_bytes[j]:
            moved = sent.below(spans) / rate
            floors.append(compute + moved if stages == 1 else moved)
        return functools.reduce(np.minimum, floors)

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
    def _level(space: Mapspace, j: int, max_combinations: int, weigh, stages: int | None = None) -> TileFloor:
        arch, workload = space.arch, space.workload
        must = [t for t in range(len(workload.tensors)) if all(t in k for k in space.choices[j].keeps)]
        if not must:
            return NO_FLOOR
        values = [np.unique(space.level_view(rows)[2][:, j]) for rows in space.dim_tables]
        if math.prod(len(v) for v in values) > max_combinations:
            return NO_FLOOR
        grid = np.stack([g.ravel() for g in np.meshgrid(*values, indexing="ij")])        # (D, M)
        trips = np.array(workload.sizes, float)[:, None] / grid                          # Q_d
        tile = {t: tiles.words(workload.tensors[t], grid) for t in must}
        footprint = sum(tile[t] * arch.levels[j].word_bytes(workload.tensors[t]) for t in must)
        fits = footprint * (stages or min(space.choices[j].stages)) <= arch.levels[j].capacity
        if not fits.any():
            return NO_FLOOR
        weight = {t: weigh(space, j, t) for t in must}
        n_dims = len(workload.dims)
        orders = itertools.permutations(range(n_dims)) if n_dims <= 5 else [None]
        best = np.full(grid.shape[1], np.inf)
        # a sliding window (p+r) fetches only the new slice as it moves, which the merged
        # loops below do not see: the tile-by-tile count could exceed a mapping's traffic
        # (conv1d, p and r of 2, under a level-1 tile of p = 1: 4 words against 3), so such a tensor
        # is charged its words once, which every mapping fills into j at least
        sliding = sum(weight[t] * workload.tensor_words(t) for t in must if workload.tensors[t].has_sliding_axis)
        for order in orders:
            total = sliding
            for t in must:
                if workload.tensors[t].has_sliding_axis:
                    continue
                dims = workload.tensors[t].dims
                if order is None:           # too many orders: each tensor at its best alone
                    outer = dims
                else:
                    last = max(i for i, d in enumerate(order) if d in dims)
                    outer = order[:last + 1]
                total = total + weight[t] * tile[t] * np.prod([np.maximum(trips[d], 1.0) for d in outer], axis=0)
            best = np.minimum(best, total)
        best = np.where(fits, best, np.inf)
        whole = float(best.min())
        if len(best) > MAX_FLOOR_CELLS:
            return TileFloor((), None, whole)
        # the minimum over each box of tiles no larger than a grid point, dim by dim
        least = best.reshape([len(v) for v in values])
        for axis in range(n_dims):
            least = np.minimum.accumulate(least, axis=axis)
        return TileFloor.of(values, least, whole)


def latency_floor(space: Mapspace, p: int) -> float:
    """Cycles of level p's latency that no mapping hides (docs/COST_MODEL.md, "Latency"): where
    p must keep an input and some level below must keep it too, p serves it to its next keeper
    below, c. A buffered c still waits once per wave of blocks (at least L); an unbuffered one
    waits L per request, shared with the blocks resident beside it (at least L / the most
    blocks an SM holds at once, at and below the per-SM level; one above it). Both add to
    the compute time in p's time, so every mapping takes at least compute + this."""
    arch, workload = space.arch, space.workload
    latency = arch.levels[p].latency
    if not latency:
        return 0.0
    floor = 0.0
    for t, tensor in enumerate(workload.tensors):
        if tensor.is_output or not all(t in keep for keep in space.choices[p].keeps):
            continue        # only partial sums read back wait, and a mapping may read none
        below = [c for c in range(p + 1, space.n_levels) if any(t in keep for keep in space.choices[c].keeps)]
        must = [c for c in below if all(t in keep for keep in space.choices[c].keeps)]
        if must:
            floor = max(floor, latency * min(1 / _most_resident(arch, c) for c in below if c <= must[0]))
    return floor


def decided_latency_floor(space: Mapspace, depth: int, table: MappingTable, static: list[float]) -> np.ndarray:
    """(L, N) each level's latency floor per node: `latency_floor` (`static`), or more where the
    node has decided both a level p keeping an input and that input's next keeper below, c,
    with c's stage count: a buffered c waits L once per wave at least, an unbuffered one L
    per request shared by at most the blocks resident beside it (the same rules, with c
    known). h100 conv3: at depth 2 the L2's wait rises from L / 32 to L = 200 cycles."""
    arch, workload = space.arch, space.workload
    n = len(table)
    out = np.repeat(np.asarray(static, float)[:, None], n, axis=1)
    if not any(level.latency for level in arch.levels[:depth]):
        return out
    for p, level in enumerate(arch.levels[:depth]):
        if not level.latency:
            continue
        for t, tensor in enumerate(workload.tensors):
            if tensor.is_output:        # only partial sums read back wait, and a mapping may read none
                continue
            found, wait = np.zeros(n, bool), np.zeros(n)
            for c in range(p + 1, min(depth, space.n_levels - 1) + 1):
                here = ~found & table.keep[c, t]
                unbuffered = level.latency / _most_resident(arch, c)
                wait = np.where(here, np.where(table.stages[c] > 1, level.latency, unbuffered), wait)
                found |= here
            out[p] = np.maximum(out[p], np.where(table.keep[p, t], wait, 0.0))
    return out


def _most_resident(arch, c: int) -> int:
    """The most thread blocks resident beside each other at level c (one above the per-SM level)."""
    gpu = gpu_levels(arch)
    return arch.gpu.max_blocks_per_sm if gpu is not None and c >= gpu[0] else 1


def _sharing_fanout(arch, tensor, first: int, stop: int) -> int:
    """The most children one transfer of `tensor` can serve across the fanouts of levels
    first..stop-1 (only the networks that multicast, or reduce, share)."""
    return math.prod(arch.fanout(x)[0] * arch.fanout(x)[1] for x in range(first, stop)
                     if arch.levels[x].shares(tensor))


def _link_bytes(space: Mapspace, j: int, t: int) -> float:
    """Bytes the parent moves per word fetched into (or drained from) level j, at best."""
    tensor = space.workload.tensors[t]
    nearest_must = max(p for p in range(j) if all(t in k for k in space.choices[p].keeps))
    spread = max(_sharing_fanout(space.arch, tensor, p, j) for p in range(nearest_must, j))
    # the parent may be any level from nearest_must on: its narrowest word keeps this a bound
    word = min(space.arch.levels[p].word_bytes(tensor) for p in range(nearest_must, j))
    return word / spread


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


def link_weight(space: Mapspace, j: int, t: int) -> float:
    """Energy per word fetched into level j (fill at j plus the cheapest parent read, divided
    by the widest multicast), or per word drained from j for the output."""
    arch, tensor = space.arch, space.workload.tensors[t]
    level = arch.levels[j]
    own = 0.0 if tensor.is_output else fill_energy(level, tensor)
    parent = np.inf
    nearest_must = max(p for p in range(j) if all(t in k for k in space.choices[p].keeps))
    for p in range(nearest_must, j):      # the parent is at or below the nearest level that must keep t
        if not any(t in k for k in space.choices[p].keeps):
            continue
        lp = arch.levels[p]
        spread = _sharing_fanout(arch, tensor, p, j)
        wb = lp.word_bytes(tensor)
        per_word = (lp.energy_update / lp.block_size + wb * lp.byte_energy_update if tensor.is_output
                    else lp.energy_read / lp.block_size + wb * lp.byte_energy_read)
        parent = min(parent, per_word / spread)
    return own + (0.0 if np.isinf(parent) else parent)


class NodeBounds(NamedTuple):
    """Lower bounds on every completion of each node: on the objective (a pair for a
    lexicographic one), and on the energy and the cycles, the next two ranking keys."""
    objective: np.ndarray
    energy: np.ndarray
    cycles: np.ndarray


def compute_floor(space: Mapspace, depth: int, decided_units: np.ndarray,
                  links: LinkBounds | None = None) -> np.ndarray:
    """The fewest cycles the MACs take on the compute units a node reaches: its decided
    spatial splits (`decided_units`, their product over the decided levels) times every
    fanout still open below depth `depth`."""
    arch = space.arch
    reach = (math.prod(links.units[depth:]) if links is not None
             else math.prod(arch.fanout(lv)[0] * arch.fanout(lv)[1] for lv in range(depth, space.n_levels)))
    units = np.minimum(decided_units * reach, arch.compute.instances)
    return np.ceil(space.workload.macs / (units * arch.compute.macs_per_cycle))


def lower_bound(space: Mapspace, objective: Objective, depth: int, table: MappingTable,
                costs: Costs, links: LinkBounds | None = None) -> np.ndarray:
    """The objective's lower bound on every completion of each node (`lower_bounds`)."""
    return lower_bounds(space, objective, depth, table, costs, links).objective


def lower_bounds(space: Mapspace, objective: Objective, depth: int, table: MappingTable,
                 costs: Costs, links: LinkBounds | None = None, refine_below: tuple | None = None) -> NodeBounds:
    arch, workload = space.arch, space.workload
    n_levels, n = len(arch.levels), len(table)
    tensors = workload.tensors
    macs = workload.macs

    decided_units = np.ones(n, np.int64)
    for lv in range(min(depth, n_levels)):
        decided_units = decided_units * table.factors[lv, 1:].prod(axis=(0, 1))
    compute = compute_floor(space, depth, decided_units, links)

    energy = np.full(n, float(macs) * arch.compute.energy_per_mac)
    # bytes per instance no completion can avoid, by direction (reads; fills and updates), and
    # of those the ones no buffering hides: adding traffic never shortens a level's time
    known_read, known_write = np.zeros((n_levels, n)), np.zeros((n_levels, n))
    exposed_read, exposed_write = np.zeros((n_levels, n)), np.zeros((n_levels, n))
    for t, tensor in enumerate(tensors):
        child = np.full(n, -1)                  # nearest decided level below that keeps t
        for lv in range(min(depth, n_levels - 1), -1, -1):
            level = arch.levels[lv]
            wb = level.word_bytes(tensor)
            kept = table.keep[lv, t]
            inst = costs.level_instances[lv]
            fills = costs.level_fills[lv, t]
            e = _action_energy(level, fills, wb, level.energy_write, level.byte_energy_write)
            energy += np.where(kept, e * inst, 0)
            known_write[lv] += np.where(kept, fills * wb, 0)
            exposed_write[lv] += np.where(kept & (table.stages[lv] == 1), fills * wb, 0)
            if lv < depth:
                passing_known = kept & (child >= 0)
                reads, updates = costs.level_reads[lv, t], costs.level_updates[lv, t]
                e = (_action_energy(level, reads, wb, level.energy_read, level.byte_energy_read)
                     + _action_energy(level, updates, wb, level.energy_update, level.byte_energy_update))
                energy += np.where(passing_known, e * inst, 0)
                child_stages = np.take_along_axis(table.stages, np.maximum(child, 0)[None], axis=0)[0]
                waits = passing_known & (child_stages == 1)
                known_read[lv] += np.where(passing_known, reads * wb, 0)
                known_write[lv] += np.where(passing_known, updates * wb, 0)
                exposed_read[lv] += np.where(waits, reads * wb, 0)
                exposed_write[lv] += np.where(waits, updates * wb, 0)
            child = np.where(kept, lv, child)
    decided = energy.copy()             # MACs and the traffic the decided levels fix
    # what the innermost keepers serve the compute units (the output's read-modify-write
    # included), over the splits still open
    options = [serving_options(space, t, depth, table) for t in range(len(tensors))]
    floor = operand_floor(space, depth, table, options, links.splits) if links is not None else None
    if floor is None:
        floor = sum(independent_floor(space, t, options[t]) for t in range(len(tensors)))
        floor = floor + sum(read_modify_write(space, t, depth, table, links)
                            for t, tensor in enumerate(tensors) if tensor.is_output)
    energy += floor
    if links is not None:
        # the node's tile at level `depth` bounds every tile below it (`TileFloor.below`)
        spans = table.factors[min(depth, n_levels - 1):].prod(axis=(0, 1))
        refetched = refetched_links(space, depth, table)
        link_energy = [np.maximum(links.energy[j].below(spans), refetched.energy[j]) if j > depth else 0.0
                       for j in range(n_levels)]
        energy += sum(link_energy[depth + 1:], np.zeros(n))
        # the parents' side of the same traffic: bytes they must move, per instance
        instances = np.array([lv.instances for lv in arch.levels])[:, None]
        known_read += refetched.reads / instances
        known_write += refetched.writes / instances
        # another bound on the same open traffic, from the innermost level's choices (keep
        # sets, tiles that fit, splits): the larger of two valid bounds is one. It charges
        # the innermost level's fills and what it serves, read at or below the deepest level
        # that must keep each tensor: the traffic into the undecided levels between (their
        # fills, their parents' reads) is other accesses, bounded by their own link floors
        deepest = [_deepest_keeper(space, t, depth, table) for t in range(len(tensors))]
        innermost = links.innermost.floor(depth, deepest)
        if innermost is not None:
            between = sum(link_energy[depth + 1:n_levels - 1], np.zeros(n))
            energy = np.maximum(energy, decided + innermost + between)

    latency = (decided_latency_floor(space, depth, table, links.latency) if links is not None
               else np.zeros(n_levels))
    cycles = compute
    for lv, level in enumerate(arch.levels):
        cycles = np.maximum(cycles, level_time(level, arch.cycle_rule, compute, known_read[lv], known_write[lv],
                                               exposed_read[lv], exposed_write[lv],
                                               latency_exposed=latency[lv]))
    if links is not None:
        # a link with one feeder is bounded in `_moved_floor`, on top of the feeder's other bytes
        for j in range(depth + 1, n_levels):
            if links.single_feeder[j] is None:
                cycles = np.maximum(cycles, links.time_floor(j, spans, compute))
        cycles = np.maximum(cycles, _moved_floor(space, depth, links, refetched, compute, spans,
                                                 (known_read + known_write) * instances))
    # with "utilized" (Timeloop's rule) idle instances do not leak: no term
    leak = sum(lv.leak * lv.instances for lv in arch.levels) if arch.leakage == "all" else 0.0
    energy = energy + leak * cycles
    if objective.kind == "bytes":
        bound = (known_read + known_write)[objective.level] * costs.level_instances[objective.level]
        return NodeBounds(bound, energy, cycles)
    bound = cost_bound(objective, energy, cycles)
    if refine_below is not None and links is not None and innermost is not None:
        # the innermost floor again, with the words the node's own loops must bring down
        # again and again, for the nodes still open under the incumbent (`refine_below`, its
        # ranking key): on `pe-array` GEMM 1024^3 (bypass) it lifts the depth-1 nodes of the
        # part whose buffer keeps only Z from 2.58 pJ/MAC to above the optimum's 2.697, where
        # their 2M leaves were most of the walk; computed for every node, it took seconds
        cap = _energy_cap(objective, refine_below, cycles) - leak * cycles - decided - between
        rows = np.flatnonzero(~beaten(objective, bound, refine_below) & np.isfinite(cap))
        if len(rows):                   # of those, where some tensor comes down more than once
            open_nodes = table.take(rows)
            repeats = [_refetches(space, t, depth, open_nodes) for t in range(len(tensors))]
            more = (np.stack(repeats) > 1).any(axis=0)
            rows, repeats = rows[more], [r[more] for r in repeats]
        if len(rows):
            refined = links.innermost.refined(depth, [d[rows] for d in deepest], repeats, cap[rows])
            energy[rows] = np.maximum(energy[rows], decided[rows] + refined + between[rows] + leak * cycles[rows])
            bound = cost_bound(objective, energy, cycles)
    return NodeBounds(bound, energy, cycles)


def _energy_cap(objective: Objective, key: tuple, cycles: np.ndarray) -> np.ndarray:
    """(N,) the most energy a node with these cycles bounds may be bounded by without being
    beaten by the incumbent whose ranking key is `key`; NaN where no energy bound beats it
    (delay,energy: cycles below the incumbent's)."""
    if objective.kind == "energy":
        return np.full(len(cycles), key[0] * (1 + SLACK))
    if objective.kind == "edp":
        return key[0] * (1 + SLACK) / np.maximum(cycles, 1e-300)
    if objective.lexicographic:
        return np.where(cycles >= key[0] * (1 - TIE), key[1] * (1 + SLACK), np.nan)
    return np.full(len(cycles), np.nan)         # cycles: no energy in it


def _moved_floor(space: Mapspace, depth: int, links: LinkBounds, refetched: "Refetched",
                 compute: np.ndarray, spans: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Cycles each level needs at least for everything it moves, reads and writes together
    (`known`, (L, N): the bytes the decided levels fix, over all its instances). An undecided
    level is also filled with at least its cheapest input traffic (`LinkBounds.own_bytes`),
    and a level that alone can feed an undecided link j sends down at least j's floor (or the
    node's refetches into j where more, already in `known`). The link floors bound each link
    alone; a level that both fills from above and feeds below (h100's L2) pays for both. As
    in `LinkBounds.time_floor`, j with one stage exposes what it draws, on top of compute;
    every floor is over the tiles within the node's (`spans`)."""
    floor = 0.0
    stage_aware = space.arch.cycle_rule != "timeloop"
    for p, level in enumerate(space.arch.levels):
        rate = total_rate(level) * level.instances
        if math.isinf(rate):
            continue
        base = known[p] + (links.own_bytes[p].below(spans) if p > depth else 0.0)
        every_link = base
        for j in links.fed_by[p]:
            if j <= depth:
                continue
            refetch = refetched.by_link[j]
            extra = [np.maximum(floor_j.below(spans) - refetch, 0.0) for _, floor_j in links.sent_bytes[j]]
            options = []
            for (stages, _), more in zip(links.sent_bytes[j], extra):
                time = (base + more) / rate
                if stages == 1 and stage_aware:
                    time = np.maximum(time, compute + (refetch + more) / rate)
                options.append(time)
            floor = np.maximum(floor, functools.reduce(np.minimum, options))
            every_link = every_link + extra[0]      # the fewest stages: the most capacity
        floor = np.maximum(floor, every_link / rate)
    return floor


def _single_feeder(space: Mapspace, j: int) -> int | None:
    """The one level that can send level j everything j must keep, when there is only one
    (no level between it and j may keep any of it); None when j must keep nothing."""
    feeders = _feeders(space, j)
    return feeders.pop() if len(feeders) == 1 else None


def _own_bytes(space: Mapspace, j: int, t: int) -> float:
    """Bytes level j itself writes per word of an input filled into it (the output's drains
    are its parent's updates, counted there: none here)."""
    tensor = space.workload.tensors[t]
    return 0.0 if tensor.is_output else space.arch.levels[j].word_bytes(tensor)


class Refetched(NamedTuple):
    energy: np.ndarray      # (L, N) by the level filled (or drained)
    reads: np.ndarray       # (L, N) bytes, by the parent that sends them
    writes: np.ndarray      # (L, N) bytes, by the parent that takes them back (the output's)
    by_link: np.ndarray     # (L, N) the same bytes (reads and writes), by the level filled


def refetched_links(space: Mapspace, depth: int, table: MappingTable) -> Refetched:
    """Per undecided level j, a lower bound on the traffic into it that depends on the node:
    for each tensor whose first possible keeper below the node is j and which j must keep,
    every word of it is filled into j, and read from (for the output: drained to) the deepest
    decided keeper, once per iteration of the decided loops over dims it does not index
    (`_refetches`: unless some level below could hold the node's whole tile of it).
    Multicast shares a read among units needing the same word at once, never among
    different words or iterations, so it divides none of this. `LinkBounds` bounds the same
    energy over every tile but with none of the node's loops; the larger of the two holds."""
    arch, workload = space.arch, space.workload
    n = len(table)
    out = Refetched(*(np.zeros((space.n_levels, n)) for _ in range(4)))
    for t, tensor in enumerate(workload.tensors):
        below = [lv for lv in range(depth + 1, space.n_levels) if any(t in k for k in space.choices[lv].keeps)]
        if not below or not all(t in k for k in space.choices[below[0]].keeps):
            continue
        j, level = below[0], arch.levels[below[0]]
        parent = _deepest_keeper(space, t, depth, table)
        serve = np.array([serve_energy(lv, tensor) for lv in arch.levels])[parent]
        own = 0.0 if tensor.is_output else fill_energy(level, tensor)
        words = workload.tensor_words(t) * _refetches(space, t, depth, table)
        out.energy[j] += words * (serve + own)
        moved = out.writes if tensor.is_output else out.reads
        word_bytes = np.array([lv.word_bytes(tensor) for lv in arch.levels])[parent]
        np.add.at(moved, (parent, np.arange(n)), words * word_bytes)
        out.by_link[j] += words * word_bytes
    return out


class ServingOption(NamedTuple):
    level: int                 # a level that may be the innermost keeper
    candidate: np.ndarray      # per node: it may be, in some completion
    at_deepest: np.ndarray     # per node: it is the deepest decided keeper
    compulsory: np.ndarray     # per node: energy of serving every word once from that keeper
    fill: float                # energy per word filled into it (0 where not charged here)
    deepest: np.ndarray        # per node: the deepest decided keeper


def serving_options(space: Mapspace, t: int, depth: int, table: MappingTable) -> list:
    """Per level that may be the innermost keeper of tensor t in some completion of the nodes:
    (level, candidate mask, at-deepest-decided-keeper mask, compulsory energy). The deepest
    decided keeper serves every word of t at least once: that compulsory energy comes on top of
    a deeper keeper's per-MAC traffic, or as a floor under its own."""
    arch, workload = space.arch, space.workload
    tensor = workload.tensors[t]
    n_levels, n = len(arch.levels), len(table)
    may_keep, deepest, deeper_must = _keepers(space, t, depth, table)
    compulsory = np.zeros(n)
    words = workload.tensor_words(t) * (1 if tensor.is_output or deeper_must else _refetches(space, t, depth, table))
    # (where an undecided level must keep t, `LinkBounds` already charges the parent's reads)
    for lv in range(min(depth, n_levels - 1) + 1 if not deeper_must else 0):
        level = arch.levels[lv]
        per_word = level.energy_read if not tensor.is_output else level.energy_update
        per_byte = level.byte_energy_read if not tensor.is_output else level.byte_energy_update
        compulsory = np.where(deepest == lv, words * (per_word / level.block_size
                                                      + level.word_bytes(tensor) * per_byte), compulsory)
    out = []
    for lv in range(n_levels):
        if may_keep[lv]:
            candidate = _may_be_innermost(lv, depth, deepest, deeper_must)
            # an undecided keeper of an input is filled with every word at least once per copy
            # (no link bound covers t when no undecided level must keep it)
            level = arch.levels[lv]
            fill = 0.0 if tensor.is_output or deeper_must or lv <= depth else fill_energy(level, tensor)
            out.append(ServingOption(lv, candidate, deepest == lv, compulsory, fill, deepest))
    return out


def _refetches(space: Mapspace, t: int, depth: int, table: MappingTable) -> np.ndarray:
    """How many times, at least, the deepest decided keeper of input t sends each word down
    (of the output: takes each word back): the decided temporal loops over
    dims t does not depend on, unless some level below could hold the node's whole tile of t
    per instance (then no undecided loop over t's dims sits above that keeper, and the decided
    loops may reuse it)."""
    workload, arch = space.workload, space.arch
    n = len(table)
    if depth == 0 or depth >= space.n_levels:
        return np.ones(n)
    irrelevant = ~workload.relevance[t]
    repeats = table.factors[:depth, 0][:, irrelevant].prod(axis=(0, 1)).astype(float)
    spans = table.factors[depth:].prod(axis=(0, 1))
    tile = tiles.words(workload.tensors[t], spans)
    could_hold = np.zeros(n, bool)
    spread = 1
    for lv in range(depth + 1, space.n_levels):
        spread *= arch.fanout(lv - 1)[0] * arch.fanout(lv - 1)[1]
        if any(t in k for k in space.choices[lv].keeps):
            could_hold |= tile / spread * arch.levels[lv].word_bytes(workload.tensors[t]) <= arch.levels[lv].capacity
    return np.where(could_hold, _outside_relevant(space, t, depth, table), repeats)


def _outside_relevant(space: Mapspace, t: int, depth: int, table: MappingTable) -> np.ndarray:
    """(N,) the product of the decided temporal loops over dims t does not depend on that lie
    outside the innermost decided loop over a dim it does: whatever the completion, each of
    their iterations brings t's words below the node afresh (the inner loop moved them on),
    so no level below can reuse them."""
    relevance = space.workload.relevance[t]
    n = len(table)
    seen = np.zeros(n, bool)
    product = np.ones(n)
    for lv in range(depth - 1, -1, -1):
        # the level's temporal trips and relevance in loop order (one gather per level)
        trips = np.take_along_axis(table.factors[lv, 0], table.order[lv], axis=0)     # (D, N)
        relevant = relevance[table.order[lv]]
        for position in range(space.n_dims - 1, -1, -1):       # innermost loop first
            looping = trips[position] > 1
            product = np.where(seen & looping & ~relevant[position], product * trips[position], product)
            seen |= looping & relevant[position]
    return product


def _keepers(space: Mapspace, t: int, depth: int, table: MappingTable):
    """Which levels may keep t, the deepest decided keeper per node, and the undecided levels
    that must keep t."""
    may_keep = [any(t in k for k in c.keeps) for c in space.choices]
    must_keep = [all(t in k for k in c.keeps) for c in space.choices]
    deeper_must = [lv for lv in range(depth + 1, space.n_levels) if must_keep[lv]]
    return may_keep, _deepest_keeper(space, t, depth, table), deeper_must


def _may_be_innermost(lv: int, depth: int, deepest: np.ndarray, deeper_must: list[int]) -> np.ndarray:
    """Per node, whether level lv can be t's innermost keeper: at or below the deepest level
    that must keep it, else the deepest decided keeper or an undecided level."""
    if deeper_must:
        return np.full(len(deepest), lv >= max(deeper_must))
    return (lv > depth) | (lv == deepest)


def _deepest_keeper(space: Mapspace, t: int, depth: int, table: MappingTable) -> np.ndarray:
    """The innermost decided level keeping t (the innermost keeper is at or below it)."""
    deepest = np.zeros(len(table), np.int64)
    for lv in range(min(depth, space.n_levels - 1) + 1):
        deepest = np.where(table.keep[lv, t], lv, deepest)
    return deepest


def independent_floor(space: Mapspace, t: int, options) -> np.ndarray | float:
    """The serving energy of tensor t alone, as if every fanout below its keeper were split
    over the dims it does not depend on."""
    arch, workload = space.arch, space.workload
    tensor = workload.tensors[t]
    best = np.inf
    for lv, candidate, at_deepest, compulsory, *_ in options:
        below = _sharing_fanout(arch, tensor, lv, space.n_levels)
        e = workload.macs / below * serve_energy(arch.levels[lv], tensor)
        e = np.where(at_deepest, np.maximum(e, compulsory), e + compulsory)
        best = np.where(candidate, np.minimum(best, e), best)
    return np.where(np.isfinite(best), best, 0.0)


def read_modify_write(space: Mapspace, t: int, depth: int, table: MappingTable,
                      links: "LinkBounds | None" = None) -> np.ndarray:
    """The output's read-modify-write at its innermost keeper: its updates minus what its
    instances hold; the instances holding one element are the spatial splits above it over
    dims that do not index the output (decided ones as chosen, the rest at most what they can
    reach)."""
    arch, workload = space.arch, space.workload
    tensor = workload.tensors[t]
    n_levels, n = len(arch.levels), len(table)
    may_keep, deepest, deeper_must = _keepers(space, t, depth, table)
    irrelevant = ~workload.relevance[t]
    words = tiles.words(tensor, [max(e) for e in space.extents])
    rmw = np.full(n, np.inf)
    sharing = np.ones(n)
    for lv in range(n_levels):
        if lv > 0:
            above = lv - 1
            if above < depth:
                sharing = sharing * table.factors[above, 1:][:, irrelevant].prod(axis=(0, 1))
            else:
                sharing = sharing * (links.units[above] if links is not None else
                                     arch.fanout(above)[0] * arch.fanout(above)[1])
        if not may_keep[lv]:
            continue
        level = arch.levels[lv]
        below = _sharing_fanout(arch, tensor, lv, n_levels)
        reads = np.maximum(0.0, workload.macs / below - words * np.minimum(sharing, level.instances))
        e = reads * read_energy(level, tensor)
        candidate = _may_be_innermost(lv, depth, deepest, deeper_must)
        rmw = np.where(candidate, np.minimum(rmw, e), rmw)
    return np.where(np.isfinite(rmw), rmw, 0.0)
