"""The innermost level's cells, which its bound (`innermost.py`) prices one by one: every
pair of a tile the level may hold and a split of the fanouts above it, where the tile times
the split fits each dim (`InnermostCells`: the cells and what about them no keep changes);
and what each tensor costs on them for one combination of parents (`CellTerms`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ... import tiles
from ...mapspace import Mapspace, tables
from ...rows import RowIndex
from .operand import MAX_VECTORS, SplitVectors
from .refetch import orders_by_way

MAX_TILES = 200_000        # tile vectors of the innermost level (else no bound from here)

MAX_CELLS = 1_000_000      # tiles x split vectors priced together at most (else splits relaxed)

MAX_WIDE_CELLS = 100_000   # the same where only the tiles that fit are crossed with the vectors


class Cells(NamedTuple):
    tile: np.ndarray                # (D, cells) the level's tile
    vectors: np.ndarray | None      # (cells, j, D) the split per fanout above and dim; None: not enumerated
    split: np.ndarray               # (cells, D) the split per dim over the fanouts above
    instances: np.ndarray           # (cells,) the instances the split uses
    trips: np.ndarray               # (D, cells) the merged loops above: size / (tile x split), at least 1


@dataclass(frozen=True, eq=False)
class InnermostCells:
    """The innermost level's cells and what about them does not depend on keeps, so that the
    parts of a space (`Mapspace.part`) share it."""
    level: int                  # the innermost level
    tile: np.ndarray            # (D, cells) its tile
    vectors: np.ndarray | None  # (cells, level, D) the split per fanout above and dim; None: not enumerated
    split: np.ndarray           # (cells, D) the split per dim over the fanouts above
    instances: np.ndarray       # (cells,) the instances the split uses
    trips: np.ndarray           # (D, cells) the merged loops above: size / (tile x split), at least 1
    words: tuple                # per tensor, (cells,) the words of its tile
    # per fanout above, its units where no vector splits it (a network that shares nothing is
    # not enumerated, `SplitVectors`): a word may have a copy under each of them
    unsplit: tuple[int, ...]
    # per fanout above, its units where it shares but the vectors are too many to enumerate
    unenumerated: tuple[int, ...]
    # per way the merged loops above may refetch them, per tensor the dims out to its
    # innermost relevant one (`refetch.orders_by_way`), and the orders that make each way
    # (a window counts by them)
    orders: tuple
    way_orders: tuple
    # every factor row of every dim multiplies to the dim's size (no padded extents, no
    # masked tails): only then does a completion's tile times its splits divide each dim
    perfect: bool

    @property
    def n_cells(self) -> int:
        return self.tile.shape[1]


def innermost_level_cells(space: Mapspace, splits: SplitVectors) -> InnermostCells | None:
    """The innermost level's cells of `space`; None where it has no level above it or its
    tiles are more than MAX_TILES (no bound from there)."""
    level = space.n_levels - 1
    values = [np.unique(tables.level_view(space, rows)[2][:, level]) for rows in space.dim_tables]
    if level < 1 or math.prod(len(v) for v in values) > MAX_TILES:
        return None
    cells = innermost_cells(space, splits, values)
    workload, arch = space.workload, space.arch
    by_way = orders_by_way(workload, {t for t, tensor in enumerate(workload.tensors) if not tensor.has_sliding_axis})
    return InnermostCells(
        level, *cells, words=tuple(tiles.words(tensor, cells.tile) for tensor in workload.tensors),
        unsplit=tuple(arch.fanout_units(x) if splits.per_level[x] is None else 1 for x in range(level)),
        unenumerated=tuple(arch.fanout_units(x) if cells.vectors is None and splits.per_level[x] is not None
                           else 1 for x in range(level)),
        orders=tuple(by_way), way_orders=tuple(by_way.values()),
        perfect=all((rows.prod(axis=1) == size).all() for rows, size in zip(space.dim_tables, workload.sizes)))


class CellTerms(NamedTuple):
    """What each tensor costs on each cell (tile and split) of the innermost level, for one
    combination of the tensors' deepest decided keepers (`innermost.InnermostBound`)."""
    parents: list           # per tensor, the levels that may serve it
    kept: np.ndarray        # (keep sets, T) whether each keeps each tensor
    fills: list             # per tensor, (orders, cells) words filled if kept
    fill_word: list         # per tensor, (cells,) energy per word filled, at the parent
    kept_mac: list          # per tensor, (cells,) what the level serves the units if it keeps it
    bypass: list            # per tensor, (cells,) what a parent serves them if it does not
    write: list             # per tensor, energy per word written into the level
    first: list             # per tensor, (cells,) of its fills those that bring no word (`CellPrices.first`)


def innermost_cells(space: Mapspace, splits: SplitVectors, values: list[np.ndarray]) -> Cells:
    """The cells of the innermost level, from the values its tile takes per dim (`values`).
    The split vectors are taken as many as can be priced with every tile, and more where
    only a few tiles fit the level with some keep set at its fewest stages (a register file
    of a few words under a 256 x 256 array), which are all the cells need; beyond either,
    none (each fanout then taken at its whole, `InnermostCells.unenumerated`)."""
    workload, j = space.workload, space.n_levels - 1
    grid = np.stack([g.ravel() for g in np.meshgrid(*values, indexing="ij")]).astype(float)   # (D, M)
    every = max(1, grid.shape[1])
    level, choice = space.arch.levels[j], space.choices[j]
    footprint = tiles.option_bytes(level, workload, [tiles.words(tensor, grid) for tensor in workload.tensors],
                                   choice.keeps, grid.shape[1]).min(axis=0)
    grid = grid[:, tiles.fits_level(level, footprint * min(choice.stages))]
    most = max(min(MAX_VECTORS, MAX_CELLS // every), MAX_WIDE_CELLS // max(1, grid.shape[1]))
    vectors = splits.above(j, most)                                                 # (V, j, D) or None
    per_vector = np.ones((1, space.n_dims)) if vectors is None else vectors.prod(axis=1).astype(float)
    m, v = grid.shape[1], len(per_vector)
    tile = np.repeat(grid, v, axis=1)                                               # (D, M*V)
    split = np.tile(per_vector.T, (1, m))                                            # (D, M*V)
    sizes = np.array(workload.sizes, float)
    fits = (tile * split <= sizes[:, None]).all(axis=0)
    split_of = np.tile(np.arange(v), m)[fits]
    tile, split = tile[:, fits], split[:, fits]
    return Cells(tile, None if vectors is None else vectors[split_of], per_vector[split_of],
                 split.prod(axis=0), np.maximum(sizes[:, None] / (tile * split), 1.0))


def cell_of(cells_tile: np.ndarray, cells_vectors: np.ndarray, tile: np.ndarray, vectors: np.ndarray,
            memo: dict) -> np.ndarray:
    """(N,) the index among the cells (`cells_tile` (D, C), `cells_vectors` (C, j, D)) of each
    tile ((D, N)) and split vectors ((N, j, D)), -1 where none; `memo` keeps the cells' index."""
    if "cell index" not in memo:
        memo["cell index"] = RowIndex(_cell_rows(cells_tile, cells_vectors))
    return memo["cell index"].find(_cell_rows(tile, vectors))


def _cell_rows(tile: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(N, D + j D) each cell's tile and split vectors as one row of ints."""
    return np.rint(np.concatenate([tile.T, vectors.reshape(len(vectors), -1)], axis=1)).astype(np.int64)
