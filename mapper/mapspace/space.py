"""The `Mapspace` value: what it is built from (arch, workload, constraints), checked once
when it is made, its slots, padded extents, per-level keep/stage choices and per-dim tables.
What is done with it is free functions taking it, one module per job (tables, order tables,
counting, pruning, sampling, infeasible)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from functools import cached_property

from .. import depths
from ..bind import check_constraint_names, check_together, kernel_arch
from ..constraints import ROLES, Constraints, LevelConstraints, role_tensor
from ..cost.occupancy import gpu_levels
from ..errors import InfeasibleError, SpecError
from ..factors import count_factorizations
from ..mma import with_operands_for
from ..roles import Roles, arch_roles
from ..spec import Arch, Workload
from ..tails import dim_extents
from . import tables
from .common import SPATIAL_X, SPATIAL_Y, TEMPORAL, LevelChoices


class shared_by_parts:
    """A cached property that does not depend on keeps: built once, on first use, and shared
    by a space and every part of it (`Mapspace.part`), in the space's `shared` dict."""

    def __init__(self, build):
        self.build, self.name, self.__doc__ = build, build.__name__, build.__doc__

    def __get__(self, space, owner=None):
        if space is None:
            return self
        if self.name not in space.shared:
            space.shared[self.name] = self.build(space)
        return space.shared[self.name]


@dataclass(frozen=True, eq=False)
class Mapspace:
    """All legal mappings of `workload` on `arch` under `constraints`.

    Invariant: every table row it yields passes `cost.evaluate_many(...).valid` and its
    constraints; every valid mapping satisfying the constraints is yielded (tests check both
    on small cases by brute force).

    A value: nothing assigns to it once made. What is derived from it is cached: in `shared`
    what does not depend on keeps (factor tables, order classes), common to a space and its
    parts; in `own` what does (`counting.funnel`'s memo)."""

    arch: Arch
    workload: Workload
    constraints: Constraints | None = None
    # a part (`part`): per level, the one keep option of the whole space's it takes
    picks: tuple[int, ...] | None = None
    shared: dict = field(default_factory=dict, repr=False)
    own: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        if self.picks is not None:
            return      # a part, made by `part` from a space already checked
        object.__setattr__(self, "constraints", self.constraints or Constraints())
        # the architecture as the mapspace's kind of kernel runs on it (CTA pairs where it asks:
        # `bind.kernel_arch`), then the operands in the order its compute unit takes them
        # (swap-AB where the mapspace asks, `swap_operands`: a pair's m grain is twice one CTA's),
        # the space's workload, which its mappings are priced on
        kernel = kernel_arch(self.arch, self.constraints)
        object.__setattr__(self, "workload", with_operands_for(kernel, self.workload, self.constraints.swap_operands))
        # the compute unit's rate and native shape for this workload's operand dtypes, and
        # thread-block clusters only where the mapspace asks for them (`clusters: true`)
        arch = kernel.for_workload(self.workload)
        arch = arch if self.constraints.clusters else arch.without_clusters()
        # a level's capacity as the mapspace's kind of kernel can use it (`capacity` under a level)
        caps = [self.constraints.for_level(arch.level_names, lv).capacity for lv in range(len(arch.levels))]
        arch = arch.with_capacities(caps)
        check_constraint_names(arch, self.workload, self.constraints)     # named as the file names them
        # each tensor at its own depth in a level where the mapspace asks (`depths.split`): the
        # level as sub-levels in its one capacity, each with an entry of the constraints
        arch, constraints = depths.split(arch, self.workload, self.constraints)
        object.__setattr__(self, "arch", arch)
        object.__setattr__(self, "constraints", constraints)
        check_together(self.arch, self.workload, self.constraints)     # names across the files, sizes

    def part(self, picks: tuple[int, ...]) -> "Mapspace":
        """The part of this space where level lv keeps its option `picks[lv]`: the parts over
        every pick vector cover the space exactly, one keep vector per mapping. What does not
        depend on keeps (factor tables, order classes) is shared, not rebuilt."""
        if self.picks is not None:
            raise ValueError("a part of a part: take parts of the whole space")
        return replace(self, picks=tuple(picks))

    # ------------------------------------------------------------------ structure

    @cached_property
    def n_levels(self) -> int:
        return len(self.arch.levels)

    @cached_property
    def n_dims(self) -> int:
        return len(self.workload.dims)

    @cached_property
    def level_constraints(self) -> list[LevelConstraints]:
        return [self.constraints.for_level(self.arch.level_names, lv) for lv in range(self.n_levels)]

    @shared_by_parts
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

    @shared_by_parts
    def mirrored(self) -> tuple[bool, ...]:
        """Per level, whether its spatial split's two mesh axes are interchangeable: the same
        fanout on both, no block clusters (whose CTAs alone share, along y) and no constraint on
        one axis alone (`spatial_x`, `spatial_y`). The cost model sees such a split's axes only
        through the fanout each must fit, so swapping the level's x and y factors gives a
        mapping of the space of exactly the same cost: the walk prices one of the two
        (`search/fitting_children.py`)."""
        out = []
        for lv, lc in enumerate(self.level_constraints):
            fx, fy = self.arch.fanout(lv)
            out.append(fx == fy > 1 and self.arch.levels[lv].clusters is None and not lc.spatial_x
                       and not lc.spatial_y)
        return tuple(out)

    @shared_by_parts
    def roles(self) -> Roles | None:
        """Which dims play the compute unit's native operation shape (`roles.py`); None when the
        innermost tiles are not aligned to it (no native shape, or `align_to_native: false`)."""
        return arch_roles(self.arch, self.workload) if self.constraints.align_to_native else None

    @shared_by_parts
    def extents(self) -> list[tuple[int, ...]]:
        """Per dim, the extents it may take: its size, or padded ones (`tails.dim_extents`)."""
        return dim_extents(self.arch, self.workload, self.constraints.factors, self.constraints.max_padding,
                           self.roles)

    @shared_by_parts
    def raw_rows(self) -> list[int]:
        """Per dim, the rows of its raw table (every split of each of its extents over the
        slots), in closed form, before any is built: what setting the space up costs."""
        return [sum(count_factorizations(e, len(self.slots)) for e in extents) for extents in self.extents]

    @shared_by_parts
    def gpu_levels(self) -> tuple[int, int] | None:
        """(shared-memory level, register level) of a GPU, or None (see `cost.occupancy`)."""
        return gpu_levels(self.arch)

    @shared_by_parts
    def step_tables(self) -> dict[str, list]:
        """Per pruning step ("raw", "constraints", "divisibility"), the per-dim factorisation
        tables that survive it (`tables.pruned_tables`)."""
        return tables.pruned_tables(self)

    @property
    def tables_built(self) -> bool:
        """Whether the per-dim tables exist already (built once, shared by a space's parts)."""
        return "step_tables" in self.shared

    @property
    def dim_tables(self) -> list:
        """Per dim, the factorisation rows that survive the per-dim pruning, (M_d, K)."""
        return self.step_tables["divisibility"]

    @shared_by_parts
    def every_choice(self) -> tuple[LevelChoices, ...]:
        """Keep sets and stages each level of the whole space may take under the constraints."""
        tensors = self.workload.tensors
        out = []
        for lv, (level, lc) in enumerate(zip(self.arch.levels, self.level_constraints)):
            allowed = tuple(t for t, tensor in enumerate(tensors) if level.may_keep(tensor.name))
            if lv == 0:
                keeps = (tuple(range(len(tensors))),)
            elif level.group:       # a sub-level keeps one of its level's tensors, or none (`depths`)
                keeps = ((),) + tuple((t,) for t in self._group_tensors(lv))
            elif lc.keep is not None:
                # a set, in tensor order whatever order it was named in (`warm.admit` compares
                # a mapping's keeps in that order)
                keeps = (tuple(sorted(self.tensor_index(name, lv, "keep") for name in lc.keep)),)
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
        return tuple(out)

    def _group_tensors(self, lv: int) -> tuple[int, ...]:
        """The tensors sub-level lv's level may keep (`depths.group_tensors`)."""
        return depths.group_tensors(self.arch.levels[lv], self.level_constraints[lv], self.workload)

    @shared_by_parts
    def group_rules(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...], bool], ...]:
        """Per level split into sub-levels (`depths`): its sub-levels, the tensors they may keep,
        and whether they must keep all of them together (no `bypass`, or a fixed `keep`)."""
        out = []
        for members in self.arch.capacity_groups:
            lc = self.level_constraints[members[0]]
            out.append((members, self._group_tensors(members[0]), lc.keep is not None or not lc.bypass))
        return tuple(out)

    @cached_property
    def choices(self) -> tuple[LevelChoices, ...]:
        """Keep sets and stages each level may take: the whole space's, or a part's one keep set."""
        if self.picks is None:
            return self.every_choice
        return tuple(LevelChoices((c.keeps[i],), c.stages) for c, i in zip(self.every_choice, self.picks))

    # ------------------------------------------------------------------ names in the mapspace file

    def tensor_index(self, name: str, lv: int, key: str) -> int:
        """The tensor a mapspace file names at `levels.<level>.<key>` (a name or a role)."""
        names = [t.name for t in self.workload.tensors]
        if name in ROLES:
            return role_tensor(self.workload, name)
        if name not in names:
            raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.{key}",
                            f"no tensor {name!r} (tensors: {', '.join(names)}; roles: {', '.join(ROLES)})")
        return names.index(name)

    def dim_index(self, name: str, lv: int, key: str) -> int:
        """The dim a mapspace file names at `levels.<level>.<key>`."""
        if name not in self.workload.dims:
            raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.{key}",
                            f"no dim {name!r} (dims: {', '.join(self.workload.dims)})")
        return self.workload.dims.index(name)
