"""GPU occupancy: which levels are per-SM, and how many thread blocks an SM holds at once.

A block is one instance's share of the per-SM level (shared memory) and the register level
below it. Resident blocks per SM are bounded by shared memory, registers and the hardware's
block limit (CUDA Programming Guide, "Occupancy"); the cost model also bounds them by the
blocks the mapping gives each SM (the iterations of the temporal loops above the shared-memory
level over dims that index the output: distinct output tiles), since an SM cannot hold more
blocks than it runs.
"""
from __future__ import annotations

import numpy as np

from ..spec import Arch


def gpu_levels(arch: Arch) -> tuple[int, int] | None:
    """(shared-memory level, register level) of a GPU, or None (`Arch.per_sm_levels`)."""
    return arch.per_sm_levels()


def blocks_per_sm(arch: Arch, smem_bytes, rf_bytes) -> np.ndarray:
    """Thread blocks that fit on one SM at once given one block's shared-memory bytes and its
    register bytes per register-level instance (both stages included)."""
    gpu = arch.gpu
    _, rf_lv = gpu_levels(arch)
    rf_per_sm = arch.levels[rf_lv].instances // gpu.sms
    smem_bytes, rf_bytes = np.asarray(smem_bytes, float), np.asarray(rf_bytes, float)
    with np.errstate(divide="ignore"):
        by_smem = np.floor(gpu.smem_per_sm / np.maximum(smem_bytes, 1e-9))
        by_regs = np.floor(gpu.registers_per_sm * 4 / np.maximum(rf_bytes * rf_per_sm, 1e-9))
    return np.minimum(np.minimum(by_smem, by_regs), gpu.max_blocks_per_sm)


def resident_blocks(arch: Arch, smem_bytes, rf_bytes, blocks_per_instance) -> np.ndarray:
    """Blocks an SM runs concurrently: what fits, at most the blocks it is given, at least one
    (a mapping whose block does not fit is invalid anyway; it is still priced)."""
    fit = blocks_per_sm(arch, smem_bytes, rf_bytes)
    return np.maximum(np.minimum(fit, np.asarray(blocks_per_instance, float)), 1.0)
