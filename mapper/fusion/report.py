"""`mapper fuse`'s output: the text report, its JSON form and the per-boundary traffic plot."""
from __future__ import annotations

from dataclasses import replace

from ..errors import clipped
from ..mapping import level_tiles, mapping_to_dict
from ..report import mapping_text
from .group_price import NOT_SEARCHED, Refusal
from .grouping import Grouping
from .run import FuseResult


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    out = []
    for k, row in enumerate(rows):
        out.append("  ".join(cell.rjust(w) if c in right else cell.ljust(w)
                             for c, (cell, w) in enumerate(zip(row, widths))).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _names(result: FuseResult, ops) -> str:
    return "+".join(result.graph.ops[i].name for i in ops)


def _tile(result: FuseResult, group) -> str:
    if group.tiling:
        return group.tiling
    if group.anchor is None:
        return "-"
    wl = result.graph.ops[group.anchor.op].workload
    tile = level_tiles(group.anchor.mapping, len(wl.dims))[result.searches.level]
    return "x".join(f"{d}{t}" for d, t in zip(wl.dims, tile))


def _proof(group) -> str:
    """How far each kernel's mapping is from proven: its anchor's, or the worst of its slices'."""
    mapped = (group.anchor,) if group.anchor is not None else group.members
    if not mapped:
        return "exhaustive" if group.tiling else "-"
    if all(m.optimal for m in mapped):
        return "proven"
    gaps = [m.gap for m in mapped if not m.optimal]
    return "unproven" if any(gap is None for gap in gaps) else f"gap {max(gaps):.1%}"


def _proof_of(m) -> str:
    return "proven optimal" if m.optimal else "not proven" if m.gap is None else f"gap {m.gap:.1%}"


def _percent(before: float, after: float) -> str:
    return f"{100 * (after - before) / before:+.1f}%" if before else "-"


def fuse_text(result: FuseResult) -> str:
    arch, outer = result.arch, result.arch.levels[0].name
    level = arch.levels[result.searches.level].name
    u, f = result.unfused, result.fused
    lines = [f"{result.graph.name} on {arch.name}: {len(result.graph.ops)} ops, {len(f.groups)} kernels fused "
             f"against {len(u.groups)} unfused (objective {result.objective}; fusion level {level}; "
             f"{result.seconds:.1f} s)", ""]
    rows = [["", "unfused", "fused", "change"],
            [f"{outer} bytes", f"{_bytes(u, 0):,.0f}", f"{_bytes(f, 0):,.0f}", _percent(_bytes(u, 0), _bytes(f, 0))],
            ["energy pJ", f"{_energy(u):.4g}", f"{_energy(f):.4g}", _percent(_energy(u), _energy(f))],
            ["cycles", f"{_cycles(u):,.0f}", f"{_cycles(f):,.0f}", _percent(_cycles(u), _cycles(f))]]
    lines += _table(rows, {1, 2, 3})
    bound = result.bound.outer_bytes
    lines.append(f"lower bound (every input read once, every result written once; Orojenesis-style): "
                 f"{bound:,.0f} {outer} bytes; fused is {_bytes(f, 0) / bound:.3f}x the bound")
    lines.append(f"grouping search ({result.objective}): runs of the listed order (dynamic programme) "
                 f"{result.runs.score:.6g}; any legal connected groups (CP-SAT, "
                 f"{'proven optimal' if result.cover_proven else 'not proven'}) {result.fused.score:.6g}")
    if result.estimated_only:
        lines.append(f"priced by estimate only (the work budget ended before their searches; refused in the choice): "
                     f"{'; '.join(_names(result, ops) for ops in result.estimated_only)}: with their estimates the "
                     f"grouping would score {result.estimate_gap:.1%} lower")
    if result.stopped_by_clock:
        lines.append("stopped by the time limit (the wall clock): the searches' best so far, which the machine's "
                     "load may change; a larger --time-limit lets every budget run out first")
    lines += ["", "kernels (fused grouping):"]
    rows = [["group", f"{outer} bytes", "saved vs its ops unfused", "energy pJ", "cycles", f"tile at {level}",
             "mapping", "fused intermediates"]]
    for g in f.groups:
        apart = sum(u.groups[i].level_bytes(0) for i in g.ops)
        proof = _proof(g)
        rows.append([_names(result, g.ops), f"{g.level_bytes(0):,.0f}", f"{apart - g.level_bytes(0):,.0f}",
                     f"{g.energy_pj:.4g}", f"{g.cycles:,.0f}",
                     _tile(result, g), proof, ", ".join(g.fused) or "-"])
    lines += _table(rows, {1, 2, 3, 4})
    for g in f.groups:
        for note in g.notes:
            lines.append("  " + clipped(f"{_names(result, g.ops)}: {note}", 220))
    for g in f.groups:
        for m in g.members:
            op = result.graph.ops[m.op]
            wl = op.workload if m.sizes is None else replace(op.workload, sizes=m.sizes)
            shape = " x ".join(f"{d}{size}" for d, size in zip(wl.dims, wl.sizes))
            reused = ("" if m.reused_from in (None, m.op) else
                      f"; the search of {result.graph.ops[m.reused_from].name}'s identical slice")
            lines += ["", f"slice mapping of {op.name} in {_names(result, g.ops)} ({op.workload.einsum}; "
                      f"{shape}, run {g.iterations} time(s); {_proof_of(m)}{reused}):"]
            lines.append(mapping_text(arch, wl, m.mapping, m.evaluation))
        if g.anchor is not None and len(g.ops) > 1:
            op = result.graph.ops[g.anchor.op]
            lines += ["", f"fused mapping of {_names(result, g.ops)} ({op.name}: {op.workload.einsum}; "
                      f"{'proven optimal' if g.anchor.optimal else 'not proven'} under the group's constraints):"]
            lines.append(mapping_text(arch, op.workload, g.anchor.mapping, g.anchor.evaluation))
    lines += ["", "boundaries:"]
    rows = [["tensor", "from -> to", f"round trip unfused {outer} B", "fused?", "why not"]]
    for b in result.boundaries:
        trip = boundary_bytes(result, b)
        rows.append([b.tensor, f"{result.graph.ops[b.producer].name} -> {result.graph.ops[b.consumer].name}",
                     f"{trip:,.0f}",
                     "yes" if b.fused else "no", "" if b.fused else clipped(f"{b.kind}: {b.reason}", 110)])
    lines += _table(rows, {2})
    return "\n".join(lines)


def boundary_bytes(result: FuseResult, b) -> float:
    """The intermediate's bytes at the outermost level unfused: the producer's write and the
    consumer's reads, as each op's own kernel moves them."""
    free = result.searches.free
    return (free(b.producer).price.tensor_bytes(b.tensor, 0) + free(b.consumer).price.tensor_bytes(b.tensor, 0))


def _bytes(grouping: Grouping, level: int) -> float:
    return sum(g.level_bytes(level) for g in grouping.groups)


def _energy(grouping: Grouping) -> float:
    return sum(g.energy_pj for g in grouping.groups)


def _cycles(grouping: Grouping) -> float:
    return sum(g.cycles for g in grouping.groups)


def _slice_json(result: FuseResult, m) -> dict:
    op = result.graph.ops[m.op]
    wl = op.workload if m.sizes is None else replace(op.workload, sizes=m.sizes)
    return {"op": op.name, "sizes": dict(zip(wl.dims, wl.sizes)), "energy_pj": m.price.energy_pj,
            "proven": m.optimal, "gap": m.gap,
            "reused_from": None if m.reused_from is None else result.graph.ops[m.reused_from].name,
            "mapping": mapping_to_dict(m.mapping, result.arch, wl)}


def fuse_json(result: FuseResult) -> dict:
    def grouping(gr: Grouping) -> dict:
        return {"score": gr.score, "outer_bytes": _bytes(gr, 0), "energy_pj": _energy(gr), "cycles": _cycles(gr),
                "groups": [{"ops": [result.graph.ops[i].name for i in g.ops], "outer_bytes": g.level_bytes(0),
                            "energy_pj": g.energy_pj, "cycles": g.cycles, "fused": list(g.fused),
                            "notes": list(g.notes), "spilled": g.spilled,
                            "tile": _tile(result, g),
                            "proven": None if g.anchor is None else g.anchor.optimal,
                            "iterations": g.iterations,
                            "slices": [_slice_json(result, m) for m in g.members],
                            "mapping": None if g.anchor is None else mapping_to_dict(
                                g.anchor.mapping, result.arch, result.graph.ops[g.anchor.op].workload)}
                           for g in gr.groups]}
    return {"arch": result.arch.name, "workload": result.graph.name, "objective": result.objective,
            "candidates": group_statuses(result),
            "fusion_level": result.arch.levels[result.searches.level].name, "seconds": result.seconds,
            "unfused": grouping(result.unfused), "fused": grouping(result.fused),
            "lower_bound_outer_bytes": result.bound.outer_bytes,
            "runs_score": result.runs.score, "cover_proven": result.cover_proven,
            # what the group searches' work budget left priced by estimate only, and its gap
            "estimated_only": [[result.graph.ops[i].name for i in ops] for ops in result.estimated_only],
            "estimate_gap": result.estimate_gap,
            # the wall clock cut a search short (then, and only then, the load shaped the result)
            "stopped_by": "time_limit" if result.stopped_by_clock else None,
            "boundaries": [{"tensor": b.tensor, "producer": result.graph.ops[b.producer].name,
                            "consumer": result.graph.ops[b.consumer].name, "fused": b.fused,
                            "bytes_unfused": boundary_bytes(result, b),
                            "kind": b.kind, "reason": b.reason} for b in result.boundaries]}


def group_statuses(result: FuseResult) -> list[dict]:
    """Each group of two ops or more the study priced: `chosen` (a kernel of the fused
    grouping), `legal` (a kernel it could have been, not chosen), `refused` with its kind and
    reason (a spilled group too: its intermediate leaves the fusion level, so it never fuses), or
    `unsearched` (fused through a buffer level, its estimate never chosen: not known either way)."""
    chosen = {g.ops for g in result.fused.groups}
    out = []
    for ops, found in result.candidates:
        names = [result.graph.ops[i].name for i in ops]
        if isinstance(found, Refusal) and found.kind == NOT_SEARCHED:     # neither legal nor refused: unknown
            out.append({"ops": names, "status": "unsearched", "kind": found.kind, "reason": found.reason})
        elif isinstance(found, Refusal):
            out.append({"ops": names, "status": "refused", "kind": found.kind, "reason": found.reason})
        elif found.spilled:
            out.append({"ops": names, "status": "refused", "kind": "capacity/spill", "reason": "; ".join(found.notes)})
        else:
            out.append({"ops": names, "status": "chosen" if ops in chosen else "legal", "kind": "", "reason": ""})
    return out


def plot_boundaries(result: FuseResult, directory) -> str:
    """Two panels at the outermost level: per boundary, the intermediate's round trip unfused
    against fused (nothing where it stays on chip); per fused group, the bytes of its ops run
    as separate kernels against the one kernel. Returns the PNG's path."""
    import pathlib

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    outer = result.arch.levels[0].name
    many = len(result.boundaries) > 8
    fig, (left, right) = plt.subplots(1, 2, figsize=(14 if many else 12, 6 if many else 4.8),
                                      gridspec_kw={"width_ratios": [3, 2]})
    labels = [f"{b.tensor}{' ' if many else chr(10)}{result.graph.ops[b.producer].name}->"
              f"{result.graph.ops[b.consumer].name}" for b in result.boundaries]
    unfused = [boundary_bytes(result, b) / 1e6 for b in result.boundaries]
    fused = [0.0 if b.fused else u for b, u in zip(result.boundaries, unfused)]
    _bars(left, labels, unfused, fused, "unfused: written, read back", "fused grouping")
    left.set_ylabel(f"{outer} MB")
    left.set_title("intermediate round trip per boundary", fontsize=10)
    groups = result.fused.groups
    labels = [_names(result, g.ops) if many else _names(result, g.ops).replace("+", "+\n") for g in groups]
    apart = [sum(result.unfused.groups[i].level_bytes(0) for i in g.ops) / 1e6 for g in groups]
    _bars(right, labels, apart, [g.level_bytes(0) / 1e6 for g in groups], "its ops as separate kernels",
          "one kernel")
    right.set_title("kernel traffic per group", fontsize=10)
    fig.suptitle(f"{result.graph.name} on {result.arch.name}: {outer} traffic, unfused vs fused", fontsize=11)
    fig.tight_layout()
    path = out / f"fuse-{result.graph.name}-{result.arch.name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _bars(ax, labels, before, after, before_label, after_label) -> None:
    """Paired bars; values written over them while there are few, labels turned when many."""
    x = list(range(len(labels)))
    ax.bar([i - 0.2 for i in x], before, 0.4, label=before_label)
    ax.bar([i + 0.2 for i in x], after, 0.4, label=after_label)
    few = len(labels) <= 8
    for i, (b, a) in enumerate(zip(before, after)):
        if few:
            ax.annotate(f"{b:.4g}", (i - 0.2, b), ha="center", va="bottom", fontsize=7)
        if few or not a:
            ax.annotate(f"{a:.4g}" if a else "0", (i + 0.2, a), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7, rotation=0 if few else 60, ha="center" if few else "right")
    ax.legend(fontsize=8)
