"""Each tensor at its own depth within a level (a mapspace's `tensor_depths: true`).

Elsewhere a level holds one tile of each tensor it keeps, under all of its loops. AccelForge's
storage nodes (LoopTree) let each tensor sit at its own depth among one level's loops: a buffer
may hold an output across a k loop, accumulating there, while an input sits under that loop,
its tile smaller by k's factor, and the capacity freed buys larger tiles elsewhere.

Searched here as that level split into sub-levels, one per tensor it may keep, outermost first,
each with its own loops (`split`): a tensor kept at sub-level j has the loops of the sub-levels
above j over its tile. The sub-levels are one memory (`Level.group`):
- their tiles, times their stages, share its capacity (`tiles.fits`, `pruning.valid_mask`);
- it leaks, and takes area, once (the first sub-level's figures; the others' are 0);
- they move their bytes through its one port: each takes the time of all their traffic under
  its bandwidths (`Arch.one_memory`, the cost model's level times);
- an access at any of them costs its energies, and nothing moves between them (no fanout: the
  levels below read a tensor where it is kept, as they read any bypassed tensor from above).

A mapping of the space keeps each tensor at one sub-level at most, the sub-levels that keep
first, and, where the level must keep its tensors (no `bypass`), each of them somewhere among
them (`keeps_in_groups`); a sub-level that keeps nothing has no loops (`idle_loops`). Both are
part of `pruning.valid_mask`, the parts walk only such keep vectors, and the search tree prunes
by them. Two tensors at the same depth are two sub-levels with no loops between them; the
space with every tensor of the level at one depth (`merged`) is contained in this one
(`lifted`), and its optimum is the joint search's first incumbent here.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .constraints import ROLES, Constraints, LevelConstraints, role_tensor
from .errors import SpecError
from .mapping import LevelMapping, Mapping
from .spec import Arch, Workload

SEPARATOR = "."        # a sub-level's name: the level's, then its position from 1 (GlobalBuffer.2)


def split(arch: Arch, workload: Workload, constraints: Constraints) -> tuple[Arch, Constraints]:
    """`arch` with every level whose constraints ask for `tensor_depths` replaced by its
    sub-levels, one per tensor of `workload` it may keep (none where it may keep one or none:
    then a depth changes nothing), and `constraints` with an entry per sub-level (the level's
    own, its spatial bounds on the last sub-level only, which holds its fanout). Refused, naming
    the mapspace file's key, where the sub-levels could not be priced as one memory."""
    names = arch.level_names
    levels, entries = [], []
    for lv, level in enumerate(arch.levels):
        lc = constraints.for_level(names, lv)
        count = len(group_tensors(level, lc, workload))
        # `every` asks for the levels between the outermost and the innermost
        if (not lc.tensor_depths or count < 2
                or (lv in (0, len(arch.levels) - 1) and _key(constraints, lc) == "every")):
            levels.append(level)
            continue
        _check_splittable(arch, lv, constraints, lc)
        for i in range(count):
            last = i == count - 1
            levels.append(dataclasses.replace(
                level, name=f"{level.name}{SEPARATOR}{i + 1}", group=level.name,
                leak=level.leak if i == 0 else 0.0,
                area=level.area if i == 0 or level.area is None else 0.0))
            entries.append((levels[-1].name, dataclasses.replace(
                lc, tensor_depths=False, **({} if last else dict(spatial=(), spatial_x=(), spatial_y=())))))
    if not entries:
        return arch, constraints
    split_names = {level.group for level in levels if level.group}
    kept = tuple((key, lc) for key, lc in constraints.levels if key not in split_names)
    return (dataclasses.replace(arch, levels=tuple(levels)),
            dataclasses.replace(constraints, levels=tuple(entries) + kept))


def group_tensors(level, lc: LevelConstraints, workload: Workload) -> tuple[int, ...]:
    """The tensors a level split into sub-levels (or one of them) may keep, in tensor order:
    those its mapspace entry fixes (names or roles, checked by `bind` before), else those the
    level may keep."""
    if lc.keep is not None:
        names = [t.name for t in workload.tensors]
        return tuple(sorted({role_tensor(workload, name) if name in ROLES else names.index(name)
                             for name in lc.keep if name in ROLES or name in names}))
    return tuple(t for t, tensor in enumerate(workload.tensors) if level.may_keep(tensor.name))


def searched_arch(arch: Arch, workload: Workload, constraints: Constraints) -> Arch:
    """The architecture a search's mappings are reported and emitted on: `arch` for the
    space's workload (`Arch.for_workload`), its levels split where the mapspace asks."""
    return split(arch.for_workload(workload), workload, constraints)[0]


def named_in(arch: Arch, workload: Workload, data, file: str) -> Arch:
    """`arch` split where a mapping file's levels name sub-levels (`GlobalBuffer.1` ... for
    GlobalBuffer, as a search under `tensor_depths` reports them): what such a mapping is
    priced on again (`mapper evaluate`, a warm start). `arch` itself where none does."""
    levels = data.get("mapping") if isinstance(data, dict) else data
    # only well-formed names: the mapping's reader says what is wrong with the rest
    names = {level["level"] for level in levels if isinstance(level, dict) and isinstance(level.get("level"), str)
             } if isinstance(levels, list) else set()
    wanted = tuple((level.name, LevelConstraints(tensor_depths=True)) for level in arch.levels
                   if f"{level.name}{SEPARATOR}1" in names)
    if not wanted:
        return arch
    return split(arch, workload, Constraints(name="tensor depths", levels=wanted, file=file))[0]


def _key(constraints: Constraints, lc: LevelConstraints) -> str:
    """The key of the mapspace file's `levels` that gave a level its constraints `lc`."""
    return next(key for key, c in constraints.levels if c is lc)


def _check_splittable(arch: Arch, lv: int, constraints: Constraints, lc: LevelConstraints) -> None:
    level = arch.levels[lv]
    problem = None
    if lv == 0:
        problem = "the outermost level holds every tensor whole: its depths change nothing"
    elif lv == len(arch.levels) - 1:
        problem = "the innermost level's loops are the compute units' own tiles: split a level above it"
    elif arch.gpu is not None:
        problem = "a GPU's per-CTA levels (occupancy, the MMA's operands) are not modelled as sub-levels yet"
    elif level.latency:
        problem = (f"level {level.name} has a latency, which its sub-levels' fetches would share: not modelled "
                   "yet (levels without one only)")
    if problem is not None:
        key = _key(constraints, lc)
        raise SpecError(constraints.file or f"mapspace {constraints.name}", f"levels.{key}.tensor_depths",
                        f"not on level {level.name} of {arch.name}: {problem}")


def keeps_in_groups(keep: np.ndarray, rules, decided: int | None = None) -> np.ndarray:
    """(N,) whether each level split into sub-levels keeps its tensors as a mapping of this
    space does: each at one sub-level at most, the sub-levels that keep one first, and all of
    them where it must keep them all. `keep` (L, T, N); `rules` per level split (its
    sub-levels, the tensors they may keep, whether it must keep them all: `Mapspace.group_rules`);
    with `decided`, only the levels down to it are known (a node of the search tree): what
    they keep so far."""
    ok = np.ones(keep.shape[-1], bool)
    for members, tensors, must_keep_all in rules:
        known = [lv for lv in members if decided is None or lv <= decided]
        if not known:
            continue
        must_keep_all = must_keep_all and len(known) == len(members)
        held = keep[known]                                          # (members, T, N)
        ok &= (held.sum(axis=0) <= 1).all(axis=0)
        keeps_some = held.any(axis=1)                               # (members, N)
        ok &= ~(~keeps_some[:-1] & keeps_some[1:]).any(axis=0)
        if must_keep_all:
            ok &= held.any(axis=0)[list(tensors)].all(axis=0)
    return ok


def one_depth(options, rules) -> bool:
    """Whether one keep vector (per level, the tensors it keeps) keeps at most one tensor in
    each level split into sub-levels: its mappings are then exactly those of the space with
    every tensor at one depth (`merged`) that keep that tensor or none there (its one sub-level
    that keeps holds every loop of the level, the others none: `idle_loops`)."""
    return all(sum(len(options[lv]) for lv in members) <= 1 for members, _, _ in rules)


def canonical(options, rules, n_tensors: int) -> bool:
    """Whether one keep vector (per level, the tensors it keeps) is of this space
    (`keeps_in_groups`)."""
    keep = np.zeros((len(options), n_tensors, 1), bool)
    for lv, option in enumerate(options):
        keep[lv, list(option), 0] = True
    return bool(keeps_in_groups(keep, rules)[0])


def idle_loops(arch: Arch, lv: int, temporal: np.ndarray, holds: np.ndarray, group_holds: np.ndarray) -> np.ndarray:
    """(N,) where sub-level lv's temporal loops (`temporal`, (D, N)) are not of this space: a
    sub-level that keeps nothing (`holds` (N,) False; only those below the last that keeps, in
    a canonical keep vector) has none, for they would sit between the same two storage nodes
    as that one's loops, a second loop of a dim there (a level has one per dim, and the space
    would hold most nests many times over); except the last sub-level where none keeps
    anything (`group_holds` False): its loops are then the level's, as a level that bypasses
    every tensor has them."""
    idle = ~holds & (group_holds if _last_of_group(arch, lv) else True)
    return idle & (temporal > 1).any(axis=0)


def _last_of_group(arch: Arch, lv: int) -> bool:
    """Whether sub-level lv is the last of its level's (the one that holds its fanout)."""
    return lv + 1 == len(arch.levels) or arch.levels[lv + 1].group != arch.levels[lv].group


def loops_in_groups(arch: Arch, factors: np.ndarray, keep: np.ndarray, decided: int | None = None) -> np.ndarray:
    """(N,) no sub-level that keeps nothing has loops it may not (`idle_loops`), over a table's
    `factors` (L, 3, D, N) and `keep` (L, T, N); with `decided`, only the levels whose loops a
    node of the search tree has decided (those above it)."""
    ok = np.ones(keep.shape[-1], bool)
    for members in arch.capacity_groups:
        known = [lv for lv in members if decided is None or lv < decided]
        if not known:
            continue
        holds = keep[list(members)].any(axis=1)                       # (members, N)
        group_holds = holds.any(axis=0)
        for i, lv in enumerate(members):
            if lv in known:
                ok &= ~idle_loops(arch, lv, factors[lv, 0], holds[i], group_holds)
    return ok


def merged(arch: Arch, constraints: Constraints) -> tuple[Arch, Constraints]:
    """The inverse of `split`: each level's sub-levels one level again (the last's, which
    holds the fanout, under the level's name, with the first's leakage and area) and their
    constraints its own, without `tensor_depths`: the space of mappings that keep every tensor
    of a level at one depth, which the split space contains (`lifted`)."""
    levels, entries, seen = [], [], set()
    for members in arch.capacity_groups:
        entries.append((arch.levels[members[0]].group, constraints.for_level(arch.level_names, members[-1])))
        seen.update(arch.levels[lv].name for lv in members)
    for lv, level in enumerate(arch.levels):
        if not level.group:
            levels.append(level)
        elif _last_of_group(arch, lv):
            head = arch.levels[arch.one_memory(lv)[0]]
            levels.append(dataclasses.replace(level, name=level.group, group="", leak=head.leak, area=head.area))
    kept = tuple((key, lc) for key, lc in constraints.levels if key not in seen)
    return dataclasses.replace(arch, levels=tuple(levels)), dataclasses.replace(constraints, levels=tuple(entries) + kept)


def lifted(mapping: Mapping, arch: Arch) -> Mapping:
    """A mapping of `merged(arch)`'s space as a mapping of `arch`'s, the same loop nest: a
    level's kept tensors, in tensor order, at its first sub-levels, its loops under the last
    of them that keeps (under the last sub-level where it keeps none), its fanout from the
    last sub-level."""
    out, plain = [], iter(mapping.levels)
    lv = 0
    while lv < len(arch.levels):
        level = arch.levels[lv]
        own = next(plain)
        if not level.group:
            out.append(own)
            lv += 1
            continue
        members = arch.one_memory(lv)         # lv is the first of them
        kept = sorted(own.keep)
        loops_at = len(kept) - 1 if kept else len(members) - 1
        for i, _ in enumerate(members):
            out.append(LevelMapping(temporal=own.temporal if i == loops_at else (),
                                    spatial=own.spatial if i == len(members) - 1 else (),
                                    keep=frozenset(kept[i:i + 1]), stages=own.stages))
        lv += len(members)
    return Mapping(tuple(out))
