"""Why a mapspace is empty: the pruning step that removed its last candidates, by how much,
and what to relax, named by the file and key that say so."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from .. import tiles
from ..errors import InfeasibleError
from . import counting, order_tables, pruning
from .common import STEPS
from .counting import Funnel

if TYPE_CHECKING:
    from .space import Mapspace


def require_nonempty(space: Mapspace, funnel: Funnel | None = None,
                     stop: Callable[[], bool] | None = None) -> Funnel:
    """The funnel (counted here, under `stop`, when not given: `counting.funnel`), or an
    InfeasibleError saying which step removed the last candidates, by how much, and what to
    relax."""
    funnel = funnel or counting.funnel(space, stop=stop)
    previous = funnel.size
    for step in STEPS:
        if funnel.after.get(step, 1) == 0:
            raise InfeasibleError(f"no mapping of {space.workload.name} fits {space.arch.name}: "
                                  f"the {step} step removed the last {previous:,} candidates. "
                                  + _why(space, step))
        previous = funnel.after[step]
    return funnel


def _why(space: Mapspace, step: str) -> str:
    names = space.workload.dims
    if step in ("constraints", "divisibility"):
        key = "constraints" if step == "constraints" else "divisibility"
        empty = [names[d] for d, t in enumerate(space.step_tables[key]) if len(t) == 0]
        if step == "constraints" and not empty:
            return _why_no_order(space)
        if step == "constraints":
            return (f"No factorisation of dim(s) {', '.join(empty)} meets the bounds of mapspace "
                    f"'{space.constraints.name}': widen its temporal/spatial/tile ranges.")
        return _why_not_aligned(space, empty)
    if step == "fanout":
        best = max(space.arch.fanout_units(lv) for lv in range(space.n_levels))
        return (f"Spatial splits must use at least {space.constraints.min_utilization:.0%} of the "
                f"{space.arch.compute.instances} compute units and fit each level's fanout "
                f"(largest {best}): lower min_utilization.")
    lines = []
    for lv, (level, choice) in enumerate(zip(space.arch.levels, space.choices)):
        smallest = pruning.smallest_footprint(space, lv)
        if not tiles.fits_level(level, smallest):
            lines.append(f"level {level.name}: its smallest possible tiles take {smallest:,.0f} B "
                         f"x {min(choice.stages)} stage(s), above its capacity of {level.capacity:,.0f} B")
    if step == "capacity":
        hint = "; ".join(lines) or "no single level is too small, but no combination fits all levels"
        return hint + ": allow bypass there (a mapspace with `bypass: true`), fewer stages, or a larger level."
    smem, rf = space.gpu_levels
    blocks = pruning.blocks_per_sm(space, np.array([pruning.smallest_footprint(space, smem)]),
                                   np.array([pruning.smallest_footprint(space, rf)]))[0]
    return (f"At most {blocks:.0f} blocks fit per SM with the smallest tiles, below min_occupancy "
            f"{space.constraints.min_occupancy}: lower min_occupancy or the stages.")


def _why_no_order(space: Mapspace) -> str:
    """The levels whose order constraints allow no order of any set of loops, with the
    mapspace file and key that say so."""
    names = space.arch.level_names
    blocked = [lv for lv, counts in enumerate(order_tables.constrained_order_counts(space)) if not counts.any()]
    parts = []
    for lv in blocked:
        lc = space.level_constraints[lv]
        key = next((k for k, c in space.constraints.levels if c is lc), names[lv])
        parts.append(f"{space.constraints.file or 'mapspace ' + space.constraints.name}: levels.{key}: "
                     f"its order constraints (order, innermost_order, stationary, forbid) allow no loop "
                     f"order at level {names[lv]}, not even for a level without loops")
    return ("; ".join(parts) or "No combination of the levels' loop orders meets the mapspace's order "
            "constraints") + ": forbid fewer orders."


def _why_not_aligned(space: Mapspace, empty: list[str]) -> str:
    """Why no innermost tile is a multiple of the native op shape: the dims alone in a role
    with no such row (`empty`), else the roles several dims share."""
    roles, names = space.roles, space.workload.dims
    native = dict(zip(roles.names, roles.sizes))
    if empty:
        role_of = {names[dims[0]]: name for name, dims in zip(roles.names, roles.dims) if len(dims) == 1}
        detail = ", ".join(f"{n} (size {space.workload.sizes[names.index(n)]}, "
                           + ("" if role_of[n] == n else f"role {role_of[n]}, ") + f"native {native[role_of[n]]})"
                           for n in empty)
        what = f"The innermost tile of {detail} cannot be a multiple of the native operation shape"
    else:
        fused = [(name, dims) for name, dims in zip(roles.names, roles.dims) if len(dims) > 1]
        detail = ", ".join(f"{name} = {'·'.join(names[d] for d in dims)} (sizes "
                           f"{' x '.join(str(space.workload.sizes[d]) for d in dims)}, native {native[name]})"
                           for name, dims in fused)
        what = f"No product of the innermost tiles of {detail} is a multiple of the native operation shape"
    return what + (": use factors: auto (on a GPU, a masked ragged tail), factors: imperfect (padding) "
                   "or align_to_native: false.")
