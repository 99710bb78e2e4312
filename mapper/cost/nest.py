"""The loop nest of a batch of mappings as arrays (`Nest`): the factors, spans, tensor extents
and tiles per level that every rule of the vectorised cost model reads, in [small axes..., N]
layout, and the products along the levels they are built from."""
from __future__ import annotations

import numpy as np

from .. import tiles
from ..mapping import MappingTable
from ..spec import Workload


def product_of(arrays: list[np.ndarray]) -> np.ndarray:
    """The elementwise product of `arrays` (one multiply per array, no reduction over a
    stacked copy)."""
    if len(arrays) == 1:
        return arrays[0]
    out = arrays[0] * arrays[1]         # new: every later product of its dtype that it holds written into it
    for a in arrays[2:]:
        if isinstance(a, np.ndarray) and a.dtype == out.dtype and np.broadcast_shapes(out.shape, a.shape) == out.shape:
            out *= a
        else:
            out = out * a
    return out


def exclusive_cumprod(x: np.ndarray) -> np.ndarray:
    """Along axis 0: out[i] = prod(x[:i]). (A loop over the short axis beats np.cumprod here.)"""
    out = np.empty_like(x)
    out[0] = 1
    for i in range(1, len(x)):
        np.multiply(out[i - 1], x[i - 1], out=out[i])
    return out


def inclusive_cumprod_from_end(x: np.ndarray) -> np.ndarray:
    """Along axis 0: out[i] = prod(x[i:])."""
    out = x.copy()
    for i in range(len(x) - 2, -1, -1):
        np.multiply(out[i + 1], x[i], out=out[i])
    return out


class Nest:
    """The per-batch arrays every rule needs, in [small axes..., N] layout."""

    def __init__(self, workload: Workload, table: MappingTable):
        factors = table.factors                                                    # (L, 3, D, N)
        self.temporal = factors[:, 0]
        self.spatial = factors[:, 1] * factors[:, 2]
        self.spatial_xy = factors[:, 1:]
        full = self.temporal * self.spatial
        self.span = inclusive_cumprod_from_end(full)                              # loops at >= l
        self.order, self.keep, self.stages = table.order, table.keep, table.stages
        self.n_levels, self.n_dims, self.n = self.temporal.shape
        spans = np.moveaxis(self.span, 1, 0)
        self.ext = [[tiles.extent(axis, spans) for axis in t.axes] for t in workload.tensors]
        self.tile = [product_of(ext) for ext in self.ext]                            # T x (L, N)
        # an output's partition (its tile's span times the temporal loops above): read back
        # only by outputs, so only their dims' spans are formed
        output_dims = sorted({d for t in workload.tensors if t.is_output for d in t.dims})
        partition_spans = {d: spans[d] * exclusive_cumprod(self.temporal[:, d]) for d in output_dims}
        self.partition = [tiles.words(t, partition_spans) if t.is_output else None for t in workload.tensors]
        # where slot (l, i) of each mapping finds its loop's dim in an (L, D, N) array, flattened:
        # np.take with it is several times faster than take_along_axis over the dims
        # (only the levels above the last: no rule reads the last level's loops by slot), with
        # the offsets of level and row added in one pass
        above = self.n_levels - 1
        offset = np.arange(above)[:, None] * (self.n_dims * self.n) + np.arange(self.n)
        self.slot_index = self.order[:above] * self.n
        self.slot_index += offset[:, None, :]

    def by_slot(self, per_dim: np.ndarray) -> np.ndarray:
        """(l, D, N) values of each level's dims -> the same of each level's loops, outermost first;
        `per_dim` a contiguous array of the first l levels, l below the number of levels."""
        return np.take(per_dim.reshape(-1), self.slot_index[:len(per_dim)])
