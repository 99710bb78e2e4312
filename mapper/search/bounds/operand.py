"""A lower bound on what the innermost keepers of all tensors serve the compute units,
minimised jointly over the spatial splits still open.

Every MAC takes each operand from the innermost level that keeps it (and sends its partial
sum back there); one transfer serves every compute unit below that shares it, i.e. the units
that differ only in dims not indexing the tensor, across fanouts whose network multicasts (or
reduces). So the words served by keeper c are MACs / (product of those splits below c). Taken
tensor by tensor, each would assume the whole fanout is split over the dims it does not
depend on; but one split serves all tensors at once (splitting n multicasts A and not B), so
the bound takes the minimum over the split vectors the undecided fanouts can take of the sum
over tensors. The decided fanouts enter as chosen. Dims of a sliding axis (p+r) count as
shareable for that tensor: coinciding windows may be served together.
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from ... import tiles
from ...mapping import MappingTable
from ...mapspace import SPATIAL_X, SPATIAL_Y, Mapspace
from .energy import (cheapest_read_above, drawn, fill_energy, read_back_energy, read_energy, serve_energy,
                     sharing_fanout)
from .refetch import keepers, may_be_innermost, refetches


MAX_VECTORS = 4_096       # split vectors (over all undecided fanouts) enumerated at most

class SplitVectors:
    """Per depth, the split products per (fanout level, dim) the undecided fanouts can take:
    (V, L, D) arrays, or None where there are too many (the bound then falls back)."""

    def __init__(self, space: Mapspace):
        self.space = space
        self.per_level = [self._level(lv) for lv in range(space.n_levels)]
        self.any_sharing = any(v is not None for v in self.per_level)
        self.at_depth = [self._cross(depth) for depth in range(space.n_levels + 1)]

    def _level(self, lv: int):
        space = self.space
        units = space.arch.fanout_units(lv)
        level = space.arch.levels[lv]
        if units == 1 or not any(level.shares(t) for t in space.workload.tensors):
            return None         # a fanout that shares nothing serves every unit on its own
        values = []
        for rows in space.dim_tables:
            product = np.ones(len(rows), np.int64)
            for k, (level, kind) in enumerate(space.slots):
                if level == lv and kind in (SPATIAL_X, SPATIAL_Y):
                    product = product * rows[:, k]
            values.append(np.unique(product))
        if math.prod(len(v) for v in values) > 50 * MAX_VECTORS:
            return np.zeros((0, space.n_dims), np.int64)
        grid = np.array(list(itertools.product(*values)), np.int64).reshape(-1, space.n_dims)
        return grid[grid.prod(axis=1) <= units]

    def above(self, level: int, most: int):
        """(V, level, D) every split vector of the fanouts above `level`, or None where there
        are more than `most` (the innermost level's bound, which prices each with few tiles,
        may take more than `MAX_VECTORS`)."""
        vectors = self._cross(0, stop=level, most=most)
        return None if vectors is None else vectors[:, :level]

    def _cross(self, depth: int, stop: int | None = None, most: int | None = None):
        space = self.space
        most = MAX_VECTORS if most is None else most
        stop = space.n_levels if stop is None else stop
        free = [lv for lv in range(depth, stop) if self.per_level[lv] is not None]
        if any(len(self.per_level[lv]) == 0 for lv in free):
            return None
        count = math.prod(len(self.per_level[lv]) for lv in free)
        if count > most:
            return None
        out = np.ones((count, space.n_levels, space.n_dims), np.int64)
        for i, combo in enumerate(itertools.product(*[self.per_level[lv] for lv in free])):
            for lv, vector in zip(free, combo):
                out[i, lv] = vector
        return out

def operand_bound(space: Mapspace, depth: int, table, options, splits: SplitVectors,
                  by_spread: tuple = ()) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Per node: the minimum over split vectors of the sum over tensors of the minimum over
    candidate innermost keepers (`options[t]`, see `ServingOption`) of what that keeper
    serves per MAC, its compulsory traffic and the fills of its copies; and where link bounds
    by spread are given (`spread.SpreadBound`, those of the undecided levels), the minimum of
    the same sum plus theirs at each vector's spreads (else None). None when the split
    vectors are not enumerable or no network shares (the per-tensor bound is then as good)."""
    vectors = splits.at_depth[min(depth, space.n_levels)]
    if vectors is None or not splits.any_sharing:
        return None             # no network shares: the per-tensor bound is the same
    arch, workload = space.arch, space.workload
    n, n_levels = len(table), space.n_levels
    decided = table.factors[:, 1:].prod(axis=1)                                     # (L, D, N)
    decided[depth:] = 1
    spans = table.factors[depth:].prod(axis=(0, 1)) if depth < n_levels else np.ones((space.n_dims, n), np.int64)
    # nodes alike in everything the energy reads are priced once, per split vector; the
    # extents left below (`spans`) only decide which vectors fit each node
    features = [decided.reshape(-1, n)]
    # under block clusters only a decided split's CTAs (mesh y) share: kept apart
    decided_y = table.factors[:, 2].copy()
    decided_y[depth:] = 1
    if any(level.clusters is not None for level in arch.levels):
        features.append(decided_y.reshape(-1, n))
    for opts in options:
        for option in opts:
            features += [np.broadcast_to(option.candidate, (n,))[None].astype(np.int64),
                         np.broadcast_to(option.deepest, (n,))[None].astype(np.int64),
                         np.ascontiguousarray(np.broadcast_to(option.compulsory, (n,)), np.float64).view(np.int64)[None]]
    features = np.concatenate(features)
    _, first, inverse = np.unique(np.concatenate([features, spans]), axis=1, return_index=True, return_inverse=True)
    _, alike, group = np.unique(features[:, first], axis=1, return_index=True, return_inverse=True)
    first_of_group, group = first[alike], group.reshape(-1)
    free = vectors[:, depth:].prod(axis=1) if depth < n_levels else np.ones((len(vectors), space.n_dims), np.int64)
    fits = (free[None, :, :] <= spans[:, first].T[:, None, :]).all(axis=2)          # (U, V)
    total = np.zeros((len(first_of_group), len(vectors)))
    for t, opts in enumerate(options):
        if not opts:
            continue
        shared = shared_dims(workload, t)
        irrelevant = ~workload.relevance[t]
        best = np.full(total.shape, np.inf)
        for lv, candidate, at_deepest, comp, fill, deepest in opts:
            share = np.ones((len(first_of_group), len(vectors)))
            for level in range(lv, n_levels):
                if arch.levels[level].shares(workload.tensors[t]) and shared.any():
                    # at most what the network shares (a block cluster's CTAs)
                    share = share * _shared_splits(arch, workload.tensors[t], (decided, decided_y), vectors,
                                                   level, depth, shared, first_of_group)
            energy = drawn(space.arch, workload, t) * serve_energy(arch.levels[lv], workload.tensors[t]) / share
            c = np.broadcast_to(comp, (n,))[first_of_group][:, None]
            energy = np.where(np.broadcast_to(at_deepest, (n,))[first_of_group][:, None], np.maximum(energy, c), energy + c)
            if workload.tensors[t].is_output:
                energy = energy + _read_modify_write(space, t, lv, share, decided, vectors, depth, first_of_group, splits)
            if fill:
                # every copy below the deepest decided keeper: units that differ only in dims
                # the tensor does not depend on hold the same words
                copies = np.ones((len(first_of_group), len(vectors)))
                above = np.broadcast_to(deepest, (n,))[first_of_group][:, None]
                for level in range(lv):
                    copies = np.where(above <= level, copies * _splits(decided, vectors, level, depth, irrelevant, first_of_group),
                                      copies)
                energy = energy + workload.touched_words(t) * fill * copies
            best = np.where(np.broadcast_to(candidate, (n,))[first_of_group][:, None], np.minimum(best, energy), best)
        total += np.where(np.isfinite(best), best, 0.0)
    bound = np.where(fits, total[group], np.inf).min(axis=1)
    joint = None
    if by_spread:
        for link in by_spread:
            spreads = []
            for t, levels in zip(link.tensors, link.levels):
                spread = np.ones(total.shape)
                for level in levels:
                    spread = spread * _shared_splits(arch, workload.tensors[t], (decided, decided_y), vectors,
                                                     level, depth, ~workload.relevance[t], first_of_group)
                spreads.append(spread)
            total = total + link.at(spreads)
        joint = np.where(fits, total[group], np.inf).min(axis=1)
        joint = np.where(np.isfinite(joint), joint, 0.0)[inverse.reshape(-1)]
    return np.where(np.isfinite(bound), bound, 0.0)[inverse.reshape(-1)], joint

def _read_modify_write(space: Mapspace, t: int, lv: int, share, decided, vectors, depth: int, first,
                       splits: SplitVectors):
    """(U, V) the output's reads at its innermost keeper lv: every update but the first of
    each word in each copy reads the partial sum back. Updates are at least the MACs over the
    split's reduction (`share`); the copies of one word are the instances of lv that differ
    only in splits above it over dims the output does not index (an undecided fanout no
    vector splits, whose network shares nothing, at its whole)."""
    workload, level = space.workload, space.arch.levels[lv]
    tensor = workload.tensors[t]
    words = tiles.words(tensor, [max(e) for e in space.extents])
    copies, unsplit = np.ones_like(share), 1
    for above in range(lv):
        if above >= depth and splits.per_level[above] is None:
            unsplit *= space.arch.fanout_units(above)
            continue
        copies = copies * _splits(decided, vectors, above, depth, ~workload.relevance[t], first)
    return read_back_energy(drawn(space.arch, workload, t) / share, words * np.minimum(copies, level.instances), words,
                            unsplit, read_energy(level, tensor), cheapest_read_above(space.arch, tensor, lv))

def _shared_splits(arch, tensor, decided: tuple, vectors, level: int, depth: int, dims: np.ndarray,
                   first) -> np.ndarray:
    """(U, V) `_splits` over `dims` at most what level's network shares of `tensor`: where
    only a block cluster's CTAs share (`Level.shared_axes`), a decided split's mesh-y loops
    alone (`decided`: (both axes, y alone)), an undecided one at most a cluster's CTAs."""
    both, y_only = decided
    if level < depth and arch.levels[level].shared_axes(tensor) == (False, True):
        return _splits(y_only, vectors, level, depth, dims, first)
    return np.minimum(_splits(both, vectors, level, depth, dims, first), arch.sharing_units(level, tensor))


def _splits(decided, vectors, level: int, depth: int, dims: np.ndarray, first) -> np.ndarray:
    """(U, V) product of the spatial splits over `dims` at `level`: as decided above `depth`,
    from each split vector below it."""
    if not dims.any():
        return np.ones((len(first), len(vectors)))
    if level < depth:
        return decided[level][dims][:, first].prod(axis=0)[:, None].astype(float)
    return vectors[:, level][:, dims].prod(axis=1)[None, :].astype(float)

def shared_dims(workload, t: int) -> np.ndarray:
    """Dims along which compute units may share one transfer of tensor t."""
    tensor = workload.tensors[t]
    exact = {d for axis in tensor.axes if sum(1 for _, c in axis if c) == 1 for d, c in axis if c}
    return np.array([d not in exact for d in range(len(workload.dims))])

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
    a deeper keeper's per-MAC traffic, or as a bound under its own."""
    arch, workload = space.arch, space.workload
    tensor = workload.tensors[t]
    n_levels, n = len(arch.levels), len(table)
    may_keep, deepest, deeper_must = keepers(space, t, depth, table)
    compulsory = np.zeros(n)
    words = workload.touched_words(t) * (1 if tensor.is_output or deeper_must else refetches(space, t, depth, table))
    # (where an undecided level must keep t, `LinkBounds` already charges the parent's reads)
    for lv in range(min(depth, n_levels - 1) + 1 if not deeper_must else 0):
        level = arch.levels[lv]
        compulsory = np.where(deepest == lv, words * serve_energy(level, tensor), compulsory)
    out = []
    for lv in range(n_levels):
        if may_keep[lv]:
            candidate = may_be_innermost(lv, depth, deepest, deeper_must)
            # an undecided keeper of an input is filled with every word at least once per copy
            # (no link bound covers t when no undecided level must keep it)
            level = arch.levels[lv]
            fill = 0.0 if tensor.is_output or deeper_must or lv <= depth else fill_energy(level, tensor)
            out.append(ServingOption(lv, candidate, deepest == lv, compulsory, fill, deepest))
    return out

def independent_bound(space: Mapspace, t: int, options) -> np.ndarray | float:
    """The serving energy of tensor t alone, as if every fanout below its keeper were split
    over the dims it does not depend on."""
    arch, workload = space.arch, space.workload
    tensor = workload.tensors[t]
    best = np.inf
    for lv, candidate, at_deepest, compulsory, *_ in options:
        below = sharing_fanout(arch, tensor, lv, space.n_levels)
        e = drawn(space.arch, workload, t) / below * serve_energy(arch.levels[lv], tensor)
        e = np.where(at_deepest, np.maximum(e, compulsory), e + compulsory)
        best = np.where(candidate, np.minimum(best, e), best)
    return np.where(np.isfinite(best), best, 0.0)

def read_modify_write(space: Mapspace, t: int, depth: int, table: MappingTable,
                      units: list | None = None) -> np.ndarray:
    """The output's read-modify-write at its innermost keeper: its updates minus what its
    instances hold; the instances holding one element are the spatial splits above it over
    dims that do not index the output (decided ones as chosen, the rest at most what they can
    reach: `units[level]`, the most units a level's splits can use (`LinkBounds.units`), else
    its whole fanout)."""
    arch, workload = space.arch, space.workload
    tensor = workload.tensors[t]
    n_levels, n = len(arch.levels), len(table)
    may_keep, deepest, deeper_must = keepers(space, t, depth, table)
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
                sharing = sharing * (units[above] if units is not None else
                                     arch.fanout_units(above))
        if not may_keep[lv]:
            continue
        level = arch.levels[lv]
        below = sharing_fanout(arch, tensor, lv, n_levels)
        reads = np.maximum(0.0, drawn(space.arch, workload, t) / below - words * np.minimum(sharing, level.instances))
        e = reads * read_energy(level, tensor)
        candidate = may_be_innermost(lv, depth, deepest, deeper_must)
        rmw = np.where(candidate, np.minimum(rmw, e), rmw)
    return np.where(np.isfinite(rmw), rmw, 0.0)
