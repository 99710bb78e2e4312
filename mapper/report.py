"""Formatting of results: the text tables people read and the JSON that scripts read.

Nothing here computes costs; it only lays out what `cost.evaluate` returned.
"""
from __future__ import annotations

import json
import math

from . import mma
from .cost import Evaluation
from .cta_pair import PAIR
from .mapping import Mapping, is_padded, level_tiles, mapping_to_dict
from .roles import arch_roles
from .spec import Arch, Workload
from .tails import tile_counts as tail_counts


def _num(value: float) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "unlimited"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1e6:
        return f"{value:.4g}"
    return f"{value:,.2f}"


def table(headers: list[str], rows: list[list], align_left: int = 2) -> str:
    cells = [[str(c) for c in row] for row in [headers] + rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [c.ljust(w) if i < align_left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def evaluation_json(arch: Arch, workload: Workload, mapping: Mapping, ev: Evaluation) -> dict:
    return {
        "arch": arch.name,
        "workload": workload.name,
        "mapping": mapping_to_dict(mapping, arch, workload),
        **({"padded": True} if is_padded(mapping, workload) else {}),
        **({"tails": tails_json(arch, workload, mapping, ev)} if _has_waste(workload, mapping, ev) else {}),
        "cost": {
            "energy_pj": ev.energy_pj,
            "cycles": ev.cycles,
            "seconds": ev.cycles / arch.clock_hz,
            "edp": ev.edp,
            "macs": ev.macs,
            "utilization": ev.utilization,
            "bottleneck": ev.bottleneck,
            "compute": {"cycles": ev.compute_cycles, "energy_pj": ev.compute_energy_pj,
                        "instances": ev.compute_instances},
            "levels": {lc.name: {t: {"reads": c.reads, "fills": c.fills, "updates": c.updates}
                                 for t, c in lc.tensors.items()} for lc in ev.levels},
            "level_details": {lc.name: {
                "instances": lc.instances, "footprint_bytes": lc.footprint_bytes,
                "capacity_bytes": None if math.isinf(lc.capacity_bytes) else lc.capacity_bytes,
                "traffic_bytes": lc.traffic_bytes, "cycles": lc.cycles, "leak_pj": lc.leak_pj,
                "tensors": {t: {"tile_words": c.tile_words, "partition_words": c.partition_words,
                                "bytes": c.bytes_moved, "energy_pj": c.energy_pj}
                            for t, c in lc.tensors.items()}} for lc in ev.levels},
        },
    }


def loop_nest_text(arch: Arch, workload: Workload, mapping: Mapping) -> str:
    """The mapping as an indented loop nest, outermost first."""
    lines, depth = [], 0
    for level, lm in zip(arch.levels, mapping.levels):
        kept = ", ".join(workload.tensors[t].name for t in sorted(lm.keep)) or "nothing"
        stages = f", {lm.stages} stages" if lm.stages > 1 else ""
        lines.append("  " * depth + f"[{level.name}] keeps {kept}{stages}")
        for d, b in lm.temporal:
            if b > 1:
                lines.append("  " * depth + f"for {workload.dims[d]} in 0..{b}:")
                depth += 1
        for d, b, a in lm.spatial:
            if b > 1:
                lines.append("  " * depth + f"parallel-for {workload.dims[d]} in 0..{b} (mesh {'xy'[a]}):")
                depth += 1
    lines.append("  " * depth + f"{arch.compute.name}: {workload.einsum}")
    return "\n".join(lines)


def evaluation_text(arch: Arch, workload: Workload, mapping: Mapping, ev: Evaluation) -> str:
    rows = []
    for lc in ev.levels:
        for name, c in lc.tensors.items():
            rows.append([lc.name, name, _num(c.tile_words), _num(c.reads), _num(c.fills),
                         _num(c.updates), _num(c.bytes_moved), _num(c.energy_pj)])
    rows.append([arch.compute.name, "MACs", "", _num(ev.macs), "", "", "", _num(ev.compute_energy_pj)])
    access = table(["level", "tensor", "tile words", "reads/inst", "fills/inst", "updates/inst",
                    "bytes (all)", "energy pJ"], rows)
    level_rows = [[lc.name, _num(lc.instances), _num(lc.footprint_bytes), _num(lc.capacity_bytes),
                   _num(lc.traffic_bytes), _num(lc.cycles)] for lc in ev.levels]
    levels = table(["level", "instances", "used B/inst", "capacity B", "traffic B", "cycles"],
                   level_rows, align_left=1)
    arch = arch.for_workload(workload)
    seconds = ev.cycles / arch.clock_hz
    # the rate of the operands' dtype, where the unit has one per dtype (`Arch.for_workload`)
    rate = f" at the {arch.compute.dtype} rate" if arch.compute.dtype else ""
    summary = (f"energy {ev.energy_pj:,.1f} pJ ({ev.energy_pj / ev.macs:.3f} pJ/MAC)   "
               f"cycles {ev.cycles:,.0f} ({seconds * 1e6:,.2f} us at {arch.clock_hz / 1e9:g} GHz)   "
               f"EDP {ev.edp:.4g} pJ*cycles\n"
               f"utilization {ev.utilization:.1%} of {arch.peak_macs_per_cycle:,} MACs/cycle{rate} "
               f"({ev.compute_instances:,} of {arch.compute.instances:,} units busy)   "
               f"bottleneck: {ev.bottleneck}")
    head = f"{workload.name} on {arch.name}: {workload.einsum}, {ev.macs:,} MACs"
    parts = [head, loop_nest_text(arch, workload, mapping), access, levels, summary]
    return "\n\n".join(parts + ([tails_text(arch, workload, mapping, ev)] if _has_waste(workload, mapping, ev) else []))


def _has_waste(workload: Workload, mapping: Mapping, ev: Evaluation) -> bool:
    return is_padded(mapping, workload) or ev.macs_executed > ev.macs


def tails_json(arch: Arch, workload: Workload, mapping: Mapping, ev: Evaluation) -> dict:
    """Ragged tails and partial fragments: the padded extents, per level the tiles of the
    grid, how many are partial and how many all padding, and the MACs run for nothing."""
    tiles = level_tiles(mapping, len(workload.dims))
    extents = tiles[0]
    levels = {}
    for level, tile in zip(arch.levels, tiles):
        total, partial, empty = tail_counts(workload.sizes, extents, tile)
        levels[level.name] = {"tiles": total, "partial": partial, "empty": empty}
    return {"kind": arch.tails, "extents": dict(zip(workload.dims, extents)), "levels": levels,
            "macs_executed": ev.macs_executed, "wasted_macs": ev.macs_executed - ev.macs}


def tails_text(arch: Arch, workload: Workload, mapping: Mapping, ev: Evaluation) -> str:
    data = tails_json(arch, workload, mapping, ev)
    padded = ", ".join(f"{name} {size:,} -> {data['extents'][name]:,}"
                       for name, size in zip(workload.dims, workload.sizes) if data["extents"][name] != size)
    how = ("masked: loads and stores above the per-SM level move valid elements only" if arch.tails == "masked"
           else "padded: the padding is computed and moved as data")
    rows = [[name, _num(c["tiles"]), _num(c["partial"]), _num(c["empty"])] for name, c in data["levels"].items()]
    wasted = data["wasted_macs"] / max(ev.macs_executed, 1)
    lines = [f"ragged tails ({how}): {padded}" if padded else "no ragged tail",
             table(["level", "tiles", "partial", "all padding"], rows, align_left=1),
             f"compute: {ev.macs_executed:,} MACs executed for {ev.macs:,} ({wasted:.1%} padding: "
             "tails and partial tensor-core fragments)"]
    return "\n".join(lines)


def funnel_text(funnel) -> str:
    """The mapspace funnel: raw size, then what each pruning step leaves; estimates marked ~."""
    def shown(name: str, count) -> str:
        return f"{'~' if name in funnel.estimated else ''}{count:,.0f}"
    rows = [["raw space", shown("raw", funnel.size), ""]]
    previous = funnel.size
    for step, count in funnel.after.items():
        share = f"{count / previous:.2%} kept" if previous else ""
        rows.append([f"after {step}", shown(step, count), share])
        previous = count
    roles = f"\ncompute roles: {funnel.roles}" if funnel.roles else ""
    return table(["mapspace", "mappings", ""], rows, align_left=1) + _estimate_note(funnel) + roles


def _estimate_note(funnel) -> str:
    """What the ~ marks mean: which counts are estimates, and from what."""
    if funnel.exact:
        return ""
    closed = [name for name in ("raw", "constraints", "divisibility")
              if name in funnel.estimated and name not in funnel.coupled]
    parts = []
    if closed:
        parts.append(f"{', '.join(closed)}: too many per-dim loop patterns to sum, estimated from "
                     "sampled ones")
    if funnel.samples:
        parts.append(f"the coupled steps: estimated from {funnel.samples:,} uniform samples of the "
                     "factor combinations")
    if len(funnel.estimated) < 1 + len(funnel.after):
        parts.append("unmarked counts are exact")
    return "\n(~: " + "; ".join(parts) + ")"


def stationarity(workload: Workload, order: tuple[int, ...]) -> str:
    """Which tensors keep their tile across this level's innermost loops."""
    from .orders import is_stationary
    if len(order) < 2:
        return ""
    names = [t.name for t in workload.tensors if is_stationary(workload, order, workload.tensors.index(t))
             and not set(order) <= t.dims]
    return f"{'/'.join(names)}-stationary" if names else ""


def mapping_text(arch: Arch, workload: Workload, mapping: Mapping, ev: Evaluation) -> str:
    """Per level: the tile each level holds (per dim), its loop order and what it keeps
    stationary, its spatial split and its stages."""
    dims = workload.dims
    rows = []
    tiles = level_tiles(mapping, len(dims))
    for lv, (level, lm) in enumerate(zip(arch.levels, mapping.levels)):
        order = tuple(d for d, b in lm.temporal if b > 1)
        loops = " ".join(f"{dims[d]}{b}" for d, b in lm.temporal if b > 1) or "-"
        spatial = " ".join(f"{dims[d]}{b}({'xy'[a]})" for d, b, a in lm.spatial if b > 1) or "-"
        tile = "x".join(f"{dims[d]}{tiles[lv][d]}" for d in range(len(dims)))
        kept = ",".join(workload.tensors[t].name for t in sorted(lm.keep)) or "-"
        rows.append([level.name, tile, loops, stationarity(workload, order), spatial, lm.stages, kept])
    return table(["level", "tile held", "loops (outer->inner)", "reuse", "spatial", "stages", "keeps"],
                 rows, align_left=5)


def _clustered_level(arch: Arch) -> int | None:
    return next((lv for lv, level in enumerate(arch.levels) if level.clusters is not None), None)


def cluster_ctas(arch: Arch, workload: Workload, mapping: Mapping) -> dict[str, int] | None:
    """Per dim, the CTAs of one thread-block cluster (the mesh-y split of the level with
    `block_clusters`; on CTA pairs, twice as many along the instruction's m, which the pair
    splits); None where the architecture has none."""
    level = _clustered_level(arch)
    if level is None:
        return None
    ctas = {name: 1 for name in workload.dims}
    for d, b, a in mapping.levels[level].spatial:
        if a == 1:
            ctas[workload.dims[d]] *= b
    m_dims = arch_roles(arch, workload).of("m") if arch.paired else ()
    if m_dims:
        ctas[workload.dims[m_dims[0]]] *= PAIR
    return ctas


def mma_shape(arch: Arch, workload: Workload, mapping: Mapping) -> dict[str, int]:
    """The MMA by role name: the instruction the mapping issues where the architecture models it
    (wgmma's N from the warpgroup's tile, `mma.mapping_instruction`), else the native shape."""
    arch = arch.for_workload(workload)
    return {**dict(arch.compute.native_shape), **mma.mapping_instruction(arch, workload, mapping)}


def kernel_shape_text(arch: Arch, workload: Workload, mapping: Mapping) -> str:
    """The thread-block cluster and the MMA shape on a GPU with clusters ("" elsewhere): what
    a kernel for the mapping launches and issues, and which operand each cluster shares."""
    ctas = cluster_ctas(arch, workload, mapping)
    if ctas is None:
        return ""
    sharing = [f"{t.name} to {math.prod(c for name, c in ctas.items() if workload.dim_index(name) not in t.dims)}"
               for t in workload.operands]
    native = "".join(f"{role}{size}" for role, size in mma_shape(arch, workload, mapping).items()) or "none"
    if workload.operands_swapped:
        native += f" swap-AB ({workload.operands[0].name} is its first operand: the transposed product)"
    shape = f"thread-block cluster {'x'.join(map(str, ctas.values()))} CTAs ({' x '.join(ctas)})"
    if arch.paired:
        native += (" over a CTA pair (tcgen05 cta_group::2: two SMs, each holding half of A's rows, of B's "
                   "columns and of the accumulator)")
    if math.prod(ctas.values()) == (PAIR if arch.paired else 1):     # no clusters searched, or one unit chosen
        beyond = " beyond the pair" if arch.paired else ""
        return f"{shape}: no multicast{beyond} (`--mapspace clusters` searches clusters); MMA shape {native}"
    return (f"{shape}, each tile multicast from {arch.levels[_clustered_level(arch)].name} to the CTAs "
            f"sharing it ({', '.join(sharing)}); MMA shape {native}")


def search_json(result, arch: Arch, workload: Workload) -> dict:
    out = evaluation_json(arch, workload, result.mapping, result.evaluation)
    ctas = cluster_ctas(arch, workload, result.mapping)
    if ctas is not None:
        out["kernel"] = {"cluster": ctas, "mma": mma_shape(arch, workload, result.mapping),
                         "swap_ab": workload.operands_swapped, "cta_pair": arch.paired}
    out["search"] = {
        "strategy": result.strategy, "objective": result.objective.name, "score": result.score,
        "evaluated": result.evaluated, "seconds": result.seconds,
        "seconds_to_best": result.seconds_to_best, "optimal": result.optimal,
        "complete": result.complete, "stopped_by": result.stopped_by, "lower_bound": result.lower_bound,
        "gap": result.gap, "mapspace": result.funnel.to_json(), "notes": result.notes,
        "events": [event.as_json() for event in result.events], "settings": result.settings}
    return out


def search_text(result, arch: Arch, workload: Workload) -> str:
    ev = result.evaluation
    proof = ("proven optimal" if result.optimal else
             f"not proven (gap {result.gap:.2%} to the lower bound)" if result.gap is not None else
             "not proven optimal")
    head = (f"{result.strategy} search, objective {result.objective.name}: {result.score:.6g}  "
            f"({proof}; {result.evaluated:,} mappings priced in {result.seconds:.2f} s, "
            f"best after {result.seconds_to_best:.2f} s)")
    clock = (["the wall clock stopped it, so the machine's load shaped this result and another run may "
              "differ (a longer --time-limit, or --max-evaluations, is reproducible)"]
             if result.stopped_by == "clock" else [])
    notes = "\n".join(f"  - {n}" for n in result.notes + clock)
    shape = kernel_shape_text(arch, workload, result.mapping)
    parts = [head + ("\n" + notes if notes else ""),
             mapping_text(arch, workload, result.mapping, ev) + ("\n" + shape if shape else ""),
             evaluation_text(arch, workload, result.mapping, ev), funnel_text(result.funnel)]
    return "\n\n".join(parts)


def reference_lines(ev: Evaluation, references) -> str:
    """A search's result `ev` beside each reference mapping's evaluation (e.g. Timeloop's own
    mapping, given as a warm start): `references` is a sequence of (label, Evaluation)."""
    lines = [f"search result: {ev.energy_pj:,.1f} pJ, {ev.cycles:,.0f} cycles, EDP {ev.edp:.4g}"]
    for label, ref in references:
        lines.append(f"reference {label}: {ref.energy_pj:,.1f} pJ, {ref.cycles:,.0f} cycles, EDP {ref.edp:.4g}"
                     f" (search: energy x{ev.energy_pj / ref.energy_pj:.3f}, EDP x{ev.edp / ref.edp:.3f})")
    return "\n".join(lines)


def strict_json(data) -> str:
    """JSON that every reader accepts: no NaN or Infinity (json.dumps writes them by default).
    An infinite value (an unlimited capacity, an unbounded gap) becomes the string "inf" or
    "-inf", and NaN becomes null."""
    return json.dumps(_finite(data), indent=2, allow_nan=False)


def _finite(value):
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {key: _finite(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "dtype"):      # a numpy scalar
        return _finite(value.item())
    return value
