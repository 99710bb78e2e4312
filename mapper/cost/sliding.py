"""The vectorised path's sliding-window rule: the words fetched into a level for a tensor with
a sliding axis (p+r), whose consecutive tiles may overlap (`vectorised._loads` asks here).

Arrays are [small axes..., N] as in `vectorised.py`; `scalar.py` runs the same rule as a state
machine over loop steps, independently.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..spec import Workload

if TYPE_CHECKING:
    from .vectorised import _Nest


class SlidingMoves:
    """Loads of tensors with sliding axes (p+r): the one-axis, same-direction rule.

    For the step where temporal loop j advances and every temporal loop inside it wraps, dim d
    moves by the stride of j (if j is over d) minus (bound - 1) x stride of each inner loop over
    d; a loop's stride is the tile span of d at the level times the bounds of every loop over d
    inside it, spatial ones included. The step fetches only the new slice when it shifts
    exactly one axis by less than the axis extent (only an axis summing several dims can: a
    single-dim axis always moves by a whole tile or more), and the innermost loop's move is not
    such a slide or slides the same axis in the same direction (every outer step directly
    follows an innermost step); otherwise the whole tile.
    """

    def __init__(self, nest: _Nest, workload: Workload, slot_dim, slot_bound, prefix):
        self.nest, self.slot_dim, self.slot_bound = nest, slot_dim, slot_bound
        self.steps = prefix[:-1] * (slot_bound - 1)                                    # (S, N)

    def loads(self, workload: Workload, t: int, lv: int) -> np.ndarray:
        nest, n_dims = self.nest, self.nest.n_dims
        s = lv * n_dims
        tensor = workload.tensors[t]
        dims = sorted(d for d in tensor.dims if workload.sizes[d] > 1)   # a size-1 dim never moves
        # moves are bounded by the dims' extents, so 32-bit integers hold them
        small = max(workload.sizes) * max(c for axis in tensor.axes for _, c in axis) < 2**30
        itype = np.int32 if small else np.int64
        # arrays over the tensor's moving dims first: (K, N), K = len(dims), one numpy call
        # per loop slot for all of them (the walk prices small batches: calls dominate)
        dim_ids = np.array(dims, np.int64)
        # spatial[l]: product over each dim of the spatial bounds at levels l..lv-1 (inside
        # level l's temporal loops, above this level), times its span at this level
        spatial = [None] * lv
        running = nest.span[lv, dim_ids].astype(itype)
        for level in range(lv - 1, -1, -1):
            running = running * nest.spatial[level, dim_ids].astype(itype)
            spatial[level] = running
        inner = np.ones((len(dims), nest.n), itype)         # temporal bounds over d inside
        wrap = np.zeros((len(dims), nest.n), itype)         # sum of (b - 1) x stride inside
        # a loop slot that is unit in every mapping never steps, changes no stride and is
        # nobody's innermost loop: only the others are walked (a slice of the search's leaves
        # shares its outer levels' loops, most of them unit)
        slots = np.flatnonzero((self.slot_bound[:s] > 1).any(axis=1))
        if not len(slots):                  # nothing above ever steps: the first fetch alone
            return nest.tile[t][lv].copy()
        move = np.empty((len(dims), len(slots), nest.n), itype)
        for i in range(len(slots) - 1, -1, -1):
            j = slots[i]
            level, bound = j // n_dims, self.slot_bound[j].astype(itype)
            on_d = self.slot_dim[j][None, :] == dim_ids[:, None]
            stride = spatial[level] * inner
            move[:, i] = np.where(on_d, stride, 0) - wrap
            wrap = np.where(on_d, wrap + (bound - 1) * stride, wrap)
            inner = np.where(on_d, inner * bound, inner)
        position = {d: k for k, d in enumerate(dims)}
        n_moved = 0
        slides = []                          # (axis, shift) for axes summing several dims
        for a, axis in enumerate(tensor.axes):
            shift = np.zeros((len(slots), nest.n), itype)
            for d, c in axis:
                if d in position:
                    shift = shift + c * move[position[d]]
            n_moved = n_moved + (shift != 0)
            if len(axis) > 1:
                slides.append((a, shift))
        words = nest.tile[t][lv]
        steps = self.steps[slots]
        partial_words = np.zeros_like(steps)
        gradient = np.zeros_like(steps)
        for a, shift in slides:
            extent = nest.ext[t][a][lv]
            amount = np.abs(shift)
            slide = (n_moved == 1) & (shift != 0) & (amount < extent)
            partial_words = np.where(slide, words // extent * amount, partial_words)
            gradient = np.where(slide, 2 * a + 1 + (shift < 0), gradient)
        nonunit = self.slot_bound[slots] > 1
        innermost = len(slots) - 1 - np.argmax(nonunit[::-1], axis=0)
        inner_gradient = np.where(nonunit.any(0),
                                  np.take_along_axis(gradient, innermost[None], axis=0)[0], 0)
        credited = (gradient > 0) & ((inner_gradient == 0) | (gradient == inner_gradient))
        cost = np.where(credited, partial_words, np.where(n_moved > 0, words, 0))
        return words + (steps * cost).sum(0)
