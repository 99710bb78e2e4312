"""Freed memory kept for the next batch instead of handed back to the kernel.

The cost model allocates and frees its arrays on every table it prices (tens of MiB for the
tens of thousands of rows the search prices at once). glibc's allocator maps blocks above a
threshold afresh and trims the heap once enough is free at its top, so every table took its
arrays back from the kernel as zeroed pages: some 16,000 page faults per 50,000-row table,
as much CPU as the pricing itself (docs/RESULTS.md, "`mapper/cost/`"). Raising
both thresholds lets the next table reuse the same memory; the process keeps at most
TRIM_BYTES free beyond what it uses. Elsewhere than glibc this does nothing.
"""
from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3      # glibc's mallopt parameters (malloc.h)
MMAP_BYTES = 32 * 2**20          # blocks below this come from the heap (glibc's largest allowed)
TRIM_BYTES = 256 * 2**20         # free memory at the heap's top kept for reuse


def keep_freed_memory() -> bool:
    """Sets the allocator's thresholds for this process (and the workers it forks); True where
    the C library took them."""
    return set_thresholds(mmap_bytes=MMAP_BYTES, trim_bytes=TRIM_BYTES)


def set_thresholds(*, mmap_bytes: int, trim_bytes: int) -> bool:
    """Fixes glibc's mmap and trim thresholds (which also stops it moving them itself); True
    where the C library took both."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):          # not glibc: its own allocator, left as it is
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_bytes)) and bool(mallopt(M_TRIM_THRESHOLD, trim_bytes))
