"""The time of every level at once as a function of the spatial splits of all the fanouts:
a bound on the cycles that sees that the split which spares one level's bandwidth loads
another's.

For a combination of splits (one vector per fanout level, per dim), the instances of each
level that work are known, and so is a floor on the bytes into each link
(`split_floor.split_traffic`). A level p with a rate then moves at least its fills and drains
from above and what it sends every link it alone feeds, shared by its busy instances only
(the busiest moves at least the average), and waits its latency as `feeder_wait` says; the
compute runs on the busy units. The bound of a node is the minimum over the combinations
that agree with the splits it has decided. On h100 a convolution kept on few SMs has
little L2 traffic but each SM's shared memory feeds its four sub-cores alone; spread over
many, L2 carries every SM's copy: the per-link floors, each alone, let both be low at once.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...cost.timing import total_rate
from ...mapspace import Mapspace, pruning, tables
from ...rows import unique_rows
from .latency import feeder_wait
from .grid import LinkCost
from .split_floor import joined, split_traffic

MAX_COMBINATIONS = 200_000


class SplitChain(NamedTuple):
    """Per combination of the fanouts' splits, the fewest cycles of any mapping using it."""
    fanouts: tuple[int, ...]        # the levels with a spatial fanout, outermost first
    splits: np.ndarray              # (F, D, C) each combination's split per fanout and dim
    cycles: np.ndarray              # (C,)
    lookups: dict                   # per tuple of decided fanouts (indices into `fanouts`): their
                                    # distinct splits as sorted row keys, and the least cycles of each

    def of_table(self, depth: int, factors: np.ndarray) -> np.ndarray | float:
        """`bound` for the nodes of a table (`factors`, (L, 3, D, N)) at `depth`."""
        known = [lv for lv in self.fanouts if lv < depth]
        if not known:
            return float(self.cycles.min())
        return self.bound(depth, np.stack([factors[lv, 1:].prod(axis=0) for lv in known]))

    def bound(self, depth: int, decided: np.ndarray) -> np.ndarray | float:
        """Per node at `depth` whose fanouts above it have split as `decided` ((F', D, N), the
        fanouts < depth), the least cycles over the combinations that agree (inf: none)."""
        known = tuple(i for i, lv in enumerate(self.fanouts) if lv < depth)
        if not known:
            return float(self.cycles.min())
        keys, least = self._lookup(known)
        theirs = _row_keys(decided.reshape(-1, decided.shape[-1]).T)
        # a binary search per node into the combinations' keys (sorting the nodes with them,
        # once per call, was most of the bound's time on a seven-dim convolution)
        at = np.minimum(np.searchsorted(keys, theirs), len(keys) - 1)
        return np.where(keys[at] == theirs, least[at], np.inf)

    def prefix_bound(self, level: int, decided: np.ndarray, first: np.ndarray) -> np.ndarray:
        """Per partial factor choice of `level` (a fanout) whose fanouts above it have split as
        `decided` ((F', D, N), the fanouts < level) and whose own split of the first dims is
        `first` ((d, N)), the least cycles over the combinations that agree on those (inf:
        none): below `bound` of every choice it completes to, which agrees on more."""
        i = self.fanouts.index(level)
        rows = np.concatenate([decided.reshape(-1, decided.shape[-1]), first])
        keys, least = self._lookup(tuple(range(i)), (i, len(first)))
        theirs = _row_keys(rows.T)
        at = np.minimum(np.searchsorted(keys, theirs), len(keys) - 1)
        return np.where(keys[at] == theirs, least[at], np.inf)

    def _lookup(self, known: tuple[int, ...], prefix: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The distinct splits of the fanouts `known` (and, with `prefix` (fanout, d), that
        fanout's first d dims) as sorted row keys, and the least cycles of each."""
        found = self.lookups.get((known, prefix))
        if found is None:
            n = self.splits.shape[-1]
            columns = [self.splits[list(known)].reshape(-1, n)]
            if prefix is not None:
                columns.append(self.splits[prefix[0], :prefix[1]])
            keys, inverse = np.unique(_row_keys(np.concatenate(columns).T), return_inverse=True)
            least = np.full(len(keys), np.inf)
            np.minimum.at(least, inverse.ravel(), self.cycles)
            found = self.lookups[known, prefix] = (keys, least)
        return found


def _row_keys(rows: np.ndarray) -> np.ndarray:
    """(N,) one comparable key per row of `rows` (N, K) integers: its bytes."""
    rows = np.ascontiguousarray(rows, np.int64)
    return rows.view(np.dtype((np.void, 8 * rows.shape[1]))).ravel()


def split_chain(space: Mapspace, links, macs: float) -> SplitChain | None:
    """The chain of `space` (`links`: its `LinkBounds`), or None where no level has a fanout,
    the combinations are too many, or none leaves a fused tensor-core role room."""
    arch = space.arch
    fanouts = tuple(lv for lv in range(space.n_levels) if arch.fanout_units(lv) > 1)
    if not fanouts:
        return None
    combos = _combinations(space, fanouts)
    if combos is None:
        return None
    splits, extents = combos
    below = np.cumprod(splits, axis=0)                        # (F, D, C) splits above each fanout's child
    # the fragments are met by the innermost level's tile, its own split among the compute
    # units included (`pruning.fragment_mask`): the region it holds is split by the fanouts above it
    above = [f for f, lv in enumerate(fanouts) if lv < space.n_levels - 1]
    regions = extents // below[above[-1]] if above else extents
    keep = pruning.fragments_possible(space, regions, extents)
    splits, below = splits[..., keep], below[..., keep]
    if splits.shape[-1] == 0:
        return None
    busy_units = below[-1].prod(axis=0)
    units_per = -(-arch.compute.instances // arch.levels[fanouts[-1] + 1].instances) if fanouts[-1] + 1 < len(
        arch.levels) else 1
    compute = np.ceil(macs / (np.minimum(busy_units * units_per, arch.compute.instances)
                              * arch.compute.macs_per_cycle))
    cycles = compute.copy()
    for p in range(1, space.n_levels):
        cycles = np.maximum(cycles, _level_time(space, links, p, fanouts, below, compute))
    return SplitChain(fanouts, splits, cycles, {})


def _above(fanouts, below: np.ndarray, level: int) -> np.ndarray | None:
    """(D, C) the product of the splits of the fanouts above `level` (None: none)."""
    inside = [i for i, lv in enumerate(fanouts) if lv < level]
    return below[inside[-1]] if inside else None


def _level_time(space: Mapspace, links, p: int, fanouts, below: np.ndarray, compute: np.ndarray):
    """Level p's cycles at least per combination: what it moves over its busy instances'
    rate, with the latency it makes a child it alone feeds wait (0 where it has no rate).
    A child with one stage leaves its draws exposed on top of the kernel's compute (the cost
    model adds the exposed bytes of an instance, which its busiest has at least the average
    of, to the compute time of the whole kernel: `timing.level_time`)."""
    level = space.arch.levels[p]
    rate = total_rate(level)
    if math.isinf(rate):
        return 0.0
    n = below.shape[-1]
    own_split = _above(fanouts, below, p)
    # (no split above: every instance may share the work)
    busy = np.full(n, float(level.instances)) if own_split is None else np.minimum(own_split.prod(axis=0),
                                                                                    level.instances)
    # its own fills, each in its own word (`LinkCost` with no parent); an output's final
    # value moves up without a read here (Timeloop's rule: its parent's update only)
    tensors = space.workload.tensors
    own = {t: LinkCost(level.word_bytes(tensors[t]), ()) for t in links.sent_costs[p] if not tensors[t].is_output}
    if own_split is None:
        moved = np.full(n, float(links.own_bytes[p].whole))
    elif own:
        moved = split_traffic(space, p, own, own_split, read_backs=False)
    else:
        moved = np.zeros(n)
    sent = {}
    for j in links.fed_by[p]:
        split = _above(fanouts, below, j)
        if split is not None and links.sent_costs[j]:
            sent[j] = split_traffic(space, j, links.sent_costs[j], split, read_backs=True)
            moved = moved + sent[j]
    time = moved / (busy * rate)
    out = time
    for j, bytes_j in sent.items():
        options = []
        for stages in sorted(set(space.choices[j].stages)):
            wait = feeder_wait(space, p, j, stages)
            option = np.maximum(compute, time)
            if stages == 1 and space.arch.cycle_rule != "timeloop":
                option = np.maximum(option, compute + bytes_j / (busy * rate))
            options.append(option + wait)
        out = np.maximum(out, np.minimum.reduce(options))
    return out


def _combinations(space: Mapspace, fanouts):
    """((F, D, C) the splits per fanout level and dim, (D, C) the dims' extents) over the
    combinations of each dim's own (splits, extent) options whose product per fanout fits
    it; None when more than `MAX_COMBINATIONS`."""
    arch = space.arch
    limits = np.array([arch.fanout_units(lv) for lv in fanouts])
    options = []
    for rows in space.dim_tables:
        _, spatial, tile = tables.level_view(space, rows)
        spatial = spatial[:, list(fanouts)]
        fits = (spatial <= limits).all(axis=1)      # the others `joined` drops: too wide alone
        options.append(unique_rows(np.column_stack([spatial[fits], tile[fits, 0]])))
    picks = joined(options, limits, MAX_COMBINATIONS)
    if picks is None:
        return None
    splits = np.stack([np.stack([options[d][picks[:, d], f] for d in range(len(options))])
                       for f in range(len(fanouts))])
    extents = np.stack([options[d][picks[:, d], len(fanouts)] for d in range(len(options))])
    return splits, extents
