"""The vectorised path's sliding-window rule: the words fetched into a level for a tensor with
a sliding axis (p+r), whose consecutive tiles may overlap (`vectorised._loads` asks here).

Arrays are [small axes..., N] as in `vectorised.py`; `scalar.py` runs the same rule as a state
machine over loop steps, independently.
"""
from __future__ import annotations

import numpy as np

from ..spec import Workload
from .nest import Nest, product_of


class SlidingMoves:
    """Loads of tensors with sliding axes (p+r): the one-axis, same-direction rule.

    For the step where temporal loop j advances and every temporal loop inside it wraps, dim d
    moves by the stride of j (if j is over d) minus (bound - 1) x stride of each inner loop over
    d. The step fetches only the new slice when it shifts exactly one axis by less than the axis
    extent (only an axis summing several dims can: a single-dim axis always moves by a whole
    tile or more), and the innermost loop's move is not such a slide or slides the same axis in
    the same direction (every outer step directly follows an innermost step); otherwise the
    whole tile (none where no axis moves: the loops inside undo the step).

    A level's loops are a permutation of the dims, so a loop over d at level l has a stride that
    does not depend on the order: the tile span of d at level l + 1 times the spatial bound of d
    at level l (the loops over d inside it are one per level below). So every slot's stride and
    wrap are computed once per table, each level's slots in one numpy call; per tensor and axis,
    a shift is the slot's own stride less what the loops inside it wrap back. Every array over
    slots is [slot, N], the slot of level l's i-th loop (outermost first) at l x dims + i.
    """

    def __init__(self, nest: Nest, workload: Workload, slot_dim, slot_bound, nonunit, prefix):
        """`slot_dim`, `slot_bound`, `nonunit`: each slot's dim, bound and bound > 1, and
        `prefix` the product of the loops before it, over the slots of the levels above the
        last (S, N) (`vectorised._loads`)."""
        self.nest = nest
        above = nest.n_levels - 1                     # levels whose loops move a lower level's tile
        sizes = np.array(workload.sizes, np.int64)
        # every shift is bounded by sum over an axis of |c| x size: 32-bit integers hold them
        widest = max((sum(abs(c) * int(sizes[d]) for d, c in axis)
                      for t in workload.tensors if t.has_sliding_axis for axis in t.axes), default=0)
        self.itype = np.int32 if widest < 2**31 else np.int64
        # (products of values that fit in itype, formed in it: no 64-bit temporary to narrow)
        stride = np.multiply(nest.span[1:], nest.spatial[:above], dtype=self.itype, casting="unsafe")
        self.stride = nest.by_slot(stride)                                             # (l, i, N)
        last_step = slot_bound - 1
        # how far a loop's last step is from its first
        self.wrap = np.multiply(last_step.reshape(self.stride.shape), self.stride, dtype=self.itype,
                                casting="unsafe")
        self.order = slot_dim.reshape(above, nest.n_dims, nest.n)
        self.steps = prefix[:-1] * last_step                                           # (S, N)
        # the innermost non-unit loop above each level, per mapping: its slot, -1 where none
        position = (nonunit * np.arange(1, len(nonunit) + 1, dtype=np.int32)[:, None])
        self.innermost = np.maximum.accumulate(position.reshape(above, nest.n_dims, nest.n).max(axis=1),
                                               axis=0) - 1                            # (l, N): above l + 1
        # a slot that is unit in every mapping never steps and is nobody's innermost loop: the
        # rules run over the others only (a slice of the search's leaves shares its outer
        # levels' loops, most of them unit); `row_of`: each live slot's row among them
        self.live = np.flatnonzero(nonunit.any(axis=1))
        self.row_of = np.zeros(len(nonunit), np.int64)
        self.row_of[self.live] = np.arange(len(self.live))

    def _base_shifts(self, workload: Workload, tensor) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Per axis that can move: (its index, its shift at each slot with no wrap of the levels
        below the slot's own (l, i, N), each level's whole wrap (l, N))."""
        nest, out = self.nest, []
        for a, axis in enumerate(tensor.axes):
            coefficient = np.zeros(nest.n_dims, np.int64)
            for d, c in axis:
                coefficient[d] += c
            if not any(coefficient[d] and workload.sizes[d] > 1 for d in range(nest.n_dims)):
                continue                                       # never moves
            per_slot = None                                    # the coefficient of each slot's dim
            for d in np.flatnonzero(coefficient).tolist():
                term = self.order == d if coefficient[d] == 1 else (self.order == d) * self.itype(coefficient[d])
                per_slot = term if per_slot is None else per_slot + term
            own, back = self.stride * per_slot, self.wrap * per_slot
            # what the loops inside a slot at its own level wrap back (the suffix sums over i,
            # the slot's own excluded), one add per position: numpy's cumsum over a reversed
            # middle axis took a sixth of a convolution's pricing
            inside = np.empty_like(back)
            inside[:, -1] = 0
            for i in range(nest.n_dims - 2, -1, -1):
                np.add(inside[:, i + 1], back[:, i + 1], out=inside[:, i])
            own -= inside
            out.append((a, own, inside[:, 0] + back[:, 0]))
        return out

    def loads(self, workload: Workload, t: int) -> list[np.ndarray]:
        """Words fetched into one instance of each level l >= 1, first fetch included."""
        nest, n_dims, n = self.nest, self.nest.n_dims, self.nest.n
        tensor = workload.tensors[t]
        axes = self._base_shifts(workload, tensor)
        out = [nest.tile[t][0]]
        for lv in range(1, nest.n_levels):
            n_slots = lv * n_dims
            words = nest.tile[t][lv]
            rows = self.live[:np.searchsorted(self.live, n_slots)]
            if not len(rows):                  # nothing above ever steps: the first fetch alone
                out.append(words.copy())
                continue
            # each level's block among the selected rows (the levels between a slot and lv wrap
            # back too): the rows are picked first and shifted in place, one copy per axis
            block = np.searchsorted(rows, np.arange(lv) * n_dims).tolist() + [len(rows)]
            rows = slice(None) if len(rows) == n_slots else rows
            count = np.zeros((block[-1], n), np.int8)
            slides = []
            for a, base, level_wrap in axes:
                shift = base[:lv].reshape(n_slots, n)[rows]
                if lv > 1:
                    # a fancy index has copied already; a view is written into a new array
                    source, shift = shift, shift if isinstance(rows, np.ndarray) else np.empty_like(shift)
                    if shift is not source:
                        shift[block[lv - 1]:] = source[block[lv - 1]:]
                    deep = np.zeros_like(level_wrap[0])
                    for level in range(lv - 2, -1, -1):
                        deep += level_wrap[level + 1]
                        np.subtract(source[block[level]:block[level + 1]], deep,
                                    out=shift[block[level]:block[level + 1]])
                nonzero = shift != 0
                count += nonzero
                if len(tensor.axes[a]) > 1:
                    slides.append((a, shift, nonzero))
            steps = self.steps[:n_slots][rows]
            loads = words + words * np.einsum("sn,sn->n", steps, count != 0)
            if slides:
                loads -= self._slide_savings(tensor, t, lv, slides, count, steps)
            out.append(loads)
        return out

    def _slide_savings(self, tensor, t: int, lv: int, slides, count, steps) -> np.ndarray:
        """Words the credited slides save at level lv against fetching the whole tile (N,);
        arrays over the live slots above lv (`loads`), `steps` their steps."""
        nest, n = self.nest, self.nest.n
        alone = count == 1                               # the step moves exactly one axis
        gradient = np.zeros(count.shape, np.int8)        # 2a + 1 forward, 2a + 2 backward, 0 no slide
        amounts = []
        for a, shift, nonzero in slides:
            amount = np.abs(shift)
            extent = nest.ext[t][a][lv].astype(self.itype)
            slide = alone & nonzero & (amount < extent)
            label = (shift < 0).view(np.int8)             # in place: no temporary per operation
            label += np.int8(2 * a + 1)
            label *= slide
            gradient += label
            amounts.append((a, amount, slide, extent))
        # the innermost non-unit loop's gradient, per mapping (0 where no loop steps)
        innermost = self.innermost[lv - 1]
        row = np.take(self.row_of, np.maximum(innermost, 0))
        inner = np.take(gradient.reshape(-1), row * n + np.arange(n)) * (innermost >= 0)
        credited = (gradient > 0) & ((inner == 0) | (gradient == inner))
        saved = np.zeros(n, np.int64)
        for a, amount, slide, extent in amounts:
            # words - words / extent x amount: the other axes' extents (their product, no
            # division) times what is not refetched
            others = product_of([e[lv] for b, e in enumerate(nest.ext[t]) if b != a] or [np.ones(n, np.int64)])
            np.subtract(extent, amount, out=amount)
            amount *= credited & slide
            saved += others * np.einsum("sn,sn->n", steps, amount)
        return saved
