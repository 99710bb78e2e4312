"""What a sweep prints: per workload (or model layer) each strategy's score and bottleneck, the
greedy-vs-joint gap, model totals weighted by layer counts, failures with their reasons, and
what the warm starts saved."""
from __future__ import annotations

from collections import defaultdict

from ..report import table
from .runner import SweepRun


def _fmt(value, spec=".4g") -> str:
    return "-" if value is None else format(value, spec)


def si(value: float, unit: str) -> str:
    """`0.00123, 's'` -> `1.23 ms`: three significant figures with an SI prefix."""
    if value == 0 or value is None:
        return f"0 {unit}"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"),
                          (1e-6, "u"), (1e-9, "n"), (1e-12, "p")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def gap(greedy: dict | None, joint: dict | None) -> float | None:
    """How much worse greedy's score is than joint's, as a fraction of joint's."""
    if not greedy or not joint or greedy["status"] != "ok" or joint["status"] != "ok" or not joint["score"]:
        return None
    return (greedy["score"] - joint["score"]) / joint["score"]


def sections(run: SweepRun, rows: dict[str, dict]):
    """Points grouped for reporting: {(arch, mapspace, objective, expansion): {subject: {strategy: row}}},
    subjects in sweep order; `rows` maps key -> stored row."""
    out: dict[tuple, dict] = defaultdict(dict)
    meta: dict[tuple, dict] = {}
    for point in run.points:
        layer = point.layer
        section = (point.arch.name, point.constraints.name, point.objective, layer.label if layer else "")
        subject = "+".join(layer.layers) if layer else point.workload.name
        out[section].setdefault(subject, {})[point.strategy] = rows.get(point.key)
        meta[(section, subject)] = {"count": layer.count if layer else 1}
    return out, meta


def failed_rows(run: SweepRun, rows: dict[str, dict]) -> list[dict]:
    """The sweep's points without a mapping (infeasible, timed out, invalid, failed), searched
    now or found so in the store, once each, in the sweep's order."""
    keys = dict.fromkeys(p.key for p in run.points)
    return [rows[k] for k in keys if k in rows and rows[k]["status"] != "ok"]


def failed_line(failed: list[dict], unique: int) -> str:
    """The report's first line when points failed: how many, and why (by status)."""
    by_status = {}
    for row in failed:
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
    why = ", ".join(f"{n} {status}" for status, n in by_status.items())
    return (f"FAILED: {len(failed)} of {unique} searches found no mapping ({why}); "
            "they are listed under 'points without a mapping' below")


def sweep_text(run: SweepRun, rows: dict[str, dict], db: str) -> str:
    strategies = list(dict.fromkeys(p.strategy for p in run.points))
    unique = len({p.key for p in run.points})
    head = (f"{len(run.points)} points ({unique} distinct searches): {len(run.computed)} searched in "
            f"{run.seconds:.1f} s on {run.where}, {run.skipped} already in {db}, {run.failures} failed")
    failed = failed_rows(run, rows)
    parts = [failed_line(failed, unique) + "\n" + head] if failed else [head]
    grouped, meta = sections(run, rows)
    for (arch, mapspace, objective, expansion), subjects in grouped.items():
        title = f"{expansion or 'workloads'} on {arch}, mapspace {mapspace}, objective {objective}"
        parts.append(title + "\n" + _section_table(subjects, strategies, meta,
                                                   (arch, mapspace, objective, expansion), bool(expansion)))
        if expansion:
            parts.append(_model_totals(subjects, strategies, meta, (arch, mapspace, objective, expansion)))
    parts += mixed_kernels(grouped, meta, "joint" if "joint" in strategies else strategies[-1])
    if failed:
        parts.append("points without a mapping:\n" + "\n".join(
            f"  {row['slot']}: {row['status']}: {row['reason']}" for row in failed))
    warm = warm_text(run.computed)
    if warm:
        parts.append(warm)
    return "\n\n".join(parts)


def _section_table(subjects, strategies, meta, section, is_model) -> str:
    headers = ["layer" if is_model else "workload"] + (["count"] if is_model else [])
    for s in strategies:
        headers += [f"{s} score", f"{s} bottleneck"]
    both = "greedy" in strategies and "joint" in strategies
    headers += (["greedy loses"] if both else []) + (["joint proven"] if "joint" in strategies else [])
    lines = []
    for subject, by_strategy in subjects.items():
        line = [subject] + ([meta[(section, subject)]["count"]] if is_model else [])
        for s in strategies:
            row = by_strategy.get(s)
            if row is None:
                line += ["(not run)", ""]
            elif row["status"] != "ok":
                line += [row["status"], ""]
            else:
                line += [_fmt(row["score"]), row["bottleneck"]]
        if both:
            g = gap(by_strategy.get("greedy"), by_strategy.get("joint"))
            line.append("-" if g is None else f"{g:+.1%}")
        if "joint" in strategies:
            joint = by_strategy.get("joint") or {}
            line.append(("yes" if joint.get("optimal") else f"gap {joint['gap']:.1%}" if joint.get("gap") is not None
                         else "no") if joint.get("status") == "ok" else "-")
        lines.append(line)
    return table(headers, lines, align_left=1)


def mixed_kernels(grouped, meta, strategy: str) -> list[str]:
    """Where one model was swept on several mapspaces (kinds of kernel: `default,cta-pairs`), per
    layer group the mapspace whose `strategy` mapping scores best, as a kernel library picking
    per layer would, and the model's totals so (ties: the mapspace listed first)."""
    spaces: dict[tuple, dict] = defaultdict(dict)
    for (arch, mapspace, objective, expansion), subjects in grouped.items():
        if expansion:
            spaces[(arch, objective, expansion)][mapspace] = subjects
    out = []
    for (arch, objective, expansion), by_space in spaces.items():
        if len(by_space) < 2:
            continue
        lines, time_s, energy, missing = [], 0.0, 0.0, 0
        for subject in next(iter(by_space.values())):
            done = [(row["score"], i, name, row) for i, (name, subjects) in enumerate(by_space.items())
                    if (row := subjects.get(subject, {}).get(strategy)) and row["status"] == "ok"]
            if not done:
                missing += 1
                lines.append([subject, "-", "-", "-"])
                continue
            score, _, name, row = min(done, key=lambda found: found[:2])
            count = meta[((arch, name, objective, expansion), subject)]["count"]
            time_s, energy = time_s + count * row["seconds_kernel"], energy + count * row["energy_pj"]
            lines.append([subject, name, _fmt(score), row["bottleneck"]])
        total = (f"{missing} layer group(s) missing" if missing
                 else f"{si(time_s, 's')}, {si(energy * 1e-12, 'J')}")
        out.append(f"{expansion} on {arch}, objective {objective}, each layer group on the mapspace whose {strategy} "
                   f"mapping scores best (a kernel library picking per layer):\n"
                   + table(["layer", "mapspace", f"{strategy} score", "bottleneck"], lines, align_left=2)
                   + f"\nmodel totals so: {total}")
    return out


def _model_totals(subjects, strategies, meta, section) -> str:
    """Time and energy of the whole model: each group's figures times its count."""
    lines = []
    totals = {}
    for s in strategies:
        time_s = energy = 0.0
        missing = 0
        for subject, by_strategy in subjects.items():
            row = by_strategy.get(s)
            count = meta[(section, subject)]["count"]
            if row is None or row["status"] != "ok":
                missing += 1
                continue
            time_s += count * row["seconds_kernel"]
            energy += count * row["energy_pj"]
        totals[s] = (time_s, energy, missing)
        lines.append([s, si(time_s, "s"), si(energy * 1e-12, "J")]
                     + ([f"{missing} layer group(s) missing"] if missing else []))
    headers = ["strategy", "time", "energy"] + (["note"] if any(len(line) > 3 for line in lines) else [])
    lines = [line + [""] * (len(headers) - len(line)) for line in lines]
    text = "model totals (each layer group times its count):\n" + table(headers, lines, align_left=1)
    if "greedy" in totals and "joint" in totals and not totals["greedy"][2] and not totals["joint"][2]:
        (gt, ge, _), (jt, je, _) = totals["greedy"], totals["joint"]
        text += (f"\ngreedy takes {gt / jt - 1:+.1%} time and {ge / je - 1:+.1%} energy against joint")
    return text


def warm_text(computed: list[dict]) -> str:
    """What the neighbours' mappings did for the joint points searched in this run."""
    joint = [r for r in computed if r["strategy"] == "joint" and r["status"] == "ok"]
    given = [r for r in joint if r.get("warm_given")]
    if not joint:
        return ""
    if not given:
        return f"warm starts: none of the {len(joint)} joint point(s) had a finished mapping that carries over"
    admitted = [r for r in given if r.get("warm_admitted")]
    better = [r for r in admitted if r.get("warm_score") is not None and r.get("start_score") is not None
              and r["warm_score"] < r["start_score"]]
    final = [r for r in admitted if r.get("warm_score") is not None and r["warm_score"] <= r["score"] * (1 + 1e-9)]
    gains = sorted((r["start_score"] - r["warm_score"]) / r["start_score"] for r in better)
    text = (f"warm starts: {len(given)} of {len(joint)} joint point(s) were given finished mappings (their own "
            f"shape's from other strategies and design points, neighbouring shapes' rescaled); "
            f"{len(admitted)} lie in their space; "
            f"in {len(better)} the best of them started the search better than the joint search's own greedy start")
    if gains:
        text += f" (median {gains[len(gains) // 2]:.1%} lower score to start from)"
    text += f"; in {len(final)} it was already the final answer"
    return text
