"""The scalar cost model: one mapping, plain Python integers, a full breakdown.

It implements the rules of `vectorised.py` independently (by walking the loops rather than by
closed forms: the sliding-window rule runs as a small state machine over loop steps) so that
the two can check each other; tests require them to agree exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import mma, tails, tiles
from ..mapping import Mapping
from ..spec import Arch, Workload
from .energy import access_energy
from .multicast import distinct_offsets
from .timing import level_time
from .occupancy import gpu_levels, resident_blocks


@dataclass(frozen=True)
class TensorCost:
    tile_words: int          # words of the tile one instance holds (one stage)
    partition_words: int     # distinct words one instance touches over the run
    reads: int               # per instance
    fills: int
    updates: int
    bytes_moved: float       # all instances
    energy_pj: float         # all instances


@dataclass(frozen=True)
class LevelCost:
    name: str
    instances: int           # utilized instances
    tensors: dict[str, TensorCost]
    footprint_bytes: float   # per instance, kept tiles x stages
    capacity_bytes: float
    traffic_bytes: float     # all instances
    cycles: float            # time this level needs given its bandwidth, buffering and latency
    leak_pj: float
    latency_hidden: float = 0.0    # Little's-law floor on its overlapped time (cycles)
    latency_exposed: float = 0.0   # latency added to its time: unbuffered fetches, wave fills
    group: str = ""                # the level whose capacity it shares with its other sub-levels (`Level.group`)


@dataclass(frozen=True)
class Evaluation:
    levels: list[LevelCost]
    macs: int
    compute_cycles: float
    compute_energy_pj: float
    compute_instances: int
    energy_pj: float
    cycles: float
    utilization: float
    bottleneck: str          # the level (or 'compute') whose time is the kernel's time
    macs_executed: int = 0   # MACs run, padding included (compute units x MACs per unit)
    resident: int = 1        # GPU: thread blocks resident per SM (1 off a GPU)
    waves: int = 1           # GPU: rounds of resident blocks each SM runs (1 off a GPU)

    @property
    def edp(self) -> float:
        return self.energy_pj * self.cycles

    def fits(self) -> bool:
        """Every level's kept tiles within its capacity, a level's sub-levels (`Level.group`)
        within it together."""
        groups: dict[str, list[LevelCost]] = {}
        for lv in self.levels:
            if lv.group:
                groups.setdefault(lv.group, []).append(lv)
        return (all(tiles.within(lv.footprint_bytes, lv.capacity_bytes) for lv in self.levels)
                and all(tiles.within(sum(lv.footprint_bytes for lv in members), members[0].capacity_bytes)
                        for members in groups.values()))


def _loads(tensor, spans, nest_above) -> int:
    """Words fetched into one instance: first tile, then the delta at every step of the
    temporal loops of `nest_above` (the loops above the level, outermost first, as
    (dim, bound, is_spatial); spatial loops do not step in time but widen the strides)."""
    nest_above = [loop for loop in nest_above if loop[1] > 1]
    stride = []
    for k, (d, _, _) in enumerate(nest_above):
        stride.append(spans[d] * math.prod(b for dd, b, _ in nest_above[k + 1:] if dd == d))
    loops = [(d, b, stride[k]) for k, (d, b, spatial) in enumerate(nest_above) if not spatial]
    tile = tiles.words(tensor, spans)
    extents = [tiles.extent(axis, spans) for axis in tensor.axes]

    def move(j):
        """(kind, words, gradient) of the step where loop j advances and inner loops wrap."""
        shift_dim = {loops[j][0]: loops[j][2]}
        for d, b, st in loops[j + 1:]:
            shift_dim[d] = shift_dim.get(d, 0) - (b - 1) * st
        shifts = [sum(c * shift_dim.get(d, 0) for d, c in axis) for axis in tensor.axes]
        moved = [a for a, s in enumerate(shifts) if s]
        if not moved:
            return "same", 0, 0
        if len(moved) == 1 and abs(shifts[moved[0]]) < extents[moved[0]]:
            a = moved[0]
            return "slide", tile // extents[a] * abs(shifts[a]), 2 * a + (shifts[a] < 0) + 1
        return "new", tile, 0

    moves = [move(j) for j in range(len(loops))]

    def step(j, gradient):
        kind, words, g = moves[j]
        if kind == "same":
            return 0, 0
        if kind == "slide" and gradient in (0, g):
            return words, g
        return tile, 0

    memo = {}

    def run(j, gradient):
        """Words fetched by loops j.. entered with `gradient`; returns (words, gradient out)."""
        if j == len(loops):
            return 0, gradient
        if (j, gradient) in memo:
            return memo[(j, gradient)]
        total, g = run(j + 1, gradient)
        remaining, seen = loops[j][1] - 1, {}
        while remaining > 0:
            if g in seen:           # the state repeats: skip whole cycles at once
                left_then, total_then = seen.pop(g)
                period, gain = left_then - remaining, total - total_then
                cycles = remaining // period
                total, remaining = total + cycles * gain, remaining - cycles * period
                seen.clear()
                if remaining == 0:
                    break
            seen[g] = (remaining, total)
            words, g = step(j, g)
            inner, g = run(j + 1, g)
            total, remaining = total + words + inner, remaining - 1
        memo[(j, gradient)] = (total, g)
        return total, g

    return tile + run(0, 0)[0]


def _distinct_children(tensor, levels, parent, child, spans_below, arch_levels,
                       per_fanout: bool = False) -> int:
    """Distinct tiles of `tensor` among the children of one instance of level `parent` (the
    instances of level `child`, or the compute units): identical tiles share one transfer,
    except across a fanout whose network cannot share (no multicast / no reduction)."""
    count = 1
    sharing = []             # (level, the mesh axes of its loops that share)
    for lv in range(parent, child):
        shared = arch_levels[lv].shared_axes(tensor)
        if any(shared):      # under block clusters, only the CTAs of a cluster (axis y) share
            sharing.append((lv, {a for a in (0, 1) if shared[a]}))
        # each child of a fanout (or mesh axis of it) that cannot share is served on its own
        count *= math.prod(b for _, b, a in levels[lv].spatial if not shared[a])
    # pooled: offsets from every fanout in between may coincide; per_fanout (Timeloop's rule):
    # identical tiles are looked for within one fanout at a time
    groups = [[s] for s in sharing] if per_fanout else [sharing]
    for axis in tensor.axes:
        for group in groups:
            progressions = []
            for lv, axes in group:
                inner = spans_below(lv + 1) if lv + 1 < len(levels) else [1] * len(spans_below(lv))
                for d, c in axis:
                    bound = math.prod(b for dd, b, a in levels[lv].spatial if dd == d and a in axes)
                    progressions.append((c * inner[d], bound))
            count *= distinct_offsets(tuple(progressions))
    return count


def _rounds(tensor, loops_above) -> int:
    """Fetch requests into one instance: the steps of the temporal loops above it, outermost
    first, down to the innermost non-unit loop over a dim that indexes the tensor."""
    bounds = [b for _, b in loops_above]
    relevant = [k for k, (d, b) in enumerate(loops_above) if b > 1 and d in tensor.dims]
    return math.prod(bounds[:relevant[-1] + 1]) if relevant else 1


def _occupancy(arch: Arch, levels, footprints, output_dims) -> tuple[list[int], list[int]]:
    """Per level: resident thread blocks per SM and waves at the per-SM levels, ones above
    them and off a GPU (see `occupancy.py`)."""
    n_levels = len(levels)
    gpu = gpu_levels(arch)
    if gpu is None:
        return [1] * n_levels, [1] * n_levels
    smem, rf = gpu
    blocks = math.prod(b for lm in levels[:smem] for d, b in lm.temporal if d in output_dims)
    resident = int(resident_blocks(arch, footprints[smem], footprints[rf], blocks))
    waves = -(-blocks // resident)
    return ([1] * smem + [resident] * (n_levels - smem), [1] * smem + [waves] * (n_levels - smem))


class _Nest:
    """The loop nest of one mapping as each level sees it: its instances, the loops above it
    and the spans of the tiles at and below it (plain Python integers)."""

    def __init__(self, arch: Arch, workload: Workload, mapping: Mapping):
        levels = mapping.levels
        self.levels, self.n_levels, self.n_dims = levels, len(levels), len(workload.dims)
        spatial = [math.prod(b for _, b, _ in lm.spatial) for lm in levels]
        self.instances = [math.prod(spatial[:lv]) for lv in range(self.n_levels)]
        self.compute_instances = math.prod(spatial)
        self.macs_per_unit = math.prod(b for lm in levels for _, b in lm.temporal)
        innermost = tiles.unit_tile(mapping, self.n_dims)
        # padding included: whole fragments of the unit's own tile (`tails.fragment_macs`)
        self.executed_per_unit = tails.fragment_macs(arch, workload, innermost, self.macs_per_unit)
        # per tensor, the words each unit takes from its innermost keeper (`mma.unit_words`)
        self.unit_words = mma.unit_words(arch, workload, innermost, self.macs_per_unit, self.executed_per_unit)
        self.loops_above = [[loop for lm in levels[:lv] for loop in lm.temporal]
                            for lv in range(self.n_levels)]
        # the loops above each level as (dim, bound, is_spatial): a level's spatial loops follow
        # its temporal ones
        self.nest_above = [[loop for lm in levels[:lv]
                            for loop in [(d, b, False) for d, b in lm.temporal]
                            + [(d, b, True) for d, b, _ in lm.spatial]]
                           for lv in range(self.n_levels)]
        self.clamps = tails.clamp_ratios(workload, self.spans_below(0))   # valid share per tensor

    def spans_below(self, lv: int) -> list[int]:
        """Per dim, the product of the loop bounds at levels lv.. (a fresh list)."""
        spans = [1] * self.n_dims
        for lm in self.levels[lv:]:
            for d, b in lm.temporal:
                spans[d] *= b
            for d, b, _ in lm.spatial:
                spans[d] *= b
        return spans


@dataclass(frozen=True)
class _Counts:
    """Words per instance of one tensor at one level that keeps it."""
    tile: int
    partition: int
    loads: int               # fetched into the level over the run, first tile included
    reads: int
    fills: int
    updates: int
    below: int               # the next level below that keeps the tensor (n_levels: compute)


def _tensor_counts(arch: Arch, workload: Workload, nest: _Nest, t: int) -> dict[int, _Counts]:
    """Counts of tensor t at each level keeping it, innermost first. Walking up from the compute
    units, each keeper serves the loads of the next keeper below it, through the spatial
    fanout in between (multicast / reduction)."""
    tensor, levels = workload.tensors[t], nest.levels
    below_loads, below_lv = nest.unit_words[t], nest.n_levels
    out = {}
    for lv in range(nest.n_levels - 1, -1, -1):
        if t not in levels[lv].keep:
            continue
        spans = nest.spans_below(lv)
        partition_spans = list(spans)
        for d, b in nest.loops_above[lv]:
            partition_spans[d] *= b
        partition = tiles.words(tensor, partition_spans)
        loads = _loads(tensor, spans, nest.nest_above[lv])
        supply = below_loads * _distinct_children(tensor, levels, lv, below_lv, nest.spans_below,
                                                  arch.levels, arch.multicast == "per_fanout")
        if tensor.is_output:
            reads, fills, updates = supply - partition, loads - partition, supply
        else:
            reads, fills, updates = supply, (loads if lv > 0 else 0), 0
        out[lv] = _Counts(tiles.words(tensor, spans), partition, loads, reads, fills, updates, below_lv)
        below_loads, below_lv = loads, lv
    return out


def _access_counts(arch: Arch, workload: Workload, nest: _Nest) -> dict[tuple[int, int], _Counts]:
    """(level, tensor) -> counts, for every tensor (in order) at every level that keeps it
    (innermost first): the order in which per-level sums over tensors are taken."""
    return {(lv, t): c for t in range(len(workload.tensors))
            for lv, c in _tensor_counts(arch, workload, nest, t).items()}


def _buffered_below(nest: _Nest, c: _Counts) -> bool:
    """Whether what draws from this keeper (the next keeper below, or the compute units, which
    never stall on operands) has a second stage."""
    return c.below == nest.n_levels or nest.levels[c.below].stages > 1


def _exposed_bytes(arch: Arch, workload: Workload, nest: _Nest, counts) -> tuple[list[float], list[float]]:
    """Bytes per instance not hidden by buffering, split by direction: reads (to children or
    the compute units) and writes (fills from the parent, updates from children)."""
    exposed_read, exposed_write = [0.0] * nest.n_levels, [0.0] * nest.n_levels
    for (lv, t), c in counts.items():
        buffered, below_buffered = nest.levels[lv].stages > 1, _buffered_below(nest, c)
        word_bytes = arch.levels[lv].word_bytes(workload.tensors[t])
        exposed_read[lv] += word_bytes * (0 if below_buffered else c.reads)
        exposed_write[lv] += word_bytes * ((0 if buffered else c.fills)
                                           + (0 if below_buffered else c.updates))
    return exposed_read, exposed_write


@dataclass(frozen=True)
class _Latency:
    """Latency terms per level, each the largest over the levels it serves (docs/COST_MODEL.md)."""
    hidden: list[float]      # Little's-law floor on its overlapped time
    exposed: list[float]     # waits of unbuffered fetches
    waves: list[int]         # waves of the buffered levels it serves (each waits once)


def _latency_terms(arch: Arch, workload: Workload, nest: _Nest, counts, resident, waves) -> _Latency:
    """A keeper with a latency makes the keeper below it wait, one request per round; an
    output is waited on only where its partial sums are read back."""
    n_levels = nest.n_levels
    hidden, exposed, level_waves = [0.0] * n_levels, [0.0] * n_levels, [0] * n_levels
    for (lv, t), c in counts.items():
        tensor, latency, below = workload.tensors[t], arch.levels[lv].latency, c.below
        if latency and below < n_levels and (not tensor.is_output or counts[below, t].fills > 0):
            wait = latency * _rounds(tensor, nest.loops_above[below])
            if _buffered_below(nest, c):
                hidden[lv] = max(hidden[lv], wait / (nest.levels[below].stages * resident[below]))
                level_waves[lv] = max(level_waves[lv], waves[below])
            else:
                exposed[lv] = max(exposed[lv], wait / resident[below])
    return _Latency(hidden, exposed, level_waves)


def _footprints(arch: Arch, workload: Workload, nest: _Nest) -> list[float]:
    """Bytes per instance of each level's kept tiles, times its stages."""
    return [lm.stages * sum(tiles.words(tensor, nest.spans_below(lv))
                            * arch.levels[lv].word_bytes(tensor)
                            for t, tensor in enumerate(workload.tensors) if t in lm.keep)
            for lv, lm in enumerate(nest.levels)]


def _tensor_energy(level, word_bytes: float, c: _Counts) -> float:
    """Per-instance access energy: vectors of block_size words, rounded up, plus per-byte energy."""
    energy = 0.0
    for count, kind in ((c.reads, "read"), (c.fills, "write"), (c.updates, "update")):
        energy += access_energy(level, count, word_bytes, kind)
    return energy


def _port_bytes(arch: Arch, workload: Workload, lv: int, counts) -> tuple[float, float]:
    """Bytes per instance level lv reads, and writes (fills and updates)."""
    read = write = 0.0
    for t, tensor in enumerate(workload.tensors):
        if (lv, t) in counts:
            c, word_bytes = counts[lv, t], arch.levels[lv].word_bytes(tensor)
            read += c.reads * word_bytes
            write += (c.fills + c.updates) * word_bytes
    return read, write


def _level_row(arch: Arch, workload: Workload, nest: _Nest, lv: int, counts, compute_cycles,
               exposed: tuple[list[float], list[float]], lat: _Latency) -> dict:
    """LevelCost fields of level lv except its leakage and latency terms; `cycles` is its time.
    A masked level's totals (bytes moved, energy) count only the valid elements (`tails.py`)."""
    level, instances = arch.levels[lv], nest.instances[lv]
    clamps = nest.clamps if lv < tails.masked_levels(arch) else [1.0] * len(workload.tensors)
    tensors, footprint, moved = {}, 0.0, 0.0
    for t, tensor in enumerate(workload.tensors):
        if (lv, t) not in counts:
            continue
        c = counts[lv, t]
        word_bytes = level.word_bytes(tensor)
        bytes_each = (c.reads + c.fills + c.updates) * word_bytes
        energy = _tensor_energy(level, word_bytes, c) * level.charged_instances(instances) * clamps[t]
        tensors[tensor.name] = TensorCost(c.tile, c.partition, c.reads, c.fills, c.updates,
                                          bytes_each * instances * clamps[t], energy)
        moved += bytes_each * instances * clamps[t]
        footprint += c.tile * word_bytes
    # a level's sub-levels move their bytes through its one port together (`Arch.one_memory`)
    memory = arch.one_memory(lv)
    read_bytes, write_bytes = (sum(side) for side in zip(*(_port_bytes(arch, workload, m, counts) for m in memory)))
    exposed_latency = lat.exposed[lv] + level.latency * lat.waves[lv] if level.latency else 0.0
    time = float(level_time(level, arch.cycle_rule, compute_cycles, read_bytes, write_bytes,
                            sum(exposed[0][m] for m in memory), sum(exposed[1][m] for m in memory),
                            lat.hidden[lv], exposed_latency))
    return dict(name=level.name, instances=instances, tensors=tensors,
                footprint_bytes=footprint * nest.levels[lv].stages, capacity_bytes=level.capacity,
                traffic_bytes=moved, cycles=time, group=level.group)


def _leakage(arch: Arch, nest: _Nest, cycles: float) -> list[float]:
    """Leakage energy per level over the run (only the utilized instances, if the arch says so)."""
    leaking = nest.instances if arch.leakage == "utilized" else [level.instances for level in arch.levels]
    return [level.leak * count * cycles for level, count in zip(arch.levels, leaking)]


def evaluate(arch: Arch, workload: Workload, mapping: Mapping) -> Evaluation:
    """Price one mapping with a full breakdown per level and tensor (see the module docstring)."""
    arch = arch.for_workload(workload)      # the MAC rate and energy of its operand dtypes
    nest = _Nest(arch, workload, mapping)
    resident, waves = _occupancy(arch, mapping.levels, _footprints(arch, workload, nest),
                                 workload.tensors[workload.output].dims)
    counts = _access_counts(arch, workload, nest)
    exposed = _exposed_bytes(arch, workload, nest, counts)
    lat = _latency_terms(arch, workload, nest, counts, resident, waves)
    compute_cycles = -(-nest.executed_per_unit // arch.compute.macs_per_cycle)
    rows = [_level_row(arch, workload, nest, lv, counts, compute_cycles, exposed, lat)
            for lv in range(nest.n_levels)]
    level_times = [row["cycles"] for row in rows]
    cycles = max([compute_cycles] + level_times)
    leak = _leakage(arch, nest, cycles)
    level_costs = [LevelCost(**row, leak_pj=lk, latency_hidden=lh,
                             latency_exposed=le + arch.levels[lv].latency * lw)
                   for lv, (row, lk, lh, le, lw)
                   in enumerate(zip(rows, leak, lat.hidden, lat.exposed, lat.waves))]
    # Padding executes too (padded extents, partial fragments): energy counts every MAC run.
    executed = nest.executed_per_unit * nest.compute_instances
    compute_energy = executed * arch.compute.energy_per_mac
    energy = sum(tc.energy_pj for lc in level_costs for tc in lc.tensors.values())
    energy += compute_energy + sum(leak)
    slowest = max(range(nest.n_levels), key=lambda lv: level_times[lv])
    bottleneck = arch.levels[slowest].name if level_times[slowest] > compute_cycles else "compute"
    return Evaluation(levels=level_costs, macs=workload.macs, compute_cycles=float(compute_cycles),
                      compute_energy_pj=compute_energy, compute_instances=nest.compute_instances,
                      energy_pj=energy, cycles=float(cycles),
                      utilization=workload.macs / (cycles * arch.peak_macs_per_cycle),
                      bottleneck=bottleneck, macs_executed=executed,
                      resident=resident[-1], waves=waves[-1])
