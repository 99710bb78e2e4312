"""The coupled checks, those that couple dims and so run on batches of the cross product:
spatial fanout, capacity per level, GPU occupancy; and, when they leave nothing, why."""
from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from .. import tails, tiles
from ..cost.occupancy import blocks_per_sm, gpu_levels
from ..cost.vectorised import fits_every_fanout
from ..errors import InfeasibleError
from ..mapping import MappingTable
from .common import STEPS, TEMPORAL
from .counting import Funnel


class PruningMixin:
    """Fanout, capacity and occupancy masks (`valid_mask`) and the explanation of an empty space
    (`require_nonempty`).

    Part of `Mapspace` (see `space`): it reads `arch`, `workload`, `constraints`, `n_levels`,
    `n_dims`, `level_constraints`, `slots`, `extents`, `choices` and the other mixins' methods."""

    def tile_words(self, factors: np.ndarray) -> list[np.ndarray]:
        """Tile words per tensor, each (L, N) (`tiles.tile_words`)."""
        return tiles.tile_words(self.workload, factors)

    def fanout_mask(self, factors: np.ndarray) -> np.ndarray:
        ok = fits_every_fanout(self.arch, factors)
        if self.constraints.min_utilization > 0:
            used = factors[:, 1:].prod(axis=(0, 1, 2))
            ok &= used >= self.constraints.min_utilization * self.arch.compute.instances
        return ok

    def _footprints(self, factors: np.ndarray) -> list[np.ndarray]:
        """Per level, bytes of one stage of each keep option: (options, N)."""
        words = self.tile_words(factors)
        return [tiles.option_bytes(level, self.workload, [w[lv] for w in words], choice.keeps, factors.shape[-1])
                for lv, (level, choice) in enumerate(zip(self.arch.levels, self.choices))]

    @cached_property
    def gpu_levels(self) -> tuple[int, int] | None:
        """(shared-memory level, register level) of a GPU, or None (see `cost.occupancy`)."""
        return gpu_levels(self.arch)

    def blocks_per_sm(self, smem_bytes: np.ndarray, rf_bytes: np.ndarray) -> np.ndarray:
        """Resident thread blocks per SM given one block's shared-memory and register bytes."""
        return blocks_per_sm(self.arch, smem_bytes, rf_bytes)

    def _nonunit_masks(self, factors: np.ndarray) -> np.ndarray:
        """(L, N) bitmask of the dims with a non-unit temporal loop at each level."""
        return ((factors[:, TEMPORAL] > 1) * (1 << np.arange(self.n_dims))[None, :, None]).sum(axis=1)

    def fragment_mask(self, factors: np.ndarray) -> np.ndarray:
        """Where a role of the native op shape is played by several dims (`roles.py`: a
        convolution's m = n.p.q), the product of their innermost tiles is a multiple of the
        role's native size, unless no product of their tiles can be (a convolution's
        k = 3.7.7): then the unit runs whole fragments of it, padding included
        (`tails.fragment_macs`). Single-dim roles are checked per dim
        (`TablesMixin.divisibility_mask`)."""
        return self.fragments_possible(factors[-1].prod(axis=0), factors.prod(axis=(0, 1)))

    def fragments_possible(self, spans: np.ndarray, extents: np.ndarray) -> np.ndarray:
        """(N,) whether a tile of `spans` ((D, N)) can hold an innermost tile meeting
        `fragment_mask` (exactly that, for the innermost tile itself): every divisor of a dim's
        span is a tile it may take below, so a fused role can be met iff the product of its
        dims' spans is a multiple of its native size. Tiles divide extents, so where the
        product of the extents (`extents`, (D, N)) is none, no tile is and none is asked."""
        ok = np.ones(spans.shape[-1], bool)
        roles = self.roles
        if roles is None or not roles.fused:
            return ok
        for dims, size in roles.fragments():
            if len(dims) > 1:
                tile, extent = spans[list(dims)].prod(axis=0), extents[list(dims)].prod(axis=0)
                ok &= (tile % size == 0) | (extent % size != 0)
        return ok

    @cached_property
    def _role_paddings(self) -> tuple[tuple[tuple[int, ...], int, float], ...]:
        """Per role, (dims, native size, the least ceil(T / size) x size / T over every product
        T of innermost tiles its dims' tables allow: 1 where some T is a multiple)."""
        out = []
        for dims, size in tails.fragment_roles(self.arch, self.workload):
            products = np.ones(1, np.int64)
            for d in dims:
                inner = np.unique(self.level_view(self.dim_tables[d])[0][:, -1])
                products = np.unique((products[:, None] * inner[None, :]).ravel())
            if len(products):
                out.append((dims, size, float(((-(-products // size) * size) / products).min())))
        return tuple(out)

    @cached_property
    def fragment_padding(self) -> float:
        """The least factor by which running whole fragments (`tails.fragment_macs`) raises any
        mapping's MACs: the product of the roles' least paddings (`_role_paddings`)."""
        return math.prod(least for _, _, least in self._role_paddings)

    def fragment_padding_within(self, spans: np.ndarray) -> np.ndarray:
        """(N,) the least padding (as `fragment_padding`) of a mapping whose innermost tile lies
        within `spans` ((D, N): a node's tile at its level): per role, where its dims' spans
        multiply to less than its native size, every innermost tile of it is one fragment,
        padded at least size / that product. A node that has given the role's dims to the
        levels above (a convolution's p and q split to one row per thread block) pays that."""
        out = np.ones(spans.shape[-1])
        for dims, size, least in self._role_paddings:
            most = spans[list(dims)].prod(axis=0)
            out *= np.maximum(least, np.where(most < size, size / np.maximum(most, 1), 1.0))
        return out

    def coupled_mask(self, factors: np.ndarray) -> np.ndarray:
        """The constraints that couple dims without a level's keeps or stages: the fragments of
        fused roles (`fragment_mask`) and the spatial fanout (`fanout_mask`)."""
        return self.fragment_mask(factors) & self.fanout_mask(factors)

    def valid_mask(self, table: MappingTable) -> np.ndarray:
        """Fragments, fanout, capacity and occupancy hold, and every level's loops have an order
        the constraints allow (per-dim constraints hold by construction; a mapspace may forbid
        every order of some loop sets, which the search tree, choosing the innermost order
        after the factors, and sampling meet only here)."""
        ok = self.coupled_mask(table.factors) & self.orders_allowed(table.factors)
        words = self.tile_words(table.factors)
        footprint = []
        for lv, level in enumerate(self.arch.levels):
            used = tiles.level_bytes(level, self.workload, [w[lv] for w in words], table.keep[lv], table.stages[lv])
            footprint.append(used)
            ok &= used <= level.capacity
        if self.gpu_levels is not None and self.constraints.min_occupancy > 1:
            smem_lv, rf_lv = self.gpu_levels
            ok &= self.blocks_per_sm(footprint[smem_lv], footprint[rf_lv]) >= self.constraints.min_occupancy
        return ok

    def orders_allowed(self, factors: np.ndarray) -> np.ndarray:
        """Per row, whether each level's set of non-unit temporal loops has an order class its
        constraints allow (every row, where no level's constraints leave a set without one)."""
        ok = np.ones(factors.shape[-1], bool)
        for lv, counts in enumerate(self._order_counts_constrained):
            if not counts.all():
                masks = ((factors[lv, TEMPORAL] > 1) * (1 << np.arange(self.n_dims))[:, None]).sum(axis=0)
                ok &= counts[masks] > 0
        return ok

    # ------------------------------------------------------------------ why nothing fits

    def require_nonempty(self, funnel: Funnel | None = None) -> Funnel:
        """The funnel, or an InfeasibleError saying which step removed the last candidates,
        by how much, and what to relax."""
        funnel = funnel or self.funnel()
        previous = funnel.size
        for step in STEPS:
            if funnel.after.get(step, 1) == 0:
                raise InfeasibleError(f"no mapping of {self.workload.name} fits {self.arch.name}: "
                                      f"the {step} step removed the last {previous:,} candidates. "
                                      + self._why(step))
            previous = funnel.after[step]
        return funnel

    def _why(self, step: str) -> str:
        names = self.workload.dims
        if step in ("constraints", "divisibility"):
            key = "constraints" if step == "constraints" else "divisibility"
            empty = [names[d] for d, t in enumerate(self._tables[key]) if len(t) == 0]
            if step == "constraints" and not empty:
                return self._why_no_order()
            if step == "constraints":
                return (f"No factorisation of dim(s) {', '.join(empty)} meets the bounds of mapspace "
                        f"'{self.constraints.name}': widen its temporal/spatial/tile ranges.")
            return self._why_not_aligned(empty)
        if step == "fanout":
            best = max(self.arch.fanout_units(lv) for lv in range(self.n_levels))
            return (f"Spatial splits must use at least {self.constraints.min_utilization:.0%} of the "
                    f"{self.arch.compute.instances} compute units and fit each level's fanout "
                    f"(largest {best}): lower min_utilization.")
        lines = []
        for lv, (level, choice) in enumerate(zip(self.arch.levels, self.choices)):
            smallest = self.smallest_footprint(lv)
            if smallest > level.capacity:
                lines.append(f"level {level.name}: its smallest possible tiles take {smallest:,.0f} B "
                             f"x {min(choice.stages)} stage(s), above its capacity of {level.capacity:,.0f} B")
        if step == "capacity":
            hint = "; ".join(lines) or "no single level is too small, but no combination fits all levels"
            return hint + ": allow bypass there (a mapspace with `bypass: true`), fewer stages, or a larger level."
        smem, rf = self.gpu_levels
        blocks = self.blocks_per_sm(np.array([self.smallest_footprint(smem)]), np.array([self.smallest_footprint(rf)]))[0]
        return (f"At most {blocks:.0f} blocks fit per SM with the smallest tiles, below min_occupancy "
                f"{self.constraints.min_occupancy}: lower min_occupancy or the stages.")

    def _why_no_order(self) -> str:
        """The levels whose order constraints allow no order of any set of loops, with the
        mapspace file and key that say so."""
        names = self.arch.level_names
        blocked = [lv for lv, counts in enumerate(self._order_counts_constrained) if not counts.any()]
        parts = []
        for lv in blocked:
            lc = self.level_constraints[lv]
            key = next((k for k, c in self.constraints.levels if c is lc), names[lv])
            parts.append(f"{self.constraints.file or 'mapspace ' + self.constraints.name}: levels.{key}: "
                         f"its order constraints (order, innermost_order, stationary, forbid) allow no loop "
                         f"order at level {names[lv]}, not even for a level without loops")
        return ("; ".join(parts) or "No combination of the levels' loop orders meets the mapspace's order "
                "constraints") + ": forbid fewer orders."

    def _why_not_aligned(self, empty: list[str]) -> str:
        """Why no innermost tile is a multiple of the native op shape: the dims alone in a role
        with no such row (`empty`), else the roles several dims share."""
        roles, names = self.roles, self.workload.dims
        native = dict(zip(roles.names, roles.sizes))
        if empty:
            role_of = {names[dims[0]]: name for name, dims in zip(roles.names, roles.dims) if len(dims) == 1}
            detail = ", ".join(f"{n} (size {self.workload.sizes[names.index(n)]}, "
                               + ("" if role_of[n] == n else f"role {role_of[n]}, ") + f"native {native[role_of[n]]})"
                               for n in empty)
            what = f"The innermost tile of {detail} cannot be a multiple of the native operation shape"
        else:
            fused = [(name, dims) for name, dims in zip(roles.names, roles.dims) if len(dims) > 1]
            detail = ", ".join(f"{name} = {'·'.join(names[d] for d in dims)} (sizes "
                               f"{' x '.join(str(self.workload.sizes[d]) for d in dims)}, native {native[name]})"
                               for name, dims in fused)
            what = f"No product of the innermost tiles of {detail} is a multiple of the native operation shape"
        return what + (": use factors: auto (on a GPU, a masked ragged tail), factors: imperfect (padding) "
                       "or align_to_native: false.")

    def smallest_footprint(self, lv: int) -> float:
        """Bytes per instance of the smallest tiles level lv can hold (one stage x its fewest
        stages), over every keep choice: each dim at its smallest tile there."""
        smallest_span = []
        for rows in self.dim_tables:
            tile = self.level_view(rows)[2][:, lv] if len(rows) else np.array([1])
            smallest_span.append(int(tile.min()))
        best = math.inf
        for keep in self.choices[lv].keeps:
            words = sum(tiles.words(self.workload.tensors[t], smallest_span)
                        * self.arch.levels[lv].word_bytes(self.workload.tensors[t])
                        for t in keep)
            best = min(best, words)
        return best * min(self.choices[lv].stages)
