"""Greedy top-down against the joint search: the gap, and per level what differs and why.

The explanation names the coupling that makes the level-by-level choice lose, by comparing
the two mappings level by level: a different buffering depth (capacity shared with stages), a
different occupancy on a GPU, a different loop order (what stays stationary), or a different
tile, where the joint mapping accepts more traffic into that level to make the levels below it
(down to the native operation shape) cheaper.
"""
from __future__ import annotations

import numpy as np

from .mapping import level_tiles
from .mapspace import Mapspace, pruning
from .orders import signature
from .report import mapping_text, stationarity, table
from .tails import fragment_roles


def _level_bytes(ev):
    return [lc.traffic_bytes for lc in ev.levels]


def differences(greedy, joint, arch, workload) -> list[dict]:
    """Per level where the two mappings differ: what differs, and the coupling behind it."""
    dims = workload.dims
    g_map, j_map = greedy.mapping, joint.mapping
    g_tiles, j_tiles = level_tiles(g_map, len(dims)), level_tiles(j_map, len(dims))
    g_bytes, j_bytes = _level_bytes(greedy.evaluation), _level_bytes(joint.evaluation)
    # the dims of a tensor-core role (by the einsum's structure, `roles.py`)
    aligned = {d for role_dims, _ in fragment_roles(arch, workload) for d in role_dims}
    out = []
    for lv, level in enumerate(arch.levels):
        g, j = g_map.levels[lv], j_map.levels[lv]
        g_order = tuple(d for d, b in g.temporal if b > 1)
        j_order = tuple(d for d, b in j.temporal if b > 1)
        what, why = [], []
        if g_tiles[lv] != j_tiles[lv]:
            show = lambda t: "x".join(f"{dims[d]}{t[d]}" for d in range(len(dims)))
            what.append(f"tile {show(g_tiles[lv])} -> {show(j_tiles[lv])}")
            odd = lambda tile: [f"{dims[d]}{tile[d]} = {tile[d] // _odd_part(tile[d])} x {_odd_part(tile[d])}"
                                for d in range(len(dims)) if d in aligned and _odd_part(tile[d]) > 1]
            g_odd, j_odd = odd(g_tiles[lv]), odd(j_tiles[lv])
            if g_odd != j_odd:
                why.append("divisibility down to the native operation shape: greedy's tile carries "
                           + (", ".join(g_odd) or "no odd factor") + "; the joint tile "
                           + ("carries " + ", ".join(j_odd) if j_odd else "keeps odd factors above this level"))
            g_in, j_in = g_bytes[lv], j_bytes[lv]
            g_time = greedy.evaluation.levels[lv].cycles
            j_time = joint.evaluation.levels[lv].cycles
            why.append(f"{level.name} moves {_pct(j_in, g_in)} bytes and needs {g_time:,.0f} -> "
                       f"{j_time:,.0f} cycles (greedy's bottleneck: {greedy.evaluation.bottleneck})")
        if g.stages != j.stages and lv > 0:
            what.append(f"stages {g.stages} -> {j.stages}")
            why.append("capacity shared with pipeline stages: the buffering depth changes the tile that fits")
        g_reuse, j_reuse = stationarity(workload, g_order), stationarity(workload, j_order)
        if signature(workload, g_order) != signature(workload, j_order) and g_reuse != j_reuse:
            what.append(f"order {' '.join(dims[d] for d in g_order) or '-'} -> {' '.join(dims[d] for d in j_order) or '-'}")
            why.append(f"loop order: {g_reuse or 'no stationary tensor'} -> {j_reuse or 'no stationary tensor'}")
        g_sp = sorted((dims[d], b, a) for d, b, a in g.spatial if b > 1)
        j_sp = sorted((dims[d], b, a) for d, b, a in j.spatial if b > 1)
        if g_sp != j_sp:
            fmt = lambda sp: " ".join(f"{d}{b}" for d, b, _ in sp) or "-"
            what.append(f"spatial {fmt(g_sp)} -> {fmt(j_sp)}")
            why.append("spatial split: it changes how many units work and what they share")
        if what:
            out.append({"level": level.name, "differs": what, "because": why})
    space = Mapspace(arch, workload)
    if space.gpu_levels is not None:
        smem, rf = space.gpu_levels
        blocks = []
        for result in (greedy, joint):
            ev = result.evaluation
            blocks.append(int(pruning.blocks_per_sm(space, np.array([ev.levels[smem].footprint_bytes]),
                                                  np.array([ev.levels[rf].footprint_bytes]))[0]))
        if blocks[0] != blocks[1]:
            out.append({"level": arch.levels[smem].name, "differs": [f"blocks per SM {blocks[0]} -> {blocks[1]}"],
                        "because": ["occupancy: the shared-memory tile decides how many blocks fit per SM"]})
    return out


def _odd_part(n: int) -> int:
    while n % 2 == 0 and n > 1:
        n //= 2
    return n


def _pct(new: float, old: float) -> str:
    if old == 0:
        return "the same" if new == 0 else f"{new:,.0f} (from 0)"
    change = (new - old) / old
    return f"{change:+.1%}"


def compare_json(greedy, joint, arch, workload) -> dict:
    from .report import search_json
    gap = (greedy.score - joint.score) / joint.score if joint.score else 0.0
    return {"arch": arch.name, "workload": workload.name, "objective": joint.objective.name,
            "greedy": search_json(greedy, arch, workload), "joint": search_json(joint, arch, workload),
            "gap": {"objective": gap,
                    "energy": _rel(greedy.evaluation.energy_pj, joint.evaluation.energy_pj),
                    "cycles": _rel(greedy.evaluation.cycles, joint.evaluation.cycles),
                    "edp": _rel(greedy.evaluation.edp, joint.evaluation.edp)},
            "differences": differences(greedy, joint, arch, workload)}


def _rel(a, b):
    return (a - b) / b if b else 0.0


def compare_text(greedy, joint, arch, workload) -> str:
    rows = []
    for name, g, j in (("objective " + joint.objective.name, greedy.score, joint.score),
                       ("energy pJ", greedy.evaluation.energy_pj, joint.evaluation.energy_pj),
                       ("cycles", greedy.evaluation.cycles, joint.evaluation.cycles),
                       ("EDP", greedy.evaluation.edp, joint.evaluation.edp),
                       ("utilization", greedy.evaluation.utilization, joint.evaluation.utilization)):
        rows.append([name, f"{g:.6g}", f"{j:.6g}", f"{_rel(g, j):+.2%}"])
    rows.append(["bottleneck", greedy.evaluation.bottleneck, joint.evaluation.bottleneck, ""])
    proof = "proven optimal" if joint.optimal else (
        f"gap to bound {joint.gap:.2%}" if joint.gap is not None else "not proven")
    head = (f"{workload.name} on {arch.name}: greedy top-down vs joint ({proof}, "
            f"{joint.evaluated:,} mappings priced in {joint.seconds:.1f} s)")
    diffs = differences(greedy, joint, arch, workload)
    lines = [head, table(["", "greedy", "joint", "greedy loses"], rows, align_left=1)]
    if diffs:
        lines.append("What differs, level by level, and the coupling behind it:\n" + "\n".join(
            f"  {d['level']}: {'; '.join(d['differs'])}\n    because " + "; ".join(d["because"])
            for d in diffs))
    else:
        lines.append("Greedy found the joint optimum: no level differs.")
    lines.append("greedy mapping:\n" + mapping_text(arch, workload, greedy.mapping, greedy.evaluation))
    lines.append("joint mapping:\n" + mapping_text(arch, workload, joint.mapping, joint.evaluation))
    return "\n\n".join(lines)
