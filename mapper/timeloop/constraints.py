"""Timeloop mapspace constraints -> this project's mapspace dict (`constraints/*.yaml` form).

What translates exactly: factor constraints (`D=k` fixes a loop bound), full permutations (a
fixed loop order), spatial factors (at a folded dummy level they bound the level above's
spatial split), dataspace keep/bypass (carried by the arch's `keeps`; a level without one lets
the search choose, like Timeloop's mapper: `bypass: true`), partial permutations (only the
innermost dims fixed: `innermost_order`), `split` on a level fanning out along both mesh axes
(`spatial_x` / `spatial_y`).
"""
from __future__ import annotations

from ..spec import Arch, Workload
from .arch import ArchImport
from .yamlio import integer, parse_factors, parse_permutation

KINDS = ("temporal", "spatial", "dataspace", "bypass", "datatype")


def translate(ctx: ArchImport, arch: Arch, workload: Workload, notes: list[str], name: str) -> dict:
    dims = list(workload.dims)
    names = list(arch.level_names)
    levels: dict[str, dict] = {}
    constrained_keep: set[str] = set()
    for t in ctx.constraints:
        w = t["_where"]
        target, kind = ctx.target(t["target"], w / "target"), t["type"]
        if kind not in KINDS:
            raise (w / "type").error(f"unsupported constraint type {kind!r} (read: {', '.join(KINDS)})")
        for key in t:
            if key not in ("target", "type", "factors", "permutation", "split", "keep", "bypass", "_where"):
                raise (w / key).error("unsupported constraint key (read: factors, permutation, split, "
                                      "keep, bypass)")
        level = ctx.fold[target]
        if kind in ("dataspace", "bypass", "datatype"):
            if target not in ctx.folded:     # a folded dummy's "bypass all" says nothing of its parent
                constrained_keep.add(level)
            continue
        entry = levels.setdefault(level, {})
        factors = {d: f for d, f in parse_factors(t.get("factors", []), w / "factors").items() if d in dims}
        if kind == "temporal":
            if target in ctx.folded:
                continue                     # folded dummies have no temporal loops here
            if factors:
                entry.setdefault("temporal", {}).update(factors)
            if "permutation" in t:
                perm = [d for d in parse_permutation(t["permutation"], dims + _others(t), w / "permutation")
                        if d in dims]
                if len(perm) == len(dims):
                    entry["order"] = list(reversed(perm))
                elif perm:
                    # a partial permutation fixes only the innermost loops (Timeloop lists them
                    # innermost first); the other dims are free outside them
                    entry["innermost_order"] = list(reversed(perm))
            continue
        if factors:
            entry.setdefault("spatial", {}).update(factors)
        fanout = arch.fanout(names.index(level))
        if "split" in t and "permutation" in t and fanout[0] > 1 and fanout[1] > 1:
            # the permutation's first `split` dims may only use mesh x, the others only y
            perm = [d for d in parse_permutation(t["permutation"], dims + _others(t), w / "permutation")
                    if d in dims]
            split = integer(t["split"], w / "split", "a split: how many of the permutation's dims take the "
                            "mesh's X axis", low=0)
            for pos, d in enumerate(perm):
                entry.setdefault("spatial_y" if pos < split else "spatial_x", {})[d] = 1
    for i, level in enumerate(arch.levels[1:], start=1):
        if level.keeps == frozenset():
            # a kept dummy fanout level: Timeloop's front end gives it no temporal loops
            levels.setdefault(level.name, {}).setdefault("temporal", {}).update({d: 1 for d in dims})
            continue
        if level.name not in constrained_keep:
            levels.setdefault(level.name, {})["bypass"] = True
    return {"name": name, "description": "imported from Timeloop constraints", "factors": "perfect",
            "levels": {k: v for k, v in levels.items() if v}}


def _others(t: dict) -> list[str]:
    perm = t.get("permutation")
    if isinstance(perm, list):
        return [str(p) for p in perm]
    if isinstance(perm, str):
        return [c for c in perm if c.isalpha()]
    return []
