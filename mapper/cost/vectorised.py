"""The vectorised cost model: numpy over a `MappingTable` of N mappings, no object per mapping.

Access counts follow Timeloop's conventions (see docs/COST_MODEL.md for the derivation):
tiles are axis-aligned boxes; a level's tile is refetched whenever the loops above it move it,
except that loops not indexing the tensor, inside its innermost relevant loop, reuse it; a
sliding window (an axis like p+r) only fetches the new slice when the move is along one axis
and in the same direction as the previous move; outputs skip the first read of each element.
`scalar.py` implements the same rules independently, one mapping at a time, with a full
breakdown; tests require both to agree exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..mapping import MappingTable
from ..spec import Arch, Workload


@dataclass(frozen=True)
class Costs:
    """Costs of N mappings. Counts are words per utilized instance, as Timeloop prints them."""

    energy_pj: np.ndarray        # (N,)
    cycles: np.ndarray           # (N,)
    utilization: np.ndarray      # (N,) MACs / (cycles x peak MACs per cycle)
    valid: np.ndarray            # (N,) tiles fit capacity and spatial loops fit the fanout
    reads: np.ndarray            # (N, L, T)
    fills: np.ndarray            # (N, L, T)
    updates: np.ndarray          # (N, L, T)
    instances: np.ndarray        # (N, L) utilized instances of each level
    footprint_bytes: np.ndarray  # (N, L) kept tiles x stages x bytes, per instance
    traffic_bytes: np.ndarray    # (N, L) reads+fills+updates in bytes, all instances together
    access_energy_pj: np.ndarray  # (N, L, T) all instances together
    level_cycles: np.ndarray     # (N, L)
    compute_cycles: np.ndarray   # (N,)
    macs: int

    @property
    def edp(self) -> np.ndarray:
        return self.energy_pj * self.cycles


def _extents(coef: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Bounding-box extent of every tensor axis: 1 + sum_d coef[t,a,d] * (span[d] - 1).

    spans: (..., D) -> (..., T, A)."""
    t, a, d = coef.shape
    flat = (spans.reshape(-1, d) - 1) @ coef.reshape(t * a, d).T
    return 1 + flat.reshape(spans.shape[:-1] + (t, a))


def _exclusive_cumprod(x: np.ndarray, axis: int) -> np.ndarray:
    out = np.ones_like(x)
    idx = [slice(None)] * x.ndim
    src = [slice(None)] * x.ndim
    idx[axis], src[axis] = slice(1, None), slice(None, -1)
    out[tuple(idx)] = np.cumprod(x[tuple(src)], axis=axis)
    return out


def tile_geometry(workload: Workload, table: MappingTable):
    """Tile words, per-instance partition words and per-dim tile spans, per level and tensor."""
    coef = workload.coefficients
    temporal = table.factors[:, :, 0, :]
    full = temporal * table.factors[:, :, 1, :] * table.factors[:, :, 2, :]
    span = np.cumprod(full[:, ::-1, :], axis=1)[:, ::-1, :]          # loops at levels >= l
    ext = _extents(coef, span)                                        # (N, L, T, A)
    partition_span = span * _exclusive_cumprod(temporal, axis=1)      # plus temporal loops above
    partition = _extents(coef, partition_span).prod(-1)
    return ext.prod(-1), partition, span, ext


def footprint_bytes(arch: Arch, workload: Workload, table: MappingTable) -> np.ndarray:
    tile = tile_geometry(workload, table)[0]
    word_bytes = np.array([t.bytes_per_word for t in workload.tensors])
    return (tile * table.keep * word_bytes).sum(-1) * table.stages


def _loads(workload: Workload, table: MappingTable, tile, span, ext) -> np.ndarray:
    """Words fetched into one instance of each level over the whole run, first fetch included."""
    n, n_levels, _, n_dims = table.factors.shape
    temporal = table.factors[:, :, 0, :]
    slot_dim = table.order.reshape(n, -1)                                          # (N, S)
    slot_bound = np.take_along_axis(temporal, table.order, axis=2).reshape(n, -1)   # (N, S)
    n_slots = slot_dim.shape[1]
    prefix = np.concatenate([np.ones((n, 1), np.int64), np.cumprod(slot_bound, axis=1)], axis=1)
    loads = tile.astype(np.int64).copy()

    # Tensors without sliding axes: every relevant move refetches the whole tile, so the
    # fetch count is the product of all bounds down to the innermost relevant loop.
    rel = workload.relevance                                                       # (T, D)
    relevant = rel.T[slot_dim] & (slot_bound > 1)[..., None]                       # (N, S, T)
    last = np.maximum.accumulate(np.where(relevant, np.arange(n_slots)[None, :, None], -1), axis=1)
    for lv in range(1, n_levels):
        innermost = last[:, lv * n_dims - 1, :]                                    # (N, T)
        loads[:, lv, :] *= np.take_along_axis(prefix, innermost + 1, axis=1)

    sliding = [t for t, tensor in enumerate(workload.tensors) if tensor.has_sliding_axis]
    if sliding:
        _sliding_loads(workload, sliding, slot_dim, slot_bound, prefix, tile, span, ext, loads)
    return loads


def _sliding_loads(workload, tensors, slot_dim, slot_bound, prefix, tile, span, ext, loads):
    """Overwrite `loads` for tensors with sliding axes using the one-axis, same-direction rule.

    For the step where loop j advances and every loop inside it wraps, dim d moves by +span[d]
    if j is a loop over d (the inner loops over d telescope), else by -(W_d - 1) * span[d] where
    W_d is the product of the bounds over d inside j. The move is a partial fetch when it
    shifts exactly one axis by less than the axis extent; it is credited only if the innermost
    loop's move is not partial, or if it shifts the same axis in the same direction (the
    previous step before any outer step is always an innermost step).
    """
    n, n_slots = slot_dim.shape
    n_dims = span.shape[2]
    coef = workload.coefficients
    one_hot = slot_dim[:, :, None] == np.arange(n_dims)                        # (N, S, D)
    per_dim = np.where(one_hot, slot_bound[:, :, None], 1)
    per_dim_prefix = np.concatenate([np.ones((n, 1, n_dims), np.int64),
                                     np.cumprod(per_dim, axis=1)], axis=1)     # (N, S+1, D)
    steps = prefix[:, :-1] * (slot_bound - 1)                                   # (N, S)
    for lv in range(1, span.shape[1]):
        s = lv * n_dims
        inside = per_dim_prefix[:, s:s + 1, :] // per_dim_prefix[:, 1:s + 1, :]  # (N, s, D)
        lv_span = span[:, lv, None, :]
        move = np.where(one_hot[:, :s], lv_span, -(inside - 1) * lv_span)       # (N, s, D)
        nonunit = slot_bound[:, :s] > 1
        innermost = np.where(nonunit.any(1), s - 1 - np.argmax(nonunit[:, ::-1], axis=1), -1)
        for t in tensors:
            shift = move @ coef[t].T                                             # (N, s, A)
            moved = shift != 0
            n_moved = moved.sum(-1)
            axis = np.argmax(moved, axis=-1)
            amount = np.abs(np.take_along_axis(shift, axis[..., None], -1)[..., 0])
            extent = ext[:, lv, t, :][np.arange(n)[:, None], axis]
            words = tile[:, lv, t][:, None]
            partial = (n_moved == 1) & (amount < extent)
            gradient = np.where(partial, 2 * axis + (np.take_along_axis(shift, axis[..., None], -1)[..., 0] < 0) + 1, 0)
            inner_gradient = np.where(innermost >= 0,
                                      gradient[np.arange(n), np.maximum(innermost, 0)], 0)[:, None]
            credited = partial & ((inner_gradient == 0) | (gradient == inner_gradient))
            cost = np.where(credited, words // extent * amount, np.where(n_moved > 0, words, 0))
            loads[:, lv, t] = tile[:, lv, t] + (steps[:, :s] * cost).sum(1)


def evaluate_many(arch: Arch, workload: Workload, table: MappingTable) -> Costs:
    """Price every mapping of `table`; see the module docstring for the semantics."""
    n, n_levels, _, n_dims = table.factors.shape
    n_tensors = len(workload.tensors)
    temporal = table.factors[:, :, 0, :]
    spatial = table.factors[:, :, 1, :] * table.factors[:, :, 2, :]
    tile, partition, span, ext = tile_geometry(workload, table)
    loads = _loads(workload, table, tile, span, ext)

    spatial_all = spatial.prod(-1)                                                # (N, L)
    irrelevant = ~workload.relevance                                              # (T, D)
    spatial_shared = np.where(irrelevant[None, None], spatial[:, :, None, :], 1).prod(-1)  # (N, L, T)
    instances = _exclusive_cumprod(spatial_all, axis=1)
    compute_instances = instances[:, -1] * spatial_all[:, -1]
    macs_per_unit = temporal.reshape(n, -1).prod(-1)                              # (N,)

    reads = np.zeros((n, n_levels, n_tensors), np.int64)
    fills = np.zeros_like(reads)
    updates = np.zeros_like(reads)
    exposed = np.zeros((n, n_levels))              # bytes per instance not hidden by buffering
    word_bytes = np.array([t.bytes_per_word for t in workload.tensors])
    for t, tensor in enumerate(workload.tensors):
        # Walk up from the compute units: each kept level serves the loads of the next kept
        # level below it, through the spatial fanout in between (multicast / reduction).
        below_loads = macs_per_unit.copy()
        fan_all = np.ones(n, np.int64)
        fan_shared = np.ones(n, np.int64)
        below_buffered = np.ones(n, bool)          # the compute units never stall on operands
        for lv in range(n_levels - 1, -1, -1):
            fan_all = fan_all * spatial_all[:, lv]
            fan_shared = fan_shared * spatial_shared[:, lv, t]
            kept = table.keep[:, lv, t]
            supply = below_loads * fan_all // fan_shared
            if tensor.is_output:
                updates[:, lv, t] = np.where(kept, supply, 0)
                reads[:, lv, t] = np.where(kept, supply - partition[:, lv, t], 0)
                fills[:, lv, t] = np.where(kept, loads[:, lv, t] - partition[:, lv, t], 0)
            else:
                reads[:, lv, t] = np.where(kept, supply, 0)
                fills[:, lv, t] = np.where(kept & (lv > 0), loads[:, lv, t], 0)
            own_buffered = table.stages[:, lv] > 1
            exposed[:, lv] += word_bytes[t] * np.where(
                kept, fills[:, lv, t] * ~own_buffered
                + (reads[:, lv, t] + updates[:, lv, t]) * ~below_buffered, 0)
            below_loads = np.where(kept, loads[:, lv, t], below_loads)
            fan_all = np.where(kept, 1, fan_all)
            fan_shared = np.where(kept, 1, fan_shared)
            below_buffered = np.where(kept, own_buffered, below_buffered)

    compute_cycles = -(-macs_per_unit // arch.compute.macs_per_cycle)
    per_instance_bytes = ((reads + fills + updates) * word_bytes).sum(-1)          # (N, L)
    bandwidth = np.array([level.bandwidth for level in arch.levels])
    hidden = (per_instance_bytes - exposed) / bandwidth
    level_cycles = np.maximum(compute_cycles[:, None], hidden) + exposed / bandwidth
    cycles = np.maximum(level_cycles.max(1), compute_cycles)

    access_energy = _access_energy(arch, word_bytes, reads, fills, updates) * instances[:, :, None]
    leak = np.array([level.leak * level.instances for level in arch.levels]).sum()
    energy = (access_energy.sum((1, 2)) + workload.macs * arch.compute.energy_per_mac
              + leak * cycles)

    footprint = (tile * table.keep * word_bytes).sum(-1) * table.stages
    capacity = np.array([level.capacity for level in arch.levels])
    fanout = np.array([arch.fanout(lv) for lv in range(n_levels)])                # (L, 2)
    fits_fanout = (table.factors[:, :, 1:, :].prod(-1) <= fanout).all((1, 2))
    valid = (footprint <= capacity).all(1) & fits_fanout
    return Costs(
        energy_pj=energy, cycles=cycles.astype(float),
        utilization=workload.macs / (cycles * arch.peak_macs_per_cycle),
        valid=valid, reads=reads, fills=fills, updates=updates, instances=instances,
        footprint_bytes=footprint,
        traffic_bytes=per_instance_bytes * instances,
        access_energy_pj=access_energy, level_cycles=level_cycles,
        compute_cycles=compute_cycles.astype(float), macs=workload.macs)


def _access_energy(arch: Arch, word_bytes, reads, fills, updates) -> np.ndarray:
    """Per-instance energy of each level and tensor: vector accesses of block_size words
    (rounded up, as Timeloop does) plus any per-byte energy."""
    out = np.zeros(reads.shape)
    for lv, level in enumerate(arch.levels):
        for count, per_access, per_byte in ((reads, level.energy_read, level.byte_energy_read),
                                            (fills, level.energy_write, level.byte_energy_write),
                                            (updates, level.energy_update, level.byte_energy_update)):
            c = count[:, lv, :]
            out[:, lv, :] += -(-c // level.block_size) * per_access + c * word_bytes * per_byte
    return out
