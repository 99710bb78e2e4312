"""The `Mapspace` class: what it is built from (arch, workload, constraints), its slots,
padded extents and per-level keep/stage choices. Everything else comes from one mixin per
job (tables, order classes, counting, pruning, sampling)."""
from __future__ import annotations

import itertools
from functools import cached_property

from ..bind import check_together
from ..constraints import ROLES, Constraints
from ..errors import InfeasibleError, SpecError
from ..factors import count_factorizations
from ..roles import Roles, arch_roles
from ..tails import dim_extents
from ..spec import Arch, Workload
from .common import SPATIAL_X, SPATIAL_Y, TEMPORAL, LevelChoices
from .counting import CountingMixin
from .order_tables import OrderTablesMixin
from .pruning import PruningMixin
from .sampling import SamplingMixin
from .tables import TablesMixin


# what `Mapspace.with_keeps` shares between a space and its parts: nothing here depends on keeps
_KEEP_FREE = ("arch", "workload", "constraints", "n_levels", "n_dims", "level_constraints", "slots",
              "extents", "_tables", "gpu_levels", "_order_counts_constrained", "_order_array_cache", "roles",
              "fragment_padding")


class Mapspace(TablesMixin, OrderTablesMixin, CountingMixin, PruningMixin, SamplingMixin):
    """All legal mappings of `workload` on `arch` under `constraints`.

    Invariant: every table row it yields passes `cost.evaluate_many(...).valid` and its
    constraints; every valid mapping satisfying the constraints is yielded (tests check both
    on small cases by brute force)."""

    stop = None     # optional callable: once it returns True, counts fall back to estimates

    def __init__(self, arch: Arch, workload: Workload, constraints: Constraints | None = None):
        # the compute unit's rate and native shape for this workload's operand dtypes
        self.arch, self.workload = arch.for_workload(workload), workload
        arch = self.arch
        self.constraints = constraints or Constraints()
        self.n_levels, self.n_dims = len(arch.levels), len(workload.dims)
        check_together(arch, workload, self.constraints)     # names across the files, sizes
        self.level_constraints = [self.constraints.for_level(arch.level_names, lv)
                                  for lv in range(self.n_levels)]

    # ------------------------------------------------------------------ structure

    @cached_property
    def slots(self) -> list[tuple[int, int]]:
        """(level, kind) slots a dim's factors may go to; spatial only where there is fanout."""
        out = [(lv, TEMPORAL) for lv in range(self.n_levels)]
        for lv in range(self.n_levels):
            fx, fy = self.arch.fanout(lv)
            if fx > 1:
                out.append((lv, SPATIAL_X))
            if fy > 1:
                out.append((lv, SPATIAL_Y))
        return out

    @cached_property
    def roles(self) -> Roles | None:
        """Which dims play the compute unit's native operation shape (`roles.py`); None when the
        innermost tiles are not aligned to it (no native shape, or `align_to_native: false`)."""
        return arch_roles(self.arch, self.workload) if self.constraints.align_to_native else None

    @cached_property
    def extents(self) -> list[tuple[int, ...]]:
        """Per dim, the extents it may take: its size, or padded ones (`tails.dim_extents`)."""
        return dim_extents(self.arch, self.workload, self.constraints.factors, self.constraints.max_padding,
                           self.roles)

    @cached_property
    def raw_rows(self) -> list[int]:
        """Per dim, the rows of its raw table (every split of each of its extents over the
        slots), in closed form, before any is built: what setting the space up costs."""
        return [sum(count_factorizations(e, len(self.slots)) for e in extents) for extents in self.extents]

    @cached_property
    def choices(self) -> list[LevelChoices]:
        """Keep sets and stages each level may take under the constraints."""
        tensors = self.workload.tensors
        out = []
        for lv, (level, lc) in enumerate(zip(self.arch.levels, self.level_constraints)):
            allowed = tuple(t for t, tensor in enumerate(tensors) if level.may_keep(tensor.name))
            if lv == 0:
                keeps = (tuple(range(len(tensors))),)
            elif lc.keep is not None:
                # a set, in tensor order whatever order it was named in (`warm.admit` compares
                # a mapping's keeps in that order)
                keeps = (tuple(sorted(self._tensor_index(name, lv, "keep") for name in lc.keep)),)
            elif lc.bypass:
                keeps = tuple(c for r in range(len(allowed) + 1) for c in itertools.combinations(allowed, r))
            else:
                keeps = (allowed,)
            stages = tuple(s for s in (lc.stages or range(1, level.max_stages + 1)) if s <= level.max_stages)
            if lv == 0:     # the outermost level is never filled: buffering it changes nothing
                stages = (1,)
            if not stages:
                raise InfeasibleError(f"level {level.name}: no allowed stage count within max_stages "
                                      f"{level.max_stages} (constraints allow {lc.stages})")
            out.append(LevelChoices(keeps, stages))
        return out

    def with_keeps(self, picks: tuple[int, ...]) -> "Mapspace":
        """The part of this space where level lv keeps its option `picks[lv]`: the parts over
        every pick vector cover the space exactly, one keep vector per mapping. What does not
        depend on keeps (factor tables, order classes) is shared, not rebuilt."""
        self.dim_tables                                     # build the shared tables once
        self.__dict__.setdefault("_order_array_cache", {})
        part = Mapspace.__new__(Mapspace)
        part.__dict__.update({k: v for k, v in self.__dict__.items() if k in _KEEP_FREE})
        part.__dict__["choices"] = [LevelChoices((c.keeps[i],), c.stages) for c, i in zip(self.choices, picks)]
        return part

    def _tensor_index(self, name: str, lv: int, key: str) -> int:
        names = [t.name for t in self.workload.tensors]
        if name in ROLES:
            inputs = [i for i, t in enumerate(self.workload.tensors) if not t.is_output]
            return {"output": self.workload.output, "input": inputs[0],
                    "weight": inputs[min(1, len(inputs) - 1)]}[name]
        if name not in names:
            raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.{key}",
                            f"no tensor {name!r} (tensors: {', '.join(names)}; roles: {', '.join(ROLES)})")
        return names.index(name)

    def _dim_index(self, name: str, lv: int, key: str) -> int:
        if name not in self.workload.dims:
            raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.{key}",
                            f"no dim {name!r} (dims: {', '.join(self.workload.dims)})")
        return self.workload.dims.index(name)
