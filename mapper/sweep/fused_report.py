"""What `mapper sweep --fuse` adds to the report: per model chain its unfused and fused figures,
and per model expansion the fused against the unfused totals.

Model totals: each chain's figures times its count, plus every layer outside the chains (a
ResNet's 3x3 convolutions, say) from its own layer point (the lowest-energy finished strategy),
the same figure on both sides, so the difference is what fusing the chains saves.
"""
from __future__ import annotations

from collections import defaultdict

from ..report import table
from .fused import ChainPoint
from .points import Point
from .report import si

FIGURES = (("energy_pj", "energy"), ("outer_bytes", "outer bytes"), ("cycles", "cycles"))


def _fused_groups(row: dict) -> str:
    groups = ["+".join(g["ops"]) for g in row["cost"]["fused"]["groups"] if len(g["ops"]) > 1]
    return ", ".join(groups) or "none"


def _outside(points: list[Point], rows: dict, covered: dict[str, int]) -> tuple[dict, int, int]:
    """Figures of the layers outside the chains (count times the row), the number of such layer
    groups and of those without a finished row."""
    best: dict[tuple, dict] = {}
    for p in points:
        row = rows.get(p.key)
        if row and row["status"] == "ok":
            have = best.get(p.layer.layers)
            if have is None or row["energy_pj"] < have["energy_pj"]:
                best[p.layer.layers] = row
    totals, groups, missing = dict.fromkeys(("energy_pj", "outer_bytes", "cycles"), 0.0), 0, 0
    for layers, count in {p.layer.layers: p.layer.count for p in points}.items():
        rest = count - sum(covered.get(name, 0) for name in layers)
        if rest <= 0:
            continue
        groups += 1
        if layers not in best:
            missing += 1
            continue
        for key in totals:
            totals[key] += rest * best[layers][key]
    return totals, groups, missing


def fused_text(chain_points: list[ChainPoint], chain_rows: dict, points: list[Point], rows: dict) -> str:
    sections = defaultdict(list)
    for cp in chain_points:
        label = cp.subject.layer.label if cp.subject.layer else ""
        sections[(cp.arch.name, cp.constraints.name, label)].append(cp)
    parts = []
    for (arch, mapspace, label), members in sections.items():
        lines, totals, failed = [], {"unfused": defaultdict(float), "fused": defaultdict(float)}, []
        covered: dict[str, int] = {}
        for cp in members:
            layer, row = cp.subject.layer, chain_rows.get(cp.key)
            count, layers = (layer.count, "+".join(layer.layers)) if layer else (1, "-")
            covered.update(dict.fromkeys(layer.layers if layer else (), count))
            if not row or row["status"] != "ok":
                failed.append(f"  {cp.subject.chain.name}: {row['status'] + ': ' + row['reason'] if row else 'not run'}")
                lines.append([cp.subject.chain.name, count, layers] + ["-"] * 7)
                continue
            u, f = row["cost"]["unfused"], row["cost"]["fused"]
            for side, figures in (("unfused", u), ("fused", f)):
                for key, _ in FIGURES:
                    totals[side][key] += count * figures[key]
            clock = cp.arch.clock_hz
            lines.append([cp.subject.chain.name, count, layers,
                          si(u["energy_pj"] * 1e-12, "J"), si(f["energy_pj"] * 1e-12, "J"),
                          si(u["outer_bytes"], "B"), si(f["outer_bytes"], "B"),
                          si(u["cycles"] / clock, "s"), si(f["cycles"] / clock, "s"), _fused_groups(row)])
        clock = members[0].arch.clock_hz
        head = (f"fused chains of {label or 'the op-graph workloads'} on {arch}, mapspace {mapspace} (one fusion "
                f"study each, objective energy; figures per instance, outer bytes at the outermost level):\n")
        text = head + table(["chain", "count", "layers", "unfused energy", "fused energy", "unfused bytes",
                             "fused bytes", "unfused time", "fused time", "fused groups"], lines, align_left=3)
        if not label:               # op graphs of their own: no model to total
            parts.append(text + ("\nchains without a result:\n" + "\n".join(failed) if failed else ""))
            continue
        mine = [p for p in points if p.layer and p.arch.name == arch and p.constraints.name == mapspace
                and p.layer.label == label]
        outside, n_outside, missing = _outside(mine, rows, covered)
        model = []
        for side in ("unfused", "fused"):
            t = {key: totals[side][key] + outside[key] for key, _ in FIGURES}
            model.append([side, si(t["energy_pj"] * 1e-12, "J"), si(t["outer_bytes"], "B"),
                          si(t["cycles"] / clock, "s")])
            totals[side] = t
        u, f = totals["unfused"], totals["fused"]
        model.append(["fused saves"] + [f"{1 - f[k] / u[k]:.1%}" if u[k] else "-" for k, _ in FIGURES])
        note = (f"{n_outside} layer group(s) outside the chains, from their own points"
                + (f" ({missing} without a result, left out)" if missing else "") if n_outside else
                "every layer in a chain")
        text += (f"\n\nmodel totals of {label} on {arch}, fused against unfused (chains times their counts; "
                 f"{note}):\n" + table(["", "energy", "outer bytes", "time"], model, align_left=1))
        if failed:
            text += "\nchains without a result (left out of both totals):\n" + "\n".join(failed)
        parts.append(text)
    return "\n\n".join(parts)
