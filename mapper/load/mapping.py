"""Mapping files: this project's mapping YAML (or the `mapping` list `evaluate --json` and
`search --json` print) read against an arch and a workload.

`mapping_from_dict` checks the structure: levels named once each, outermost first; loops over
the workload's dims with positive bounds, one temporal loop per dim and level; spatial fanout
within each level's mesh axes; keeps the level may hold (the outermost keeps every tensor);
stages within the level's max; every dim's bounds multiplying to its size (or, with
`padded: true`, above it by at most twice). `mapping_from_checked_dict` adds the checks across
files: the arch's keeps name the workload's tensors, and the kept tiles fit (`bind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..bind import check_fits, check_keeps
from ..errors import shown
from ..mapping import AXES, LevelMapping, Mapping
from ..spec import Arch, Level, Workload
from ..units import Where
from ..validate import fields, flag, name_list, positive_int
from .files import spec_data


@dataclass(frozen=True)
class KernelKind:
    """What `search --json`'s `kernel` key says about how the mapping runs, beside the mapping:
    its operands swapped (swap-AB) and its units CTA pairs. The mapping is priced so: on the
    swapped workload (`Workload.operands_swapped`), on the paired arch (`bind.kernel_arch`)."""
    swap_ab: bool = False
    cta_pair: bool = False


def mapping_data(spec) -> tuple[object, str]:
    """The data of a mapping preset, file (`-`: standard input) or dict, read once, and the name
    errors give it; a bare list of levels as a file's `mapping`."""
    if isinstance(spec, list):
        spec = {"mapping": spec}
    return spec_data("mappings", spec)


def kernel_kind(data, where: Where) -> KernelKind:
    """The mapping's `kernel` key (what `search --json` prints beside it), checked; none: a plain
    kernel."""
    kernel = data.get("kernel") if isinstance(data, dict) else None
    if kernel is None:
        return KernelKind()
    fields(kernel, where / "kernel", (), ("cluster", "mma", "swap_ab", "cta_pair"))
    return KernelKind(**{key: flag(kernel.get(key, False), where / "kernel" / key) for key in ("swap_ab", "cta_pair")})


def load_mapping(spec, arch: Arch, workload: Workload) -> Mapping:
    """A mapping from a preset name, a YAML file's path or the dict (or list) such a file
    holds, checked against the arch and workload, capacity included; a Mapping is checked the
    same way and returned."""
    if isinstance(spec, Mapping):
        check_keeps(arch, workload)
        check_fits(spec, arch, workload, Where("<Mapping>"))
        return spec
    data, name = mapping_data(spec)     # a mapping file may be the list of levels alone
    return mapping_from_checked_dict(data, arch, workload, Where(name))


def mapping_from_checked_dict(data, arch: Arch, workload: Workload, where: Where) -> Mapping:
    """`mapping_from_dict`, after the arch's keeps are checked against the workload's tensors,
    and with the kept tiles checked against each level's capacity."""
    check_keeps(arch, workload)
    mapping = mapping_from_dict(data, arch, workload, where)
    check_fits(mapping, arch, workload, where)
    return mapping


def mapping_from_dict(data, arch: Arch, workload: Workload, where: Where) -> Mapping:
    """Parse and check the structure of a mapping (factors, fanout, keeps, stages).

    Capacity is checked by the caller (`mapping_from_checked_dict`, `bind.check_fits`).
    A level the file does not name has no loops, keeps what it may and one stage.
    """
    arch = arch.for_workload(workload)          # the levels' role keeps, for this workload's tensors
    data, where, padded = _unwrapped(data, where)
    by_level = _entries_by_level(data, arch, where)
    product = [1] * len(workload.dims)          # per dim, the product of its bounds so far
    levels = []
    for lv, level in enumerate(arch.levels):
        entry, w = by_level.get(lv, ({}, where / level.name))
        levels.append(_level_mapping(entry, w, lv, level, arch, workload, product))
    _check_products(product, workload, where, padded)
    return Mapping(tuple(levels))


def _unwrapped(data, where: Where) -> tuple[object, Where, bool]:
    """The `mapping` list, where it is, and whether dims may be padded: a file is either the
    list itself or a mapping with a `mapping:` key beside `padded` (and what output adds)."""
    padded = False
    if isinstance(data, dict) and "mapping" in data:
        # `cost`, `search` and `kernel` are what `evaluate --json` and `search --json` print
        # beside the mapping: that output reads back as a mapping file (`kernel_kind`)
        fields(data, where, ("mapping",), ("arch", "workload", "padded", "tails", "cost", "search", "kernel"))
        padded = data.get("padded", False)
        if not isinstance(padded, bool):
            raise (where / "padded").error("expected true (dims may be padded) or false")
        data, where = data["mapping"], where / "mapping"
    if not isinstance(data, list):
        raise where.error("expected a list of levels, outermost first: "
                          "[{level: NAME, loops: [{dim: m, bound: 4}], ...}]")
    return data, where, padded


def _entries_by_level(data: list, arch: Arch, where: Where) -> dict[int, tuple[dict, Where]]:
    """Each entry under its level's index; levels named once each, outermost first."""
    names = arch.level_names
    by_level: dict[int, tuple[dict, Where]] = {}
    last = -1
    for i, entry in enumerate(data):
        w = where / i
        fields(entry, w, ("level",), ("loops", "spatial", "keep", "bypass", "stages"))
        if entry["level"] not in names:
            raise (w / "level").error(f"no level {shown(entry['level'])} in arch {arch.name} "
                                      f"(levels: {', '.join(names)})")
        lv = names.index(entry["level"])
        if lv <= last:
            raise (w / "level").error("levels must appear once each, outermost first "
                                      f"(arch order: {', '.join(names)})")
        last = lv
        by_level[lv] = (entry, w)
    return by_level


def _level_mapping(entry: dict, w: Where, lv: int, level: Level, arch: Arch, workload: Workload,
                   product: list[int]) -> LevelMapping:
    """One level's loops, spatial fanout, keep set and stages; multiplies its bounds into
    `product` (per dim)."""
    dims = workload.dims
    loops = entry.get("loops") or []
    spatial_raw = entry.get("spatial") or []
    for key, value in (("loops", loops), ("spatial", spatial_raw)):
        if not isinstance(value, list):
            raise (w / key).error("expected a list of {dim: NAME, bound: N} loops")
    temporal = tuple(_loop(item, w / "loops" / j, False, workload, product) for j, item in enumerate(loops))
    seen = [d for d, _ in temporal]
    for j, d in enumerate(seen):
        if seen.index(d) != j:
            raise (w / "loops" / j / "dim").error(
                f"dim {shown(dims[d])} appears twice among this level's temporal loops; "
                "a level has at most one temporal loop per dim")
    spatial = tuple(_loop(item, w / "spatial" / j, True, workload, product) for j, item in enumerate(spatial_raw))
    fanout = arch.fanout(lv)
    used = [math.prod(b for _, b, ax in spatial if ax == a) for a in (0, 1)]
    for a, axis_name in enumerate(AXES):
        if used[a] > fanout[a]:
            what = "CTAs in a block cluster" if a == 1 and level.clusters is not None else "instances"
            raise (w / "spatial").error(
                f"spatial fanout along {axis_name} is {used[a]}, above the {fanout[a]} {what} "
                f"this level fans out to along {axis_name}")
    if not arch.fits_fanout(lv, *used):
        raise (w / "spatial").error(
            f"{used[0]} block clusters of {used[1]} CTAs (spatial x by y), but the part runs at most "
            f"{int(level.clusters.schedulable(used[1]))} clusters of {used[1]} at once")
    keep_names = _keep_names(entry, w, lv, level, workload)
    stages = positive_int(entry.get("stages", 1), w / "stages")
    if stages > level.max_stages:
        raise (w / "stages").error(f"{stages} stages exceed the level's max_stages "
                                   f"({level.max_stages})")
    tensor_names = [t.name for t in workload.tensors]
    return LevelMapping(temporal, spatial, frozenset(tensor_names.index(n) for n in keep_names), stages)


def _loop(item, w: Where, spatial: bool, workload: Workload, product: list[int]):
    """(dim, bound) of a temporal loop, (dim, bound, axis) of a spatial one; multiplies the
    bound into `product`."""
    dims = workload.dims
    fields(item, w, ("dim", "bound"), ("axis",) if spatial else ())
    if item["dim"] not in dims:
        raise (w / "dim").error(f"no dim {shown(item['dim'])} in workload {workload.name} "
                                f"(dims: {', '.join(dims)})")
    d = dims.index(item["dim"])
    bound = positive_int(item["bound"], w / "bound", "a positive integer bound")
    product[d] *= bound
    if not spatial:
        return d, bound
    axis = item.get("axis", "x")
    if axis not in AXES:
        raise (w / "axis").error(f"expected 'x' or 'y', got {shown(axis)}")
    return d, bound, AXES.index(axis)


def _keep_names(entry: dict, w: Where, lv: int, level: Level, workload: Workload) -> list[str]:
    """The tensors a level keeps: `keep` as listed, all it may keep but `bypass`, or (neither
    given) all it may keep; the outermost level keeps every tensor."""
    tensor_names = [t.name for t in workload.tensors]
    allowed = [t for t in tensor_names if level.may_keep(t)]
    if "keep" in entry and "bypass" in entry:
        raise (w / "bypass").error("give either `keep` or `bypass`, not both")
    if "keep" in entry:
        keep_names = name_list(entry["keep"], w / "keep")
    elif "bypass" in entry:
        bypass = name_list(entry["bypass"], w / "bypass")
        for name in bypass:
            if name not in tensor_names:
                raise (w / "bypass").error(f"no tensor {shown(name)} (tensors: {', '.join(tensor_names)})")
        keep_names = [t for t in allowed if t not in bypass]
    else:
        keep_names = allowed
    for name in keep_names:
        if name not in tensor_names:
            raise (w / "keep").error(f"no tensor {shown(name)} (tensors: {', '.join(tensor_names)})")
        if name not in allowed:
            raise (w / "keep").error(f"level {level.name} may not keep {name} "
                                     f"(it keeps: {', '.join(allowed) or 'nothing'})")
    if lv == 0 and sorted(keep_names) != sorted(tensor_names):
        raise (w / "keep").error("the outermost level must keep every tensor")
    return keep_names


def _check_products(product: list[int], workload: Workload, where: Where, padded: bool) -> None:
    """Every dim's bounds multiply to its size, or (padded) above it by at most twice."""
    for d, name in enumerate(workload.dims):
        if padded and product[d] > 2 * workload.sizes[d]:
            raise where.error(f"the bounds of dim {name!r} multiply to {product[d]:,}, more than twice "
                              f"its size {workload.sizes[d]:,} (the most padding this tool handles)")
        if product[d] < workload.sizes[d] or (product[d] > workload.sizes[d] and not padded):
            hint = "" if padded or product[d] < workload.sizes[d] else \
                " (to pad the dim, say `padded: true` beside `mapping:`)"
            raise where.error(f"the bounds of dim {shown(name)} multiply to {product[d]}, "
                              f"but its size is {workload.sizes[d]}{hint}")
