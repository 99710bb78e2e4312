"""The candidates of `mapper results --pareto`: the design points each front is drawn over.

Three kinds of front, each per subject, over the store's finished rows:
- a workload's layer rows (one einsum searched at each design point);
- an op graph's chain rows (fusion studies, `sweep.fused`): each row's fused figures, labelled
  by the architecture's changes, and its unfused figures as a candidate of their own, labelled
  "unfused", so the front shows whether fusing moves it;
- a model expansion's totals per architecture and mapspace: every layer group's figures times
  its count (its lowest-energy finished row, as the sweep's fused report takes it); where the
  store holds the expansion's chain rows (`--fuse`), the chains' fused figures replace their
  layers' (and an "unfused" candidate takes their unfused figures). A total is a candidate only
  when whole: every layer group of the expansion (`expansion_groups`) finished, and every chain;
  otherwise the front says which are missing.

EDP of a total is its energy times its cycles; area is the architecture's.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from .arch_grid import changes_of
from .pareto import front

COLUMNS = ("energy_pj", "cycles", "area_mm2", "edp", "seconds_kernel", "outer_bytes")


@dataclass(frozen=True)
class Candidate:
    label: str              # the architecture's changes (`[GlobalBuffer.capacity=32MiB]`), "unfused" after
    arch: str
    strategy: str           # the search's strategy; fused / unfused for a fusion study; layers for a model
    figures: dict           # column -> value (None: the row lacks it)
    mapspace: str = "default"


@dataclass(frozen=True)
class Front:
    kind: str               # workload, op graph, model
    subject: str
    candidates: tuple[Candidate, ...]
    kept: tuple[int, ...]   # indices of the non-dominated candidates
    missing: tuple[str, ...] = ()    # why some design points are not candidates (a model total not whole)


def label_of(arch: str, unfused: bool = False) -> str:
    _, changes = changes_of(arch)
    text = "[" + ",".join(f"{p}={v}" for p, v in changes) + "]" if changes else arch
    return text + (" unfused" if unfused else "")


def _figures(source: dict, area) -> dict:
    return {c: (area if c == "area_mm2" else source.get(c)) for c in COLUMNS}


def fronts(rows: list[dict], columns: tuple[str, ...]) -> list[Front]:
    ok = [r for r in rows if r["status"] == "ok"]
    groups: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for row in ok:
        if row["strategy"] == "fuse":
            for side in ("fused", "unfused"):
                source = row["cost"]["unfused"] if side == "unfused" else row
                groups[("op graph", row["workload"])].append(Candidate(
                    label_of(row["arch"], side == "unfused"), row["arch"], side, _figures(source, row["area_mm2"]),
                    row["mapspace"]))
        else:
            groups[("workload", row["workload"])].append(Candidate(
                label_of(row["arch"]), row["arch"], row["strategy"], _figures(row, row["area_mm2"]), row["mapspace"]))
    missing: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (expansion, arch, mapspace), members in _by_expansion(rows).items():
        found, lacking = model_totals(members)
        key = ("model", expansion)
        missing[key] += [f"{arch} ({mapspace}): {why}" for why in lacking]
        for side, figures in found.items():
            groups[key].append(Candidate(label_of(arch, side == "unfused"), arch, side, figures, mapspace))
    out = []
    for (kind, subject), candidates in list(groups.items()) + [(k, []) for k in missing if k not in groups]:
        if len({c.mapspace for c in candidates}) > 1:       # the mapspace is a design choice too: said
            candidates = [replace(c, label=f"{c.label} ({c.mapspace})") for c in candidates]
        usable = [c for c in candidates if all(c.figures.get(col) is not None for col in columns)]
        kept = front([[c.figures[col] for col in columns] for c in usable])
        out.append(Front(kind, subject, tuple(usable), tuple(kept), tuple(missing.get((kind, subject), ()))))
    return out


def _by_expansion(rows: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        if row.get("expansion"):
            out[(row["expansion"], row["arch"], row["mapspace"])].append(row)
    return out


def model_totals(rows: list[dict]) -> tuple[dict[str, dict], list[str]]:
    """One expansion's rows on one architecture and mapspace -> its totals ("layers"; with chain
    rows "fused" and "unfused" instead) and what keeps them from being whole."""
    layers = [r for r in rows if r["strategy"] != "fuse"]
    chains = {r["layers"]: r for r in rows if r["strategy"] == "fuse"}
    best: dict[str, dict] = {}
    counts: dict[str, int] = {}
    for r in layers:
        counts[r["layers"]] = r["count"]
        if r["status"] == "ok" and (r["layers"] not in best or r["energy_pj"] < best[r["layers"]]["energy_pj"]):
            best[r["layers"]] = r
    covered: dict[str, int] = {}
    for r in chains.values():
        covered.update(dict.fromkeys(r["layers"].split("+") if r["layers"] else (), r["count"]))
    lacking = [f"layer group {name} has no finished point" for name, count in counts.items()
               if name not in best and count - sum(covered.get(n, 0) for n in name.split("+")) > 0]
    expected = max((r.get("expansion_groups") or 0 for r in rows), default=0)
    if expected > len(counts):
        lacking.append(f"{expected - len(counts)} of its {expected} layer groups not in the store")
    lacking += [f"chain {r['workload']} {r['status']}" for r in chains.values() if r["status"] != "ok"]
    if lacking:
        return {}, lacking
    sides = ("fused", "unfused") if chains else ("layers",)
    area = next((r["area_mm2"] for r in rows if r.get("area_mm2") is not None), None)
    out = {}
    for side in sides:
        total = dict.fromkeys(("energy_pj", "cycles", "seconds_kernel", "outer_bytes"), 0.0)
        for name, row in best.items():
            rest = counts[name] - sum(covered.get(n, 0) for n in name.split("+"))
            for c in total:
                total[c] += max(rest, 0) * row[c]
        for row in chains.values():
            source = row if side == "fused" else row["cost"]["unfused"]
            for c in total:
                total[c] += row["count"] * source[c]
        out[side] = {**total, "edp": total["energy_pj"] * total["cycles"], "area_mm2": area}
    return out, []


def fronts_text(found: list[Front], figures: tuple[tuple[str, str], ...]) -> str:
    """Each front's points (label, architecture, strategy or side, figures), then what kept
    model totals off the fronts."""
    from ..report import table
    if not any(f.kept for f in found):
        names = ", ".join(name for name, _ in figures)
        text = f"no finished point has every figure ({names}; area needs `area` in the arch)"
        return "\n".join([text] + _missing_lines(found))
    lines = []
    for f in found:
        if not f.kept:
            continue
        lines.append([f"{f.kind} {f.subject} ({len(f.kept)} of {len(f.candidates)})", "", "", ""] + [""] * len(figures))
        lines.extend(["", f.candidates[i].label, f.candidates[i].arch, f.candidates[i].strategy]
                     + [f"{f.candidates[i].figures[column]:.4g}" for _, column in figures] for i in f.kept)
    header = ["front", "point", "arch", "strategy"] + [name for name, _ in figures]
    text = table(header, lines, align_left=4) + f"\n{sum(len(f.kept) for f in found)} point(s) on the fronts"
    return "\n".join([text] + _missing_lines(found))


def _missing_lines(found: list[Front]) -> list[str]:
    out = []
    for f in found:
        if f.missing:
            out.append(f"model {f.subject}: totals left off (not whole): " + "; ".join(f.missing))
    return out
