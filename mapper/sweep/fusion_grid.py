"""Which fused groups are legal where, over an architecture grid: from the chain rows of a
store (each row's `cost["candidates"]`: every group of two ops or more its fusion study
priced, chosen, legal, refused or not searched), per op graph and mapspace, the smallest value of the grid's
first varied field from which each group is fused (chosen) and from which it is legal, at each
combination of the other fields' values.

"From" is a threshold: a group fused at 32 MiB, 64 MiB and 128 MiB but not at 16 MiB is fused
from 32 MiB; where it is fused at some values only, not at every larger one, the values are
listed instead. Groups legal nowhere are counted, with the reason at the largest value.
"""
from __future__ import annotations

import re
from collections import defaultdict

from ..units import parse_bytes, parse_energy, parse_frequency
from .arch_grid import changes_of

_NUMBER = re.compile(r"^\s*([0-9.eE+-]+)")


def label_value(label: str) -> float:
    """A varied value's label as a number, to order the grid by: a mesh by its product, a size,
    energy or frequency in its unit, else its leading number."""
    mesh = re.fullmatch(r"\s*([0-9]+)\s*[xX]\s*([0-9]+)\s*", label)
    if mesh:
        return float(int(mesh.group(1)) * int(mesh.group(2)))
    for parse in (parse_bytes, parse_energy, parse_frequency):
        try:
            return float(parse(label, None))
        except Exception:          # not of this kind: the next parser
            continue
    found = _NUMBER.match(label)
    try:
        return float(found.group(1)) if found else 0.0
    except ValueError:
        return 0.0


def _threshold(axis: str, values: list[tuple[str, bool]]) -> str:
    """'from AXIS=V' when the property holds at V and every larger value ('everywhere' from the
    smallest), else the values where it holds; values in increasing order."""
    held = [label for label, ok in values if ok]
    if not held:
        return ""
    first = next(i for i, (_, ok) in enumerate(values) if ok)
    if all(ok for _, ok in values[first:]):
        return "at every value" if first == 0 else f"from {axis}={values[first][0]}"
    return f"at {axis}=" + ", ".join(held) + " only"


def legality(rows: list[dict]) -> dict:
    """{(base, workload, mapspace, axis path, other changes): {group: [(label, status, reason)]}}
    over finished chain rows of derived architectures, each list in increasing value."""
    out: dict = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get("strategy") != "fuse" or row["status"] != "ok" or not (row.get("cost") or {}).get("candidates"):
            continue
        base, changes = changes_of(row["arch"])
        if not changes:
            continue
        (axis, label), others = changes[0], changes[1:]
        section = (base, row["workload"], row["mapspace"], axis, ",".join(f"{p}={v}" for p, v in others))
        for candidate in row["cost"]["candidates"]:
            out[section]["+".join(candidate["ops"])].append((label, candidate["status"], candidate["reason"]))
    for groups in out.values():
        for statuses in groups.values():
            statuses.sort(key=lambda s: label_value(s[0]))
    return out


def legality_text(rows: list[dict]) -> str:
    """The report's lines: per op graph on a grid, each group fused from / legal from."""
    parts = []
    for (base, workload, mapspace, axis, others), groups in legality(rows).items():
        context = f" ({others})" if others else ""
        values = sorted({label for statuses in groups.values() for label, _, _ in statuses}, key=label_value)
        lines = [f"fused groups of {workload} on {base}{context}, mapspace {mapspace}, over {axis} = "
                 f"{', '.join(values)}:"]
        never = []
        for group, statuses in groups.items():
            fused = _threshold(axis, [(label, status == "chosen") for label, status, _ in statuses])
            legal = _threshold(axis, [(label, status in ("chosen", "legal")) for label, status, _ in statuses])
            unknown = [label for label, status, _ in statuses if status == "unsearched"]
            if not legal:
                never.append((group, statuses[-1][2]))
                continue
            said = [f"fused {fused}" if fused else "never chosen"] + ([f"legal {legal}"] if legal != fused else [])
            said += [f"not searched at {axis}={', '.join(unknown)}"] if unknown else []
            lines.append(f"  {group}: {'; '.join(said)}")
        if never:
            lines.append(f"  refused (or not searched) at every value: {len(never)} group(s), e.g. "
                         f"{never[0][0]}: {never[0][1]}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
