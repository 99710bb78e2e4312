"""Latency no mapping hides: the cycles a level's latency adds on top of compute, at least
(docs/COST_MODEL.md, "Latency"), before and once a node has decided the levels involved."""
from __future__ import annotations

import numpy as np

from ...cost.occupancy import gpu_levels
from ...mapping import MappingTable
from ...mapspace import Mapspace

def latency_bound(space: Mapspace, p: int) -> float:
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
    bound = 0.0
    for t, tensor in enumerate(workload.tensors):
        if tensor.is_output or not all(t in keep for keep in space.choices[p].keeps):
            continue        # only partial sums read back wait, and a mapping may read none
        below = [c for c in range(p + 1, space.n_levels) if any(t in keep for keep in space.choices[c].keeps)]
        must = [c for c in below if all(t in keep for keep in space.choices[c].keeps)]
        if must:
            bound = max(bound, latency * min(1 / most_resident(arch, c) for c in below if c <= must[0]))
    return bound

def decided_latency_bound(space: Mapspace, depth: int, table: MappingTable, static: list[float],
                          requests: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(hidden, exposed), each (L, N): per level and node, a floor on its latency's
    Little's-law term (which joins the maximum with compute) and on the waits added to its
    time. The latter is `latency_bound` (`static`), or more where the node has decided both a
    level p keeping an input and that input's next keeper below, c, with c's stage count and
    the loops above c, so its fetch requests R (`requests`, (T, L, N): the node's completion's,
    `Costs.fetch_requests`, exact at c for every completion): a buffered c waits L once
    per wave at least and needs L x R / (stages x blocks) cycles of p; an unbuffered one
    waits L x R / blocks, the blocks resident beside it at most `most_resident` (the rules of
    docs/COST_MODEL.md with c known; docs/RESULTS.md)."""
    arch, workload = space.arch, space.workload
    n = len(table)
    exposed = np.repeat(np.asarray(static, float)[:, None], n, axis=1)
    hidden = np.zeros_like(exposed)
    if not any(level.latency for level in arch.levels[:depth]):
        return hidden, exposed
    for p, level in enumerate(arch.levels[:depth]):
        if not level.latency:
            continue
        for t, tensor in enumerate(workload.tensors):
            if tensor.is_output:        # only partial sums read back wait, and a mapping may read none
                continue
            found, hid, wait = np.zeros(n, bool), np.zeros(n), np.zeros(n)
            for c in range(p + 1, min(depth, space.n_levels - 1) + 1):
                here = ~found & table.keep[c, t]
                blocks = most_resident(arch, c)
                buffered = table.stages[c] > 1
                requested = level.latency * requests[t, c]
                wait = np.where(here, np.where(buffered, level.latency, requested / blocks), wait)
                hid = np.where(here & buffered, requested / (table.stages[c] * blocks), hid)
                found |= here
            exposed[p] = np.maximum(exposed[p], np.where(table.keep[p, t], wait, 0.0))
            hidden[p] = np.maximum(hidden[p], np.where(table.keep[p, t], hid, 0.0))
    return hidden, exposed

def feeder_wait(space: Mapspace, p: int, j: int, stages: int) -> float:
    """Cycles of level p's latency added to p's time at least when it alone feeds level j,
    which must keep an input, with `stages`: a buffered j waits once per wave (at least L),
    an unbuffered one L per request shared by at most the blocks resident beside it."""
    latency = space.arch.levels[p].latency
    inputs = [t for t, tensor in enumerate(space.workload.tensors)
              if not tensor.is_output and all(t in keep for keep in space.choices[j].keeps)]
    if not latency or not inputs:
        return 0.0
    return latency if stages > 1 else latency / most_resident(space.arch, j)

def most_resident(arch, c: int) -> int:
    """The most thread blocks resident beside each other at level c (one above the per-SM level)."""
    gpu = gpu_levels(arch)
    return arch.gpu.max_blocks_per_sm if gpu is not None and c >= gpu[0] else 1
