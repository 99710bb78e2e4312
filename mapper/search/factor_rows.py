"""The sorted factor rows a `LevelTree` is built on (`FactorRows`): per dim, every
factorisation row of the space, sorted by (extent, slots of level 0, slots of level 1, ...), and
where each depth's groups of rows sharing a prefix start. None of it depends on keeps, so a
space and its parts (`Mapspace.part`) share one, with what is derived from it (`memo`)."""
from __future__ import annotations

import numpy as np

from ..mapspace import Mapspace


class FactorRows:
    def __init__(self, space: Mapspace):
        self.slots, self.n_levels, self.n_dims = space.slots, space.n_levels, space.n_dims
        self.columns = sorted(range(len(space.slots)), key=lambda k: space.slots[k])
        self.column_level = np.array([space.slots[k][0] for k in self.columns])
        self.rows, self.cols, self.starts = [], [], []
        self._smallest: dict[tuple[int, int, int], np.ndarray] = {}
        self.order_rows: dict[tuple[int, int], np.ndarray] = {}     # the trees' sorted order classes
        self.memo: dict = {}        # other modules' tables derived from the rows
        for table in space.dim_tables:
            data = np.concatenate([table.prod(axis=1, keepdims=True), table[:, self.columns]], axis=1)
            data = data[np.lexsort(data.T[::-1])]
            self.rows.append(data)
            self.cols.append(np.ascontiguousarray(data.T))     # one column gathered at a time
            starts = []
            for depth in range(self.n_levels + 1):
                width = 1 + int((self.column_level < depth).sum())
                change = np.any(data[1:, :width] != data[:-1, :width], axis=1)
                starts.append(np.concatenate([[0], np.flatnonzero(change) + 1]))
            self.starts.append(starts)

    def prefix_columns(self, depth: int, groups: np.ndarray, columns) -> list[list[np.ndarray]]:
        """Per dim, the given columns (0: extent, 1 + c: slot `self.columns[c]`) of a
        representative row of each node's group (`groups`, (N, D) at `depth`)."""
        index = [self.starts[d][depth][groups[:, d]] for d in range(self.n_dims)]
        return [[self.cols[d][c][index[d]] for c in columns] for d in range(self.n_dims)]

    def child_ranges(self, depth: int, groups: np.ndarray):
        """Per node and dim, the first child group and the number of child groups."""
        lo, count = [], []
        for d in range(self.n_dims):
            starts, below = self.starts[d][depth], self.starts[d][depth + 1]
            ends = np.append(starts[1:], len(self.rows[d]))
            first = np.searchsorted(below, starts[groups[:, d]])
            lo.append(first)
            count.append(np.searchsorted(below, ends[groups[:, d]]) - first)
        return np.stack(lo, axis=1), np.stack(count, axis=1)

    def smallest_extents(self, d: int, depth: int, level: int) -> np.ndarray:
        """Per group of dim d at `depth`, the smallest extent level `level` holds among its rows."""
        key = (d, depth, level)
        if key not in self._smallest:
            rows = self.rows[d]
            outer = 1 + np.flatnonzero(self.column_level < level)
            extent = rows[:, 0] // rows[:, outer].prod(axis=1)
            self._smallest[key] = np.minimum.reduceat(extent, self.starts[d][depth])
        return self._smallest[key]

    def spans(self, depth: int, groups: np.ndarray, level: int | None = None) -> np.ndarray:
        """(D, N) extent of every dim in the tile level `depth` holds (or `level`, a level at
        or above `depth`, whose tile the nodes have decided too)."""
        decided = 1 + np.flatnonzero(self.column_level < (depth if level is None else level))
        spans = []
        for extent, *factors in self.prefix_columns(depth, groups, [0, *decided]):
            for f in factors:
                extent = extent // f
            spans.append(extent)
        return np.stack(spans)

    def level_factors(self, depth: int, groups: np.ndarray, level: int) -> np.ndarray:
        """(3, D, N) factors of `level` (decided: level < depth)."""
        out = np.ones((3, self.n_dims, len(groups)), np.int64)
        mine = [c for c, k in enumerate(self.columns) if self.slots[k][0] == level]
        values = self.prefix_columns(depth, groups, [1 + c for c in mine])
        for i, c in enumerate(mine):
            kind = self.slots[self.columns[c]][1]
            for d in range(self.n_dims):
                out[kind, d] *= values[d][i]
        return out
