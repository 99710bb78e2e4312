"""The vectorised cost model: numpy over a `MappingTable` of N mappings, no object per mapping.

Access counts follow Timeloop's conventions (docs/COST_MODEL.md derives every rule):
tiles are axis-aligned boxes; a level's tile is refetched whenever the loops above it move it,
except that loops not indexing the tensor, inside its innermost relevant loop, reuse it; a
sliding window (an axis like p+r) only fetches the new slice when the move is along one axis
and in the same direction as the previous move; outputs skip the first read of each element.
`scalar.py` implements the same rules independently, one mapping at a time, with a full
breakdown; tests require both to agree exactly. The sliding-window rule is in `sliding.py`,
the walk up each tensor (multicast, reduction, traffic, latency) in `walk.py`, the loop nest's
arrays every rule reads in `nest.py`.

Layout: internally every array is [small axes..., N] so that each numpy operation runs over
long contiguous vectors of mappings; loops in Python only run over levels, tensors and axes.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from .. import mma, tails, tiles
from ..mapping import MappingTable, along_last
from ..spec import Arch, Workload
from .sliding import SlidingMoves
from .timing import level_time
from .occupancy import gpu_levels, resident_blocks
from .nest import Nest, exclusive_cumprod, product_of
from .walk import Latency, Traffic, kept_flag, walk_tensor


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

    def take(self, rows) -> "Costs":
        """The costs of the mappings `rows` (indices, in that order): every row is priced on
        its own (`_summed_in_order`), so they are what pricing those mappings alone gives."""
        return replace(self, **{f.name: along_last(getattr(self, f.name), rows) for f in fields(self)
                                if isinstance(getattr(self, f.name), np.ndarray)})


def _footprint(arch: Arch, workload: Workload, nest: Nest) -> np.ndarray:
    return tiles.kept_bytes(arch, workload, nest.tile, nest.keep, nest.stages)      # (L, N)


def footprint_bytes(arch: Arch, workload: Workload, table: MappingTable) -> np.ndarray:
    """Bytes each level's kept tiles take per instance (times stages), (N, L)."""
    return _footprint(arch, workload, Nest(workload, table)).T


def _loads(workload: Workload, nest: Nest, with_rounds: bool = False):
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


def occupancy(arch: Arch, nest: Nest, footprint: np.ndarray, output_dims):
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


def _level_times(arch: Arch, compute_cycles, traffic: Traffic, lat_hidden, lat_exposed) -> np.ndarray:
    """(L, N) cycles each level needs (`timing.level_time`); a level's sub-levels move their
    bytes through its one port together (`Arch.one_memory`), each taking the time of all."""
    n = len(compute_cycles)

    def through(values, lv):
        return sum(values[m] for m in arch.one_memory(lv))

    return np.stack([np.broadcast_to(level_time(level, arch.cycle_rule, compute_cycles,
                                                through(traffic.moved_read, lv), through(traffic.moved_write, lv),
                                                through(traffic.exposed_read, lv), through(traffic.exposed_write, lv),
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


def _valid(arch: Arch, nest: Nest, footprint: np.ndarray) -> np.ndarray:
    """(N,) tiles fit every level's capacity and spatial loops fit every fanout."""
    return tiles.fits(arch, footprint) & fits_every_fanout(arch, nest.spatial_xy, spatial=True)


def fits_every_fanout(arch: Arch, factors: np.ndarray, spatial: bool = False) -> np.ndarray:
    """(N,) every level's spatial split fits its fanout (`Arch.fits_fanout`); `factors` as a
    table's (L, 3, D, N) (or its spatial slots alone, (L, 2, D, N), with `spatial`)."""
    xy = factors if spatial else factors[:, 1:]
    # a product over the dims, one multiply each (numpy's prod over a middle axis is slower)
    units = product_of([xy[:, :, d] for d in range(xy.shape[2])])                 # (L, 2, N)
    ok = np.ones(factors.shape[-1], bool)
    for lv in range(len(units)):
        ok &= arch.fits_fanout(lv, units[lv, 0], units[lv, 1])
    return ok


def evaluate_many(arch: Arch, workload: Workload, table: MappingTable) -> Costs:
    """Price every mapping of `table`; see the module docstring for the semantics."""
    arch = arch.for_workload(workload)      # the MAC rate and energy of its operand dtypes
    nest = Nest(workload, table)
    n_levels, n = nest.n_levels, nest.n
    latency = np.array([level.latency for level in arch.levels])
    with_latency = bool(latency.any())
    if with_latency:
        loads, rounds = _loads(workload, nest, with_rounds=True)
    else:
        loads = _loads(workload, nest)
    spatial_all = nest.spatial.prod(axis=1)                                            # (L, N)
    instances = exclusive_cumprod(spatial_all)
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
    lat = Latency(latency, rounds, in_flight, level_waves, nest.stages) if with_latency else None
    extents = nest.span[0]
    padded = bool((extents != np.array(workload.sizes)[:, None]).any())
    traffic = Traffic(n_levels, len(workload.tensors), n,
                       tails.clamp_ratios(workload, extents) if padded else None, tails.masked_levels(arch))
    buffered = [kept_flag(stages > 1) for stages in nest.stages]    # True, False or per mapping
    # per tensor, the words each unit takes from its innermost keeper (`mma.unit_words`)
    drawn = mma.unit_words(arch, workload, nest.temporal[-1], macs_per_unit, executed)
    for t in range(len(workload.tensors)):
        walk_tensor(arch, workload, nest, t, loads, spatial_all, drawn[t], buffered, traffic, lat)
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
