"""Checks that an architecture, a workload, mapspace constraints and a mapping fit together.

Each file is validated alone by `load`; what one file names in another (the tensors an
architecture's levels keep, the dims of its native op shape, the level names, dims and tensors
of a mapspace file), and whether a mapping's kept tiles fit the levels' capacities, can only
be checked once they meet. A typo there would otherwise change the search silently (a level
keeping nothing, a constraint ignored), so each is refused with the file and key path. Sizes
the engine cannot split in bounded memory are refused here too, with the limit named.
"""
from __future__ import annotations

from . import tiles
from .constraints import ROLES, Constraints
from .cta_pair import paired, unpairable
from .errors import SpecError
from .factors import count_factorizations
from .limits import MAX_DIM_SPLITS
from .mapping import Mapping, to_table
from .roles import Roles, RolesError, arch_roles
from .spec import Arch, Workload
from .tails import dim_extents
from .units import Where

LEVEL_ALIASES = ("outermost", "innermost", "every")


def _arch_file(arch: Arch) -> str:
    return arch.file or f"arch {arch.name}"


def _mapspace_file(constraints: Constraints) -> str:
    return constraints.file or f"mapspace {constraints.name}"


def kernel_arch(arch: Arch, constraints: Constraints | None) -> Arch:
    """The architecture as the mapspace's kind of kernel runs on it: its units CTA pairs where
    it asks for them (`cta_pairs: true`, `cta_pair.paired`), which the arch must allow. What a
    result is priced and reported on, so search inputs and `Mapspace` both take it."""
    if constraints is None or not constraints.cta_pairs:
        return arch
    return paired_for(arch, Where(_mapspace_file(constraints)) / "cta_pairs", "use another mapspace")


def paired_for(arch: Arch, where: Where, otherwise: str) -> Arch:
    """`arch` with its units CTA pairs (`cta_pair.paired`), where `where` (a mapspace's or a
    mapping file's key) asks for them; refused there on an arch without them."""
    problem = unpairable(arch)
    if problem is not None:
        raise where.error(f"{problem}: {otherwise}")
    return paired(arch)


def check_together(arch: Arch, workload: Workload, constraints: Constraints | None = None) -> None:
    constraints = constraints or Constraints()
    check_keeps(arch, workload)
    roles = None
    if constraints.align_to_native:
        try:
            roles = arch_roles(arch, workload)
        except RolesError as exc:
            raise SpecError(_arch_file(arch), f"compute.native_shape.{exc.key}", exc.reason) from None
    check_constraint_names(arch, workload, constraints)
    _check_splits(arch, workload, constraints, roles)


def check_keeps(arch: Arch, workload: Workload) -> None:
    """Every tensor a level's `keeps` names is a tensor of the workload (else the level would
    silently hold nothing of it); a role it names (`output`) is the workload's by the one rule."""
    tensors = [t.name for t in workload.tensors]
    for i, level in enumerate(arch.levels):
        for name in sorted(set(level.keep_roles or level.keeps or ()) - set(ROLES)):
            if name not in tensors:
                raise SpecError(_arch_file(arch), f"levels[{i}].keeps",
                                f"no tensor {name!r} in workload {workload.name} (tensors: "
                                f"{', '.join(tensors)}; roles: {', '.join(ROLES)})")


def check_fits(mapping: Mapping, arch: Arch, workload: Workload, where: Where) -> None:
    """Every level's kept tiles, times its stages, within its capacity (per instance, as the
    mapspace's capacity pruning counts them: `tiles.kept_bytes`)."""
    table = to_table([mapping], len(workload.dims), len(workload.tensors))
    used = tiles.kept_bytes(arch, workload, tiles.tile_words(workload, table.factors),
                            table.keep, table.stages)[:, 0]
    for lv, level in enumerate(arch.levels):
        if not tiles.fits_level(level, used[lv]):
            kept = [workload.tensors[t].name for t in sorted(mapping.levels[lv].keep)]
            raise (where / level.name).error(
                f"the kept tiles ({', '.join(kept)}) x {mapping.levels[lv].stages} stage(s) take "
                f"{used[lv]:.0f} B, above the level's capacity of {level.capacity:.0f} B")
    for members in arch.capacity_groups:       # a level's sub-levels (`tensor_depths`) in its one capacity
        level = arch.levels[members[0]]
        together = tiles.group_bytes(used, members)
        if not tiles.fits_level(level, together):
            raise (where / level.name).error(
                f"the kept tiles of {', '.join(arch.levels[lv].name for lv in members)} take {together:.0f} B "
                f"together, above {level.group}'s capacity of {level.capacity:.0f} B")


def check_constraint_names(arch: Arch, workload: Workload, constraints: Constraints) -> None:
    """Every level, dim and tensor a mapspace file names is the architecture's or the
    workload's (a tensor may also be named by its role), refused naming that file and key."""
    where = _mapspace_file(constraints)
    tensors = [t.name for t in workload.tensors]
    for key, lc in constraints.levels:
        path = f"levels.{key}"
        if key not in arch.level_names and key not in LEVEL_ALIASES:
            raise SpecError(where, path, f"no level {key!r} in arch {arch.name} (levels: "
                            f"{', '.join(arch.level_names)}; or {', '.join(LEVEL_ALIASES)})")

        def dim(name, field):
            if name not in workload.dims:
                raise SpecError(where, f"{path}.{field}", f"no dim {name!r} in workload "
                                f"{workload.name} (dims: {', '.join(workload.dims)})")

        def tensor(name, field):
            if name not in tensors and name not in ROLES:
                raise SpecError(where, f"{path}.{field}", f"no tensor {name!r} in workload "
                                f"{workload.name} (tensors: {', '.join(tensors)}; roles: {', '.join(ROLES)})")

        for field in ("temporal", "spatial", "tile"):
            for name, _ in getattr(lc, field):
                dim(name, field)
        for name in lc.order or ():
            dim(name, "order")
        for name in lc.innermost_order or ():
            dim(name, "innermost_order")
        if lc.innermost_order is not None and len(set(lc.innermost_order)) != len(lc.innermost_order):
            raise SpecError(where, f"{path}.innermost_order", "expected each dim at most once")
        if lc.order is not None and sorted(lc.order) != sorted(workload.dims):
            raise SpecError(where, f"{path}.order", f"expected every dim once ({', '.join(workload.dims)})")
        for order in lc.forbid:
            for name in order:
                dim(name, "forbid")
        for name in lc.keep or ():
            tensor(name, "keep")
        if lc.stationary is not None:
            tensor(lc.stationary, "stationary")
    _check_stages(arch, constraints)


def _check_stages(arch: Arch, constraints: Constraints) -> None:
    """Each level a `stages` list applies to allows one of its counts (the outermost level is
    never buffered: its stages are always 1, whatever the file says)."""
    for lv in range(1, len(arch.levels)):
        lc = constraints.for_level(arch.level_names, lv)
        level = arch.levels[lv]
        if lc.stages and min(lc.stages) > level.max_stages:
            key = next(k for k, c in constraints.levels if c is lc)
            raise SpecError(_mapspace_file(constraints), f"levels.{key}.stages",
                            f"allows {', '.join(map(str, lc.stages))} stage(s), none within level "
                            f"{level.name}'s max_stages {level.max_stages} in {_arch_file(arch)}")


def _check_splits(arch: Arch, workload: Workload, constraints: Constraints, roles: Roles | None) -> None:
    """Each dim's table lists every way to split it over the slots; refuse one too long."""
    slots = len(arch.levels) + sum((fx > 1) + (fy > 1) for fx, fy in map(arch.fanout, range(len(arch.levels))))
    all_extents = dim_extents(arch, workload, constraints.factors, constraints.max_padding, roles)
    for d, (size, extents) in enumerate(zip(workload.sizes, all_extents)):
        count = sum(count_factorizations(e, slots) for e in extents)
        if count > MAX_DIM_SPLITS:
            raise SpecError(workload.file or f"workload {workload.name}", f"sizes.{workload.dims[d]}",
                            f"{size:,} has about {count:,} ways to split over the {slots} loop slots "
                            f"of {arch.name}, above the limit of {MAX_DIM_SPLITS:,} this tool "
                            "handles (a size with fewer prime factors, or fewer levels)")
