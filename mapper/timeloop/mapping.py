"""Timeloop mapping files <-> this project's mappings.

Timeloop writes one directive per (target level, type): `temporal` and `spatial` directives give
`factors` for every dim and a `permutation` written innermost first; a spatial directive's
`split` says how many of its permutation's dims (from the front) go along the mesh's X axis, the
rest along Y; `datatype` (or `bypass`) directives list the data spaces a level `keep`s and
`bypass`es. Spatial loops at a Timeloop dummy level that was folded into the level above
(arch.py) become that level's spatial loops, and the export puts them back on the dummy.
"""
from __future__ import annotations

from ..errors import SpecError, shown
from ..mapping import AXES, Mapping
from ..spec import Arch, Workload
from ..units import Where
from ..validate import name_list
from .arch import ArchImport
from .yamlio import integer, parse_factors, parse_permutation

DIRECTIVES = ("temporal", "spatial", "datatype", "bypass", "dataspace")


def is_mapping(data) -> bool:
    """A Timeloop mapping: a `mapping` list whose entries name a `target` (ours name a `level`)."""
    entries = data.get("mapping") if isinstance(data, dict) else None
    return (isinstance(entries, list) and bool(entries)
            and all(isinstance(e, dict) and "target" in e for e in entries))


def translate(entries: list, where: Where, arch: Arch, workload: Workload, ctx: ArchImport | None,
              notes: list[str]) -> dict:
    """Our mapping YAML dict ({mapping: [...]}) for a Timeloop mapping's directives."""
    per_level = _read_directives(entries, where, arch, workload, ctx)
    return {"mapping": [_level_entry(name, per_level[name], arch, workload, ctx) for name in arch.level_names]}


def _read_directives(entries: list, where: Where, arch: Arch, workload: Workload,
                     ctx: ArchImport | None) -> dict[str, dict]:
    """Per level of ours, what its directives say: `temporal` (factors, permutation innermost
    first) or None, `spatial` loops, and the `keep` / `bypass` lists (None: not given).
    Directives on a dummy level folded into the level above apply to that level."""
    names = list(arch.level_names)
    fold = ctx.fold if ctx else {n: n for n in names}
    folded = ctx.folded if ctx else set()
    dims = list(workload.dims)
    per_level: dict[str, dict] = {n: {"temporal": None, "spatial": [], "keep": None, "bypass": None}
                                  for n in names}
    for i, entry in enumerate(entries):
        w = where / "mapping" / i
        for key in entry:
            if key not in ("target", "type", "factors", "permutation", "split", "keep", "bypass"):
                raise (w / key).error("unsupported mapping key (read: target, type, factors, "
                                      "permutation, split, keep, bypass)")
        target = entry["target"]
        if ctx is not None:
            target = ctx.target(target, w / "target")     # a v0.4 container: its fanout's level
        elif not isinstance(target, str) or target not in fold:
            raise (w / "target").error(f"no storage level {shown(target)} in the architecture "
                                       f"(levels: {', '.join(fold)})")
        level = fold[target]
        kind = entry.get("type", "temporal")
        if kind not in DIRECTIVES:
            raise (w / "type").error(f"unsupported directive type {kind!r} (read: temporal, spatial, "
                                     "datatype, bypass)")
        if kind in ("datatype", "bypass", "dataspace"):
            holds_nothing = target in folded or arch.levels[names.index(level)].keeps == frozenset()
            _read_keep(entry, w, target, holds_nothing, per_level[level], workload)
            continue
        factors = _factors(entry, w, dims)
        perm = (parse_permutation(entry["permutation"], dims + _dropped(entry, dims), w / "permutation")
                if "permutation" in entry else [])
        perm = [d for d in perm if d in dims]
        if kind == "temporal":
            if target in folded:
                if any(f > 1 for f in factors.values()):
                    raise (w / "factors").error(f"unsupported: temporal loops at {entry['target']}, a fanout "
                                                "level folded into the level above")
                continue
            if per_level[level]["temporal"] is not None:
                raise (w / "target").error(f"a second temporal directive for {target}")
            per_level[level]["temporal"] = (factors, perm)
            continue
        per_level[level]["spatial"] += _spatial_loops(entry, w, factors, perm, dims, arch.fanout(names.index(level)))
    return per_level


def _read_keep(entry: dict, w: Where, target: str, holds_nothing: bool, spec: dict, workload: Workload) -> None:
    """A datatype (bypass, dataspace) directive's keep and bypass lists into `spec`; a level
    that holds nothing (a fanout level) may only bypass."""
    tensor_names = [t.name for t in workload.tensors]
    keep = name_list(entry.get("keep") or [], w / "keep")
    bypass = name_list(entry.get("bypass") or [], w / "bypass")
    for n in keep + bypass:
        if n not in tensor_names:
            raise w.error(f"names {shown(n)}, not a data space (data spaces: {', '.join(tensor_names)})")
    if holds_nothing:
        if keep:
            raise (w / "keep").error(f"{target} is a fanout level that holds nothing")
        return
    spec["keep"], spec["bypass"] = keep, bypass


def _spatial_loops(entry: dict, w: Where, factors: dict[str, int], perm: list[str], dims: list[str],
                   fanout: tuple[int, int]) -> list[dict]:
    """A spatial directive's loops: its permutation's first `split` dims along the mesh's X
    axis, the rest along Y (without `split`, all along the only axis that fans out)."""
    order = perm + [d for d in dims if d not in perm]
    if "split" in entry:
        split = integer(entry["split"], w / "split", "a split: how many of the permutation's dims "
                        "take the mesh's X axis", low=0)
    else:
        split = len(order) if fanout[0] > 1 else 0   # all along the only axis that fans out
    loops = []
    for pos, d in enumerate(order):
        if factors.get(d, 1) > 1:
            axis = 0 if pos < split else 1
            loops.append({"dim": d, "bound": factors[d], "axis": AXES[axis]})
    return loops


def _level_entry(name: str, spec: dict, arch: Arch, workload: Workload, ctx: ArchImport | None) -> dict:
    """One level's entry of our mapping YAML from what its directives said: temporal loops
    outermost first (Timeloop's permutation is innermost first), spatial loops, the keep set
    (what the level may keep, less what is bypassed, plus what is kept) and Timeloop's
    multiple buffering as stages."""
    dims = list(workload.dims)
    tensor_names = [t.name for t in workload.tensors]
    entry: dict = {"level": name, "loops": []}
    if spec["temporal"] is not None:
        factors, perm = spec["temporal"]
        innermost_first = perm + [d for d in dims if d not in perm]
        entry["loops"] = [{"dim": d, "bound": factors[d]} for d in reversed(innermost_first)
                          if factors.get(d, 1) > 1]
    if spec["spatial"]:
        entry["spatial"] = spec["spatial"]
    level = arch.levels[list(arch.level_names).index(name)]
    if spec["keep"] is not None or spec["bypass"] is not None:
        allowed = [t for t in tensor_names if level.may_keep(t)]
        bypass = spec["bypass"] or []
        keep = set(spec["keep"] or []) | {t for t in allowed if t not in bypass}
        entry["keep"] = [t for t in tensor_names if t in keep]
    if ctx and ctx.stages.get(name, 1) > 1:
        entry["stages"] = ctx.stages[name]
    return entry


def _dropped(entry, dims) -> list[str]:
    """Dims a directive names that the workload dropped (size-1 dims indexing no data space)."""
    perm = entry.get("permutation")
    factors = entry.get("factors")
    names: list[str] = []
    if isinstance(perm, list):
        names += [str(p) for p in perm]
    if factors is not None:
        try:
            names += list(parse_factors(factors, Where("")))
        except SpecError:
            pass
    return [n for n in dict.fromkeys(names) if n not in dims]


def _factors(entry: dict, where: Where, dims: list[str]) -> dict[str, int]:
    factors = parse_factors(entry.get("factors", ""), where / "factors")
    for d, f in factors.items():
        if d not in dims:
            if f == 1:
                continue
            raise (where / "factors").error(f"names {d!r}, not a dim of the problem (dims: {', '.join(dims)})")
    return {d: f for d, f in factors.items() if d in dims}


# ----------------------------------------------------------------------------- export

def export(mapping: Mapping, arch: Arch, workload: Workload, ctx: ArchImport | None = None) -> dict:
    """A Timeloop mapping file's content for one of this project's mappings."""
    dims = list(workload.dims)
    tensors = [t.name for t in workload.tensors]
    out = []

    def factor_text(values: dict[int, int]) -> str:
        return " ".join(f"{dims[d]}={values.get(d, 1)}" for d in range(len(dims)))

    folded_by_level: dict[str, list[str]] = {}
    if ctx:
        for dummy in ctx.folded:
            folded_by_level.setdefault(ctx.fold[dummy], []).append(dummy)
    for level, lm in zip(arch.levels, mapping.levels):
        temporal = {d: b for d, b in lm.temporal}
        outer_first = [d for d, _ in lm.temporal]
        innermost_first = list(reversed(outer_first)) + [d for d in range(len(dims)) if d not in outer_first]
        out.append({"target": level.name, "type": "temporal", "factors": factor_text(temporal),
                    "permutation": " ".join(dims[d] for d in innermost_first)})
        keep = [tensors[t] for t in sorted(lm.keep)]
        out.append({"target": level.name, "type": "datatype", "keep": keep,
                    "bypass": [t for t in tensors if t not in keep]})
        spatial = [(d, b, a) for d, b, a in lm.spatial if b > 1]
        target = ctx.spatial_target.get(level.name, level.name) if ctx else level.name
        for dummy in folded_by_level.get(level.name, []):
            out.append({"target": dummy, "type": "temporal", "factors": factor_text({}),
                        "permutation": " ".join(dims)})
            out.append({"target": dummy, "type": "datatype", "keep": [], "bypass": list(tensors)})
        if not spatial:
            continue
        per_dim: dict[int, int] = {}
        axis_of: dict[int, int] = {}
        for d, b, a in spatial:
            if d in axis_of and axis_of[d] != a:
                raise SpecError(level.name, "spatial", f"dim {dims[d]} is split over both mesh axes at "
                                "one level, which a Timeloop mapping cannot say")
            per_dim[d] = per_dim.get(d, 1) * b
            axis_of[d] = a
        xs = [d for d in per_dim if axis_of[d] == 0]
        ys = [d for d in per_dim if axis_of[d] == 1]
        rest = [d for d in range(len(dims)) if d not in per_dim]
        out.append({"target": target, "type": "spatial", "factors": factor_text(per_dim),
                    "permutation": " ".join(dims[d] for d in xs + ys + rest), "split": len(xs)})
    return {"mapping": out}
