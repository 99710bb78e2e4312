"""The vectorised cost model: numpy over a `MappingTable` of N mappings, no object per mapping.

Access counts follow Timeloop's conventions (docs/COST_MODEL.md derives every rule):
tiles are axis-aligned boxes; a level's tile is refetched whenever the loops above it move it,
except that loops not indexing the tensor, inside its innermost relevant loop, reuse it; a
sliding window (an axis like p+r) only fetches the new slice when the move is along one axis
and in the same direction as the previous move; outputs skip the first read of each element.
`scalar.py` implements the same rules independently, one mapping at a time, with a full
breakdown; tests require both to agree exactly. The sliding-window rule is in `sliding.py`.

Layout: internally every array is [small axes..., N] so that each numpy operation runs over
long contiguous vectors of mappings; loops in Python only run over levels, tensors and axes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import tails, tiles
from ..mapping import MappingTable
from ..spec import Arch, Workload
from .multicast import distinct_offsets
from .sliding import SlidingMoves
from .timing import level_time
from .occupancy import gpu_levels, resident_blocks


@dataclass(frozen=True)
class Costs:
    """Costs of N mappings. Counts are words per utilized instance, as Timeloop prints them.

    Per-level arrays are stored [L, T, N] and exposed as [N, L, T] views."""

    energy_pj: np.ndarray        # (N,)
    cycles: np.ndarray           # (N,)
    utilization: np.ndarray      # (N,) MACs / (cycles x peak MACs per cycle)
    valid: np.ndarray            # (N,) tiles fit capacity and spatial loops fit the fanout
    compute_cycles: np.ndarray   # (N,)
    macs: int
    level_reads: np.ndarray      # (L, T, N)
    level_fills: np.ndarray
    level_updates: np.ndarray
    level_instances: np.ndarray  # (L, N) utilized instances
    level_footprint: np.ndarray  # (L, N) kept tiles x stages x bytes per instance
    level_traffic: np.ndarray    # (L, N) bytes moved through each level, all instances
    level_energy: np.ndarray     # (L, T, N) access energy, all instances
    level_time: np.ndarray       # (L, N) cycles each level needs
    level_moved: np.ndarray      # (L, N) bytes per instance through each level
    level_exposed: np.ndarray    # (L, N) of which not hidden by buffering
    # Latency (zero where no level declares one; see docs/COST_MODEL.md "Latency"):
    level_latency_hidden: np.ndarray   # (L, N) Little's-law floor on a level's overlapped time
    level_latency_exposed: np.ndarray  # (L, N) latency added to it: unbuffered fetches, wave fills
    resident: np.ndarray               # (N,) thread blocks resident per SM (1 off a GPU)
    waves: np.ndarray                  # (N,) rounds of resident blocks per SM (1 off a GPU)
    # (T, L, N) fetch requests into one instance of each level (`_loads`), where a level
    # declares a latency (None elsewhere): the search's latency bounds read them back
    fetch_requests: np.ndarray | None = None

    reads = property(lambda self: self.level_reads.transpose(2, 0, 1))
    fills = property(lambda self: self.level_fills.transpose(2, 0, 1))
    updates = property(lambda self: self.level_updates.transpose(2, 0, 1))
    instances = property(lambda self: self.level_instances.T)
    footprint_bytes = property(lambda self: self.level_footprint.T)
    traffic_bytes = property(lambda self: self.level_traffic.T)
    access_energy_pj = property(lambda self: self.level_energy.transpose(2, 0, 1))
    level_cycles = property(lambda self: self.level_time.T)

    @property
    def edp(self) -> np.ndarray:
        return self.energy_pj * self.cycles


def _exclusive_cumprod(x: np.ndarray) -> np.ndarray:
    """Along axis 0: out[i] = prod(x[:i]). (A loop over the short axis beats np.cumprod here.)"""
    out = np.empty_like(x)
    out[0] = 1
    for i in range(1, len(x)):
        np.multiply(out[i - 1], x[i - 1], out=out[i])
    return out


def _inclusive_cumprod_from_end(x: np.ndarray) -> np.ndarray:
    """Along axis 0: out[i] = prod(x[i:])."""
    out = x.copy()
    for i in range(len(x) - 2, -1, -1):
        np.multiply(out[i + 1], x[i], out=out[i])
    return out


def _product(arrays: list[np.ndarray]) -> np.ndarray:
    out = arrays[0]
    for a in arrays[1:]:
        out = out * a
    return out


class _Nest:
    """The per-batch arrays every rule needs, in [small axes..., N] layout."""

    def __init__(self, workload: Workload, table: MappingTable):
        factors = table.factors                                                    # (L, 3, D, N)
        self.temporal = factors[:, 0]
        self.spatial = factors[:, 1] * factors[:, 2]
        self.spatial_xy = factors[:, 1:]
        full = self.temporal * self.spatial
        self.span = _inclusive_cumprod_from_end(full)                              # loops at >= l
        self.order, self.keep, self.stages = table.order, table.keep, table.stages
        self.n_levels, self.n_dims, self.n = self.temporal.shape
        spans = np.moveaxis(self.span, 1, 0)
        self.ext = [[tiles.extent(axis, spans) for axis in t.axes] for t in workload.tensors]
        self.tile = [_product(ext) for ext in self.ext]                            # T x (L, N)
        # an output's partition (its tile's span times the temporal loops above): read back
        # only by outputs, so only their dims' spans are formed
        output_dims = sorted({d for t in workload.tensors if t.is_output for d in t.dims})
        partition_spans = {d: spans[d] * _exclusive_cumprod(self.temporal[:, d]) for d in output_dims}
        self.partition = [tiles.words(t, partition_spans) if t.is_output else None for t in workload.tensors]
        # where slot (l, i) of each mapping finds its loop's dim in an (L, D, N) array, flattened:
        # np.take with it is several times faster than take_along_axis over the dims
        self.slot_index = self.order * self.n
        self.slot_index += (np.arange(self.n_levels) * (self.n_dims * self.n))[:, None, None]
        self.slot_index += np.arange(self.n)

    def by_slot(self, per_dim: np.ndarray) -> np.ndarray:
        """(l, D, N) values of each level's dims -> the same of each level's loops, outermost first;
        `per_dim` a contiguous array of the first l levels."""
        return np.take(per_dim.reshape(-1), self.slot_index[:len(per_dim)])


def _footprint(arch: Arch, workload: Workload, nest: _Nest) -> np.ndarray:
    return tiles.kept_bytes(arch, workload, nest.tile, nest.keep, nest.stages)      # (L, N)


def footprint_bytes(arch: Arch, workload: Workload, table: MappingTable) -> np.ndarray:
    """Bytes each level's kept tiles take per instance (times stages), (N, L)."""
    return _footprint(arch, workload, _Nest(workload, table)).T


def _loads(workload: Workload, nest: _Nest, with_rounds: bool = False):
    """Words fetched into one instance of each level over the run, first fetch included; T x (L, N).
    With `with_rounds`, also the fetch requests of each, T x (L, N): the steps of the temporal
    loops above the level down to the innermost non-unit loop over a dim indexing the tensor
    (the steps that move its tile; a sliding window's partial fetch is a request too)."""
    n_levels, n_dims, n = nest.n_levels, nest.n_dims, nest.n
    # slots: the temporal loops of every level above the last (none of the last level's moves a
    # tile), level l's i-th loop (outermost first) at l x dims + i; arrays over them are (S, N)
    above = n_levels - 1
    small = np.uint8 if n_dims <= 8 else np.uint16 if n_dims <= 16 else np.uint32 if n_dims <= 32 else np.uint64
    slot_dim = nest.order[:above].reshape(above * n_dims, n).astype(small)
    slot_bound = nest.by_slot(np.ascontiguousarray(nest.temporal[:above])).reshape(above * n_dims, n)
    nonunit = slot_bound > 1
    prefix = np.empty((len(slot_bound) + 1, n), np.int64)     # product of the loops before each slot
    prefix[0] = 1
    for slot, bound in enumerate(slot_bound):
        np.multiply(prefix[slot], bound, out=prefix[slot + 1])
    sliding = SlidingMoves(nest, workload, slot_dim, slot_bound, nonunit, prefix) if any(
        t.has_sliding_axis for t in workload.tensors) else None
    # each slot's dim as a bit where its loop is non-unit (0 where unit): a tensor's relevant
    # non-unit slots are those sharing a bit with its dims, two integer operations per tensor
    bits = np.left_shift(small(1), slot_dim) * nonunit
    loads, rounds = [], []
    for t, tensor in enumerate(workload.tensors):
        out = sliding.loads(workload, t) if tensor.has_sliding_axis else None
        count = None
        if with_rounds or not tensor.has_sliding_axis:
            # Every relevant move refetches the whole tile: the fetch count is the product of
            # all loop bounds down to the innermost relevant loop above the level, the largest
            # of the prefixes after the relevant non-unit slots (prefixes never decrease)
            dims = small(sum(1 << d for d in range(n_dims) if workload.relevance[t][d]))
            after_move = prefix[1:] * ((bits & dims) != 0)             # 0 where the slot moves nothing
            count = np.ones((n_levels, n), np.int64)
            np.maximum.accumulate(after_move.reshape(above, n_dims, n).max(axis=1), axis=0, out=count[1:])
            np.maximum(count, 1, out=count)
            if out is None:
                out = nest.tile[t] * count
        loads.append(out)
        rounds.append(count)
    return (loads, rounds) if with_rounds else loads


def occupancy(arch: Arch, nest: "_Nest", footprint: np.ndarray, output_dims):
    """(resident blocks per SM, waves, both per level (L, N)) of N mappings. A block is what
    one SM's instance of the shared-memory level holds; the SM runs the temporal loops above
    that level as blocks, `resident` at a time, in `waves` rounds. Per level: those figures at
    the per-SM levels (their requests overlap with the other resident blocks' work), ones
    above them. Off a GPU everything is one. The blocks an SM runs are the iterations of the
    temporal loops above the shared-memory level over dims indexing the output (distinct output
    tiles); a loop over a reduction dim there is each block's main loop, not more blocks."""
    n, gpu = nest.n, gpu_levels(arch)
    ones = np.ones(n)
    if gpu is None:
        return ones, ones, np.ones((nest.n_levels, n)), np.ones((nest.n_levels, n))
    smem, rf = gpu
    blocks = np.ones(n, np.int64)
    for d in output_dims:                    # a reduction loop above the SM is a block's main loop
        blocks = blocks * nest.temporal[:smem, d].prod(axis=0)
    resident = resident_blocks(arch, footprint[smem], footprint[rf], blocks)
    waves = np.ceil(blocks / resident)
    per_level_resident, per_level_waves = np.ones((nest.n_levels, n)), np.ones((nest.n_levels, n))
    per_level_resident[smem:] = resident
    per_level_waves[smem:] = waves
    return resident, waves, per_level_resident, per_level_waves


def _access_energy(level, word_bytes: float, reads, fills, updates) -> np.ndarray:
    """Per-instance energy: vector accesses of block_size words, rounded up as Timeloop does,
    plus any per-byte energy. Terms are added in the same order as the scalar path; a count
    that is None is zero in every mapping (an input's updates) and adds nothing."""
    out = 0.0
    for count, per_access, per_byte in ((reads, level.energy_read, level.byte_energy_read),
                                        (fills, level.energy_write, level.byte_energy_write),
                                        (updates, level.energy_update, level.byte_energy_update)):
        if count is None:
            continue
        if per_access:      # zero terms are skipped: adding 0.0 would not change the sum
            blocks = count if level.block_size == 1 else -(-count // level.block_size)
            out = out + blocks * per_access
        if per_byte:
            out = out + count * (word_bytes * per_byte)
    return out


def _unique_rows(rows: np.ndarray):
    """np.unique(rows, axis=0, return_inverse=True), faster: rows of small non-negative ints
    are packed into one integer key when they fit."""
    radix = rows.max(axis=0) + 1
    if float(np.prod(radix.astype(float))) < 2.0 ** 62:
        key = np.zeros(len(rows), np.int64)
        for column, base in zip(rows.T, radix):
            key = key * base + column
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return rows[first], inverse
    return np.unique(rows, axis=0, return_inverse=True)


def _distinct_children(arch: Arch, tensor, nest: _Nest, parent: int, child: int) -> np.ndarray:
    """Distinct tiles of `tensor` among the children of one `parent` instance (instances of
    level `child`, or the compute units): see `multicast.py`. Only rows where two dims of one
    axis are both split spatially need the sumset; the rest is a product of bounds."""
    n = nest.n
    count = np.ones(n, np.int64)
    levels = []
    for lv in range(parent, child):
        if arch.levels[lv].shares(tensor):
            levels.append(lv)
        else:                                      # each child of this fanout is served alone
            count = count * nest.spatial[lv].prod(axis=0)
    if arch.multicast == "per_fanout":
        # Timeloop's rule: identical tiles are looked for within one fanout at a time
        for lv in levels:
            count = count * _distinct_over(tensor, nest, [lv])
        return count
    return count * _distinct_over(tensor, nest, levels)


def _distinct_over(tensor, nest: _Nest, levels: list[int]) -> np.ndarray:
    """Distinct tiles of `tensor` over the spatial loops of `levels` (all sharing)."""
    n = nest.n
    count = np.ones(n, np.int64)
    inner = [nest.span[lv + 1] if lv + 1 < nest.n_levels else np.ones_like(nest.span[0]) for lv in levels]
    for axis in tensor.axes:
        product = np.ones(n, np.int64)
        split_dims = 0
        for d, _ in axis:
            bounds = _product([nest.spatial[lv, d] for lv in levels]) if levels else np.ones(n, np.int64)
            product = product * bounds
            split_dims = split_dims + (bounds > 1)
        collide = np.flatnonzero(split_dims > 1)
        if len(collide):
            params = np.stack([p for i, lv in enumerate(levels) for d, c in axis
                               for p in (c * inner[i][d][collide], nest.spatial[lv, d][collide])], axis=1)
            unique, inverse = _unique_rows(params)
            sizes = np.array([distinct_offsets(tuple(zip(row[0::2].tolist(), row[1::2].tolist())))
                              for row in unique])
            product[collide] = sizes[inverse.reshape(-1)]
        count = count * product
    return count


class _Traffic:
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
        """Counts of tensor t at level lv where it is `kept` (zero elsewhere; `_kept`): it
        supplies `supply` words to the level below and loads `loads` from above (the outermost
        level is never filled); an output's first read of each element is not counted."""
        if kept is False:                  # every count stays zero, every sum unchanged
            return
        # counts zero in every mapping are None: an input is never updated, nor is the
        # outermost level filled; adding their zeros would change no sum
        fills = updates = None
        if tensor.is_output:
            self.updates[lv, t] = _where_kept(kept, supply)
            self.reads[lv, t] = _where_kept(kept, supply - partition)
            self.fills[lv, t] = _where_kept(kept, loads - partition)
            fills, updates = self.fills[lv, t], self.updates[lv, t]
        else:
            self.reads[lv, t] = _where_kept(kept, supply)
            if lv > 0:
                self.fills[lv, t] = _where_kept(kept, loads)
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
        # child without one draws (reads) or sends back (updates); `buffered` as `_kept`
        exposed_read = _unless(below_buffered, reads)
        if exposed_read is not None:
            self.exposed_read[lv] += word_bytes * exposed_read
        exposed_write = _sum_present(_unless(buffered, fills), _unless(below_buffered, updates))
        if exposed_write is not None:
            self.exposed_write[lv] += word_bytes * exposed_write


def _kept(keep: np.ndarray):
    """A level's keep flags for one tensor, (N,), as True or False where every mapping agrees
    (the common case: the rules then skip their per-mapping selections), else the array."""
    if keep.all():
        return True
    return False if not keep.any() else keep


def _where_kept(kept, values: np.ndarray) -> np.ndarray:
    """`values` where the tensor is kept, else 0 (`kept` from `_kept`, never False here)."""
    return values if kept is True else np.where(kept, values, 0)


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


class _Latency:
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
        buffered = below.buffered                        # as `_kept`: True, False or per mapping
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

    def __init__(self, macs_per_unit: np.ndarray, n_levels: int, with_latency: bool):
        n = len(macs_per_unit)
        self.loads, self.fan = macs_per_unit, 1   # fan: distinct children per instance in between
        self.level = n_levels               # the keeper's level: one for all mappings, or per mapping
        self.buffered = True                 # the compute units never stall on operands
        if with_latency:                     # the next keeper below: its requests, in flight, waves
            self.rounds, self.waves = np.zeros(n), np.zeros(n)
            self.requests = self.blocks = np.ones(n)
            self.waits = np.zeros(n, bool)   # it fetches this tensor (an output only to read back)

    def cross(self, fanout, relevant_fanout, shares: bool) -> None:
        """The walk reaches a level: its spatial fanout lies between it and the keeper below.
        Where the level shares, children differing only in dims not indexing the tensor hold
        the same tile (multicast / reduction): only the fanout over its dims counts."""
        self.fan = self.fan * (relevant_fanout if shares else fanout)

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

    def latency_kept_at(self, kept, lv: int, t: int, lat: _Latency, waits) -> None:
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


def _supply(arch: Arch, tensor, nest: _Nest, lv: int, below: _Below) -> np.ndarray:
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


def _walk_tensor(arch: Arch, workload: Workload, nest: _Nest, t: int, loads, spatial_all, macs_per_unit,
                 buffered, traffic: _Traffic, lat: _Latency | None) -> None:
    """Records tensor t's counts at every level into `traffic` (and its latency terms into
    `lat`). Walk up from the compute units: each kept level serves the loads of the next kept
    level below it, through the spatial fanout in between (multicast / reduction)."""
    tensor = workload.tensors[t]
    relevant = np.flatnonzero(workload.relevance[t])
    relevant_fanout = (_product([nest.spatial[:, d] for d in relevant]) if len(relevant)
                       else np.ones_like(spatial_all))
    below = _Below(macs_per_unit, nest.n_levels, lat is not None)
    for lv in range(nest.n_levels - 1, -1, -1):
        below.cross(spatial_all[lv], relevant_fanout[lv], arch.levels[lv].shares(tensor))
        kept = _kept(nest.keep[lv, t])
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


def _level_times(arch: Arch, compute_cycles, traffic: _Traffic, lat_hidden, lat_exposed) -> np.ndarray:
    """(L, N) cycles each level needs (`timing.level_time`)."""
    n = len(compute_cycles)
    return np.stack([np.broadcast_to(level_time(level, arch.cycle_rule, compute_cycles,
                                                traffic.moved_read[lv], traffic.moved_write[lv],
                                                traffic.exposed_read[lv], traffic.exposed_write[lv],
                                                lat_hidden[lv], lat_exposed[lv]), (n,))
                     for lv, level in enumerate(arch.levels)]).astype(float)


def _summed_in_order(parts: np.ndarray) -> np.ndarray:
    """(N,) the slices of `parts` (..., N) added one at a time, in the scalar model's order.
    numpy's `.sum` over the leading axes adds a table of one row pairwise (those axes then
    contiguous) and a larger one column by column: the same mapping would be priced an ulp
    apart in two tables, and searches that compare their best across tables (joint against
    exhaustive) would disagree on a tie."""
    total = np.zeros(parts.shape[-1])
    for part in parts.reshape(-1, parts.shape[-1]):
        total += part
    return total


def _energy(arch: Arch, level_energy, instances, spatial_all, executed_per_unit, cycles) -> np.ndarray:
    """(N,) total energy: access energy, MACs (`executed_per_unit` on each unit, padding
    included) and leakage. Scales `level_energy` (per instance, (L, T, N)) in place to all the
    instances charged."""
    level_energy *= np.stack([level.charged_instances(instances[lv])
                              for lv, level in enumerate(arch.levels)])[:, None, :]
    if arch.leakage == "utilized":              # Timeloop's rule: only used instances leak
        leak = _summed_in_order(np.array([level.leak for level in arch.levels])[:, None] * instances)
    else:
        leak = sum(level.leak * level.instances for level in arch.levels)
    executed = executed_per_unit * instances[-1] * spatial_all[-1]
    return _summed_in_order(level_energy) + executed * arch.compute.energy_per_mac + leak * cycles


def _valid(arch: Arch, nest: _Nest, footprint: np.ndarray) -> np.ndarray:
    """(N,) tiles fit every level's capacity and spatial loops fit every fanout."""
    capacity = np.array([level.capacity for level in arch.levels])[:, None]
    fanout = np.array([arch.fanout(lv) for lv in range(nest.n_levels)])[:, :, None]   # (L, 2, 1)
    fits_fanout = (nest.spatial_xy.prod(axis=2) <= fanout).all(axis=(0, 1))
    return (footprint <= capacity).all(axis=0) & fits_fanout


def evaluate_many(arch: Arch, workload: Workload, table: MappingTable) -> Costs:
    """Price every mapping of `table`; see the module docstring for the semantics."""
    nest = _Nest(workload, table)
    n_levels, n = nest.n_levels, nest.n
    latency = np.array([level.latency for level in arch.levels])
    with_latency = bool(latency.any())
    if with_latency:
        loads, rounds = _loads(workload, nest, with_rounds=True)
    else:
        loads = _loads(workload, nest)
    spatial_all = nest.spatial.prod(axis=1)                                            # (L, N)
    instances = _exclusive_cumprod(spatial_all)
    macs_per_unit = nest.temporal.reshape(n_levels * nest.n_dims, n).prod(axis=0)     # (N,)
    # padding included: whole fragments of the unit's own tile (`tails.fragment_macs`)
    executed = tails.fragment_macs(arch, workload, nest.temporal[-1], macs_per_unit)
    compute_cycles = -(-executed // arch.compute.macs_per_cycle)
    footprint = _footprint(arch, workload, nest)
    if with_latency or arch.gpu is not None:    # reported on a GPU even where no latency uses it
        resident, waves, in_flight, level_waves = occupancy(
            arch, nest, footprint, sorted(workload.tensors[workload.output].dims))
    else:
        resident = waves = np.ones(n)
    lat = _Latency(latency, rounds, in_flight, level_waves, nest.stages) if with_latency else None
    extents = nest.span[0]
    padded = bool((extents != np.array(workload.sizes)[:, None]).any())
    traffic = _Traffic(n_levels, len(workload.tensors), n,
                       tails.clamp_ratios(workload, extents) if padded else None, tails.masked_levels(arch))
    buffered = [_kept(stages > 1) for stages in nest.stages]    # True, False or per mapping
    for t in range(len(workload.tensors)):
        _walk_tensor(arch, workload, nest, t, loads, spatial_all, macs_per_unit, buffered, traffic, lat)
    if with_latency:
        lat_hidden, lat_exposed = lat.totals()
    else:
        lat_hidden = lat_exposed = np.zeros((n_levels, n))
    times = _level_times(arch, compute_cycles, traffic, lat_hidden, lat_exposed)
    cycles = np.maximum(times.max(axis=0), compute_cycles)
    energy = _energy(arch, traffic.energy, instances, spatial_all, executed, cycles)
    moved = traffic.moved_read + traffic.moved_write
    valid_moved = moved if traffic.valid_moved is None else traffic.valid_moved
    exposed = traffic.exposed_read + traffic.exposed_write
    return Costs(
        energy_pj=energy, cycles=cycles.astype(float),
        utilization=workload.macs / (cycles * arch.peak_macs_per_cycle),
        valid=_valid(arch, nest, footprint), compute_cycles=compute_cycles.astype(float), macs=workload.macs,
        level_reads=traffic.reads, level_fills=traffic.fills, level_updates=traffic.updates,
        level_instances=instances, level_footprint=footprint, level_traffic=valid_moved * instances,
        level_energy=traffic.energy, level_time=times, level_moved=moved, level_exposed=exposed,
        level_latency_hidden=lat_hidden, level_latency_exposed=lat_exposed,
        resident=resident, waves=waves, fetch_requests=np.stack(rounds) if with_latency else None)
