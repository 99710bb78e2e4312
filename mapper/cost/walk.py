"""The vectorised path's walk up each tensor: from the compute units to the outermost level,
each level that keeps the tensor serves the loads of the next keeper below it through the
spatial fanout in between (multicast / reduction), and its reads, fills, updates, access
energy, bytes moved and exposed, and latency terms are recorded (`vectorised.evaluate_many`
walks every tensor here).

Arrays are [small axes..., N] as in `vectorised.py`. A per-level flag the same for every
mapping of a table (a keep, a buffering) is carried as True or False (`kept_flag`), and the rules
then skip their per-mapping selections; a mask that varies row by row selects by a product,
not np.where (several times slower on such masks).
"""
from __future__ import annotations

import numpy as np

from ..rows import unique_rows
from ..spec import Arch, Workload
from .energy import access_energy
from .multicast import distinct_offsets
from .nest import Nest, product_of


def _access_energy(level, word_bytes: float, reads, fills, updates) -> np.ndarray:
    """Per-instance energy of the reads, fills (writes) and updates (`energy.access_energy`),
    added in the same order as the scalar path; a count that is None is zero in every mapping
    (an input's updates) and adds nothing."""
    out = None                # not 0.0: access_energy's figure is never -0.0, so 0.0 + it copied it
    for count, kind in ((reads, "read"), (fills, "write"), (updates, "update")):
        if count is not None:
            energy = access_energy(level, count, word_bytes, kind)
            out = energy if out is None else out + energy
    return 0.0 if out is None else out


def _distinct_children(arch: Arch, tensor, nest: Nest, parent: int, child: int) -> np.ndarray:
    """Distinct tiles of `tensor` among the children of one `parent` instance (instances of
    level `child`, or the compute units): see `multicast.py`. Only rows where two dims of one
    axis are both split spatially need the sumset; the rest is a product of bounds."""
    n = nest.n
    count = np.ones(n, np.int64)
    levels = []                                    # (level, its sharing loops' bounds per dim)
    for lv in range(parent, child):
        shared = arch.levels[lv].shared_axes(tensor)
        if all(shared):
            levels.append((lv, nest.spatial[lv]))
            continue
        for a in (0, 1):
            if shared[a]:                          # a block cluster's CTAs (the innermost loops)
                levels.append((lv, nest.spatial_xy[lv, a]))
            else:                                  # each child of this fanout is served alone
                count = count * nest.spatial_xy[lv, a].prod(axis=0)
    if arch.multicast == "per_fanout":
        # Timeloop's rule: identical tiles are looked for within one fanout at a time
        for level in levels:
            count = count * _distinct_over(tensor, nest, [level])
        return count
    return count * _distinct_over(tensor, nest, levels)


def _distinct_over(tensor, nest: Nest, levels: list[tuple[int, np.ndarray]]) -> np.ndarray:
    """Distinct tiles of `tensor` over the sharing spatial loops of `levels` ((level, bounds
    (D, N)) pairs, each level's loops inside the tile below it)."""
    n = nest.n
    if not levels:                                 # no spatial loop in between: one tile
        return np.ones(n, np.int64)
    inner = [nest.span[lv + 1] if lv + 1 < nest.n_levels else np.ones_like(nest.span[0]) for lv, _ in levels]
    per_axis = []
    for axis in tensor.axes:
        bounds = [product_of([spatial[d] for _, spatial in levels]) for d, _ in axis]
        product = product_of(bounds)
        if len(axis) > 1:                          # only an axis over several dims can collide
            collide = np.flatnonzero(sum(b > 1 for b in bounds) > 1)
            if len(collide):
                params = np.stack([p for i, (_, spatial) in enumerate(levels) for d, c in axis
                                   for p in (c * inner[i][d][collide], spatial[d][collide])], axis=1)
                unique, inverse = unique_rows(params, return_inverse=True)
                sizes = np.array([distinct_offsets(tuple(zip(row[0::2].tolist(), row[1::2].tolist())))
                                  for row in unique])
                product[collide] = sizes[inverse.reshape(-1)]    # a new array: a product of two or more
        per_axis.append(product)
    return product_of(per_axis)     # may be a view of the nest's spatial factors: never written


class Traffic:
    """What the walk up each tensor yields. Per level and tensor: reads, fills and updates
    (words per utilized instance) and their access energy per instance; per level: bytes per
    instance moved through it, and of them those not hidden by buffering."""

    def __init__(self, n_levels: int, n_tensors: int, n: int, clamps: list | None = None, masked: int = 0):
        shape = (n_levels, n_tensors, n)
        # masked tails (`tails.py`): the levels above `masked` move only each tensor's valid share
        self.clamps, self.masked = clamps, masked if clamps is not None else 0
        self.valid_moved = np.zeros((n_levels, n)) if self.masked else None
        self.reads, self.fills, self.updates = (np.zeros(shape, np.int64) for _ in range(3))
        self.energy = np.zeros(shape)
        self.moved_read = np.zeros((n_levels, n))     # bytes per instance read from each level
        self.moved_write = np.zeros((n_levels, n))    # written into it (fills and updates)
        self.exposed_read = np.zeros((n_levels, n))   # of which not hidden by buffering
        self.exposed_write = np.zeros((n_levels, n))

    def record(self, level, tensor, lv: int, t: int, kept, supply, loads, partition,
               buffered, below_buffered) -> None:
        """Counts of tensor t at level lv where it is `kept` (zero elsewhere; `kept_flag`): it
        supplies `supply` words to the level below and loads `loads` from above (the outermost
        level is never filled); an output's first read of each element is not counted."""
        if kept is False:                  # every count stays zero, every sum unchanged
            return
        # counts zero in every mapping are None: an input is never updated, nor is the
        # outermost level filled; adding their zeros would change no sum
        fills = updates = None
        if tensor.is_output:
            self.updates[lv, t] = _wherekept_flag(kept, supply)
            self.reads[lv, t] = _wherekept_flag(kept, supply - partition)
            self.fills[lv, t] = _wherekept_flag(kept, loads - partition)
            fills, updates = self.fills[lv, t], self.updates[lv, t]
        else:
            self.reads[lv, t] = _wherekept_flag(kept, supply)
            if lv > 0:
                self.fills[lv, t] = _wherekept_flag(kept, loads)
                fills = self.fills[lv, t]
        reads = self.reads[lv, t]
        word_bytes = level.word_bytes(tensor)
        self.moved_read[lv] += word_bytes * reads
        written = _sum_present(fills, updates)
        if written is not None:
            self.moved_write[lv] += word_bytes * written
        self.energy[lv, t] = _access_energy(level, word_bytes, reads, fills, updates)
        if self.masked:
            share = self.clamps[t] if lv < self.masked else 1.0
            self.energy[lv, t] *= share
            self.valid_moved[lv] += word_bytes * _sum_present(reads, written) * share
        # exposed: what a level without a second stage waits for (its fills), and what a
        # child without one draws (reads) or sends back (updates); `buffered` as `kept_flag`
        exposed_read = _unless(below_buffered, reads)
        if exposed_read is not None:
            self.exposed_read[lv] += word_bytes * exposed_read
        exposed_write = _sum_present(_unless(buffered, fills), _unless(below_buffered, updates))
        if exposed_write is not None:
            self.exposed_write[lv] += word_bytes * exposed_write


def kept_flag(keep: np.ndarray):
    """A level's keep flags for one tensor, (N,), as True or False where every mapping agrees
    (the common case: the rules then skip their per-mapping selections), else the array."""
    if keep.all():
        return True
    return False if not keep.any() else keep


def _wherekept_flag(kept, values: np.ndarray) -> np.ndarray:
    """`values` where the tensor is kept, else 0 (`kept` from `kept_flag`, never False here):
    integer counts by a product with the mask (np.where is several times slower on a mask that
    varies row by row), exact for integers."""
    if kept is True:
        return values
    return values * kept if values.dtype.kind in "iu" else np.where(kept, values, 0)


def _unless(flag, values):
    """`values` (non-negative, or None: zero) where `flag` (True, False or per mapping) is not
    set, else 0; None where that is zero in every mapping. A product with the mask, not
    np.where: a mask that varies row by row made np.where several times slower."""
    if values is None or flag is True:
        return None
    return values if flag is False else values * ~flag


def _only(flag, values):
    """`values` (non-negative) where `flag` is set, else 0; None where zero in every mapping."""
    if flag is False:
        return None
    return values if flag is True else values * flag


def _sum_present(a, b):
    """a + b where either may be None (zero)."""
    return b if a is None else a if b is None else a + b


class Latency:
    """Latency terms per level (docs/COST_MODEL.md "Latency"), each the largest over the levels
    it serves, and what the walk needs of every level to compute them."""

    def __init__(self, latency: np.ndarray, rounds, in_flight, level_waves, stages):
        n_levels, n = in_flight.shape
        self.latency, self.rounds = latency, rounds
        self.in_flight, self.level_waves = in_flight, level_waves
        self.hidden = np.zeros((n_levels, n))     # max over served levels of latency x rounds / (stages x blocks)
        self.exposed = np.zeros((n_levels, n))    # max over unbuffered served levels of latency x rounds / blocks
        self.waves = np.zeros((n_levels, n))      # max over buffered served levels of waves
        self.requests = in_flight * stages        # requests in flight per served instance

    def serve(self, lv: int, kept, below: _Below) -> None:
        """The level below that keeps the tensor fetches it from level lv, one request per round."""
        if kept is False:
            return
        served = kept & below.waits
        wait = below.rounds * self.latency[lv]
        buffered = below.buffered                        # as `kept_flag`: True, False or per mapping
        hid = served if buffered is True else None if buffered is False else served & buffered
        exp = None if buffered is True else served if buffered is False else served & ~buffered
        if hid is not None:
            np.maximum(self.hidden[lv], _only(hid, wait / below.requests), out=self.hidden[lv])
            np.maximum(self.waves[lv], _only(hid, below.waves), out=self.waves[lv])
        if exp is not None:
            np.maximum(self.exposed[lv], _only(exp, wait / below.blocks), out=self.exposed[lv])

    def totals(self) -> tuple[np.ndarray, np.ndarray]:
        """(hidden, exposed) per level (L, N)."""
        # Little's law: a level's overlapped traffic takes at least latency x requests / requests
        # in flight; unbuffered fetches wait their whole latency (shared by the resident blocks);
        # each wave of blocks waits once for its first tile, which nothing hides
        return self.hidden, self.exposed + self.latency[:, None] * self.waves


class _Below:
    """What the walk up one tensor knows, per mapping, of the next level below that keeps it
    (at the start, the compute units) and of the spatial fanout between it and the level the
    walk has reached."""

    def __init__(self, unit_words: np.ndarray, n_levels: int, with_latency: bool):
        n = len(unit_words)
        self.loads, self.fan = unit_words, 1      # fan: distinct children per instance in between
        self.level = n_levels               # the keeper's level: one for all mappings, or per mapping
        self.buffered = True                 # the compute units never stall on operands
        if with_latency:                     # the next keeper below: its requests, in flight, waves
            self.rounds, self.waves = np.zeros(n), np.zeros(n)
            self.requests = self.blocks = np.ones(n)
            self.waits = np.zeros(n, bool)   # it fetches this tensor (an output only to read back)

    def cross(self, served) -> None:
        """The walk reaches a level: its spatial fanout lies between it and the keeper below,
        whose children need `served` distinct tiles (`_served`)."""
        self.fan = self.fan * served


    def kept_at(self, kept, lv: int, loads, buffered) -> None:
        """Where level lv keeps the tensor, it is the keeper below the levels above."""
        if kept is False:
            return
        if kept is True:
            self.loads, self.fan, self.buffered = loads, 1, buffered
            self.level = lv
            return
        self.loads = np.where(kept, loads, self.loads)
        self.fan = np.where(kept, 1, self.fan)
        self.level = np.where(kept, lv, self.level)
        self.buffered = np.where(kept, buffered, self.buffered)

    def latency_kept_at(self, kept, lv: int, t: int, lat: Latency, waits) -> None:
        """The same for the latency terms' figures of the keeper below."""
        if kept is False:
            return
        if kept is True:
            self.rounds, self.requests = lat.rounds[t][lv], lat.requests[lv]
            self.blocks, self.waves = lat.in_flight[lv], lat.level_waves[lv]
            self.waits = np.full(len(self.rounds), True) if waits is True else waits
            return
        self.rounds = np.where(kept, lat.rounds[t][lv], self.rounds)
        self.requests = np.where(kept, lat.requests[lv], self.requests)
        self.blocks = np.where(kept, lat.in_flight[lv], self.blocks)
        self.waves = np.where(kept, lat.level_waves[lv], self.waves)
        self.waits = np.where(kept, waits, self.waits)


def _served(level, tensor, nest: Nest, lv: int, spatial_all, relevant_fanout, relevant) -> np.ndarray:
    """Distinct tiles of `tensor` the children of one instance of level lv need (an axis
    without sliding windows): where the fanout shares, children differing only in dims not
    indexing the tensor hold the same tile (multicast / reduction), so only the split over
    its dims counts; under block clusters only the split of the clusters' CTAs shares."""
    shared = level.shared_axes(tensor)
    if shared[0] == shared[1]:
        return relevant_fanout[lv] if shared[0] else spatial_all[lv]
    xy, served = nest.spatial_xy[lv], np.ones(nest.n, np.int64)
    for a in (0, 1):
        if not shared[a]:
            served = served * xy[a].prod(axis=0)
        elif len(relevant):
            served = served * product_of([xy[a, d] for d in relevant])
    return served


def _supply(arch: Arch, tensor, nest: Nest, lv: int, below: _Below) -> np.ndarray:
    """Words one instance of level lv sends down: the keeper below's loads times the distinct
    tiles among its children there (identical tiles are multicast / reduced)."""
    if tensor.has_sliding_axis:      # overlapping windows may coincide: count them
        distinct = np.ones(nest.n, np.int64)
        if isinstance(below.level, int):
            return below.loads * _distinct_children(arch, tensor, nest, lv, below.level)
        for child in np.unique(below.level).tolist():
            rows = below.level == child
            distinct = np.where(rows, _distinct_children(arch, tensor, nest, lv, child), distinct)
        return below.loads * distinct
    return below.loads * below.fan


def walk_tensor(arch: Arch, workload: Workload, nest: Nest, t: int, loads, spatial_all, unit_words,
                 buffered, traffic: Traffic, lat: Latency | None) -> None:
    """Records tensor t's counts at every level into `traffic` (and its latency terms into
    `lat`). Walk up from the compute units: each kept level serves the loads of the next kept
    level below it, through the spatial fanout in between (multicast / reduction)."""
    tensor = workload.tensors[t]
    relevant = np.flatnonzero(workload.relevance[t])
    relevant_fanout = (product_of([nest.spatial[:, d] for d in relevant]) if len(relevant)
                       else np.ones_like(spatial_all))
    below = _Below(unit_words, nest.n_levels, lat is not None)
    for lv in range(nest.n_levels - 1, -1, -1):
        below.cross(_served(arch.levels[lv], tensor, nest, lv, spatial_all, relevant_fanout, relevant))
        kept = kept_flag(nest.keep[lv, t])
        if lat is not None and lat.latency[lv]:
            lat.serve(lv, kept, below)
        supply = _supply(arch, tensor, nest, lv, below)
        partition = nest.partition[t][lv] if tensor.is_output else None
        traffic.record(arch.levels[lv], tensor, lv, t, kept, supply, loads[t][lv], partition,
                       buffered[lv], below.buffered)
        below.kept_at(kept, lv, loads[t][lv], buffered[lv])
        if lat is not None:
            # only partial sums read back wait on a fetch
            waits = traffic.fills[lv, t] > 0 if tensor.is_output else True
            below.latency_kept_at(kept, lv, t, lat, waits)
