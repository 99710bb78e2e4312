"""What every part of the mapspace shares: slot kinds, pruning steps, per-level choices,
padded extents and small helpers."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..factors import smooth_numbers

TEMPORAL, SPATIAL_X, SPATIAL_Y = 0, 1, 2
STEPS = ("constraints", "divisibility", "fanout", "capacity", "occupancy")


@dataclass(frozen=True)
class LevelChoices:
    """What may vary at one level besides factors: keep sets (tensor index tuples) and stages."""

    keeps: tuple[tuple[int, ...], ...]
    stages: tuple[int, ...]


def _bits(mask: int) -> int:
    return bin(mask).count("1")


def _chunks(total: int, batch: int):
    for start in range(0, total, batch):
        yield np.arange(start, min(total, start + batch), dtype=np.int64)


def padded_extents(size: int, max_padding: float, limit: int = 8) -> tuple[int, ...]:
    """Extents a dim may be padded to: its size and the smoothest (largest prime factor <= 7)
    numbers up to size * (1 + max_padding), closest first; at most `limit` of them, so a dim
    of 6144 or 4099 stays a handful of candidates."""
    top = int(size * (1 + max_padding))
    smooth = smooth_numbers(size + 1, top)      # listed directly: a range of 10^8 is not scanned
    return (size,) + tuple(sorted(smooth)[: limit - 1])
