"""Lower bounds on the objective of every mapping below a tree node (see `tree.py`).

A node at depth j has decided every level above j, and level j's tile, stages and keeps. Its
completion (the node's table) is priced by the cost model; from that pricing the bound keeps
only what no deeper decision can change:
- fills of levels <= j, and reads/updates of levels < j whose consumer is a decided level;
- the times of those levels with that known traffic (compute time bounded below by the most
  compute units the remaining fanout could reach).
What is still open is bounded below by what every completion must pay: the compute units' one
operand read (or output update) per MAC at the innermost level keeping each tensor, divided by
the largest multicast the fanout below it allows; every input element fetched at least once
into each deeper level that must keep it; MAC energy; leakage over the bounded cycles.
"""
from __future__ import annotations

import math

import numpy as np

from ..cost import Costs
from ..mapping import MappingTable
from ..mapspace import Mapspace
from .objective import Objective


def _action_energy(level, count, word_bytes, per_access, per_byte):
    blocks = count if level.block_size == 1 else -(-count // level.block_size)
    return blocks * per_access + count * (word_bytes * per_byte)


def lower_bound(space: Mapspace, objective: Objective, depth: int, table: MappingTable,
                costs: Costs) -> np.ndarray:
    arch, workload = space.arch, space.workload
    n_levels, n = len(arch.levels), len(table)
    tensors = workload.tensors
    macs = workload.macs
    fanout = [arch.fanout(lv)[0] * arch.fanout(lv)[1] for lv in range(n_levels)]

    # compute units reachable: decided spatial splits times every remaining fanout
    decided_units = np.ones(n, np.int64)
    for lv in range(min(depth, n_levels)):
        decided_units = decided_units * table.factors[lv, 1:].prod(axis=(0, 1))
    units = np.minimum(decided_units * math.prod(fanout[depth:]), arch.compute.instances)
    compute = np.ceil(macs / (units * arch.compute.macs_per_cycle))

    energy = np.full(n, float(macs) * arch.compute.energy_per_mac)
    known_bytes = np.zeros((n_levels, n))
    exposed = np.zeros((n_levels, n))
    for t, tensor in enumerate(tensors):
        wb = tensor.bytes_per_word
        child = np.full(n, -1)                  # nearest decided level below that keeps t
        for lv in range(min(depth, n_levels - 1), -1, -1):
            level = arch.levels[lv]
            kept = table.keep[lv, t]
            inst = costs.level_instances[lv]
            fills = costs.level_fills[lv, t]
            e = _action_energy(level, fills, wb, level.energy_write, level.byte_energy_write)
            energy += np.where(kept, e * inst, 0)
            known_bytes[lv] += np.where(kept, fills * wb, 0)
            exposed[lv] += np.where(kept & (table.stages[lv] == 1), fills * wb, 0)
            if lv < depth:
                passing_known = kept & (child >= 0)
                reads, updates = costs.level_reads[lv, t], costs.level_updates[lv, t]
                e = (_action_energy(level, reads, wb, level.energy_read, level.byte_energy_read)
                     + _action_energy(level, updates, wb, level.energy_update, level.byte_energy_update))
                energy += np.where(passing_known, e * inst, 0)
                moved = (reads + updates) * wb
                known_bytes[lv] += np.where(passing_known, moved, 0)
                child_stages = np.take_along_axis(table.stages, np.maximum(child, 0)[None], axis=0)[0]
                exposed[lv] += np.where(passing_known & (child_stages == 1), moved, 0)
            child = np.where(kept, lv, child)
        energy += _open_part(space, t, depth, table)

    bandwidth = np.array([lv.bandwidth for lv in arch.levels])[:, None]
    level_time = np.maximum(compute, (known_bytes - exposed) / bandwidth) + exposed / bandwidth
    cycles = np.maximum(compute, level_time.max(axis=0))
    energy = energy + sum(lv.leak * lv.instances for lv in arch.levels) * cycles
    if objective.kind == "energy":
        return energy
    if objective.kind == "cycles":
        return cycles
    if objective.kind == "edp":
        return energy * cycles
    return known_bytes[objective.level] * costs.level_instances[objective.level]


def _open_part(space: Mapspace, t: int, depth: int, table: MappingTable) -> np.ndarray:
    """Energy every completion still pays for tensor t below the decided levels."""
    arch, workload = space.arch, space.workload
    tensor = workload.tensors[t]
    n_levels, n = len(arch.levels), len(table)
    wb = tensor.bytes_per_word
    may_keep = [any(t in k for k in c.keeps) for c in space.choices]
    must_keep = [all(t in k for k in c.keeps) for c in space.choices]
    # the innermost level keeping t is at or below the deepest decided keeper
    deepest = np.zeros(n, np.int64)
    for lv in range(min(depth, n_levels - 1) + 1):
        deepest = np.where(table.keep[lv, t], lv, deepest)
    deeper_must = [lv for lv in range(depth + 1, n_levels) if must_keep[lv]]
    best = np.full(n, np.inf)
    for lv in range(n_levels):
        if not may_keep[lv]:
            continue
        if deeper_must:                   # some undecided level below must keep t
            candidate = np.full(n, lv >= max(deeper_must))
        else:                             # the deepest decided keeper, or a level below it
            candidate = (lv > depth) | (lv == deepest)
        level = arch.levels[lv]
        below = math.prod(arch.fanout(x)[0] * arch.fanout(x)[1] for x in range(lv, n_levels))
        words = workload.macs / below
        if tensor.is_output:
            e = words * (level.energy_update / level.block_size + wb * level.byte_energy_update)
        else:
            e = words * (level.energy_read / level.block_size + wb * level.byte_energy_read)
        best = np.where(candidate, np.minimum(best, e), best)
    out = np.where(np.isfinite(best), best, 0.0)
    # every element enters each deeper level that must keep the tensor at least once
    words = workload.tensor_words(t)
    deepest_must = max((lv for lv in range(n_levels) if must_keep[lv]), default=-1)
    for lv in range(depth + 1, n_levels):
        if not must_keep[lv]:
            continue
        level = arch.levels[lv]
        if tensor.is_output:
            if lv != deepest_must:
                out = out + words * (level.energy_update / level.block_size + wb * level.byte_energy_update)
        else:
            out = out + words * (level.energy_write / level.block_size + wb * level.byte_energy_write)
    return out
