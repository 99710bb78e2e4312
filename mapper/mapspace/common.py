"""What every part of the mapspace shares: slot kinds, pruning steps, per-level choices and
small helpers."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TEMPORAL, SPATIAL_X, SPATIAL_Y = 0, 1, 2
STEPS = ("constraints", "divisibility", "fanout", "capacity", "occupancy")


@dataclass(frozen=True)
class LevelChoices:
    """What may vary at one level besides factors: keep sets (tensor index tuples) and stages."""

    keeps: tuple[tuple[int, ...], ...]
    stages: tuple[int, ...]

    def keep_table(self, n_tensors: int) -> np.ndarray:
        """(keep options, tensors) whether each option keeps each tensor."""
        table = np.zeros((len(self.keeps), n_tensors), bool)
        for i, option in enumerate(self.keeps):
            table[i, list(option)] = True
        return table


def _bits(mask: int) -> int:
    return bin(mask).count("1")


def _chunks(total: int, batch: int):
    for start in range(0, total, batch):
        yield np.arange(start, min(total, start + batch), dtype=np.int64)
