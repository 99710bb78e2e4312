"""Random mappings as a `MappingTable`, drawn directly (no per-mapping objects, no rejection
of factorisations): every dim's size is split uniformly over its (level, temporal / spatial x /
spatial y) slots, loop orders are uniform permutations, keeps are the levels' defaults.

Spatial slots are offered only where a level fans out along that axis; a drawn spatial split
may still exceed the fanout, and such rows are reported invalid by the cost model.
"""
from __future__ import annotations

import numpy as np

from .factors import sample_factorizations
from .mapping import MappingTable
from .spec import Arch, Workload


def default_keep(arch: Arch, workload: Workload) -> np.ndarray:
    """keep[l, t]: what each level holds when the mapping does not say (all it may keep)."""
    return np.array([[level.may_keep(t.name) for t in workload.tensors] for level in arch.levels])


def random_table(arch: Arch, workload: Workload, count: int, seed: int = 0) -> MappingTable:
    rng = np.random.default_rng(seed)
    n_levels, n_dims = len(arch.levels), len(workload.dims)
    slots = [(lv, 0) for lv in range(n_levels)]
    slots += [(lv, 1 + a) for lv in range(n_levels) for a in (0, 1) if arch.fanout(lv)[a] > 1]
    factors = np.ones((n_levels, 3, n_dims, count), dtype=np.int64)
    for d, size in enumerate(workload.sizes):
        split = sample_factorizations(size, len(slots), count, rng)
        for i, (lv, s) in enumerate(slots):
            factors[lv, s, d] = split[:, i]
    order = np.argsort(rng.random((n_levels, n_dims, count)), axis=1)
    keep = np.repeat(default_keep(arch, workload)[:, :, None], count, axis=2)
    stages = np.ones((n_levels, count), dtype=np.int64)
    return MappingTable(factors, order, keep, stages)
