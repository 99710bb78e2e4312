"""Per-action energies from Accelergy's energy reference tables (ERT.yaml, ERT_summary.yaml).

Both give, per component (`system_top_level.shared_glb[1..1]`), a list of actions with an
energy in pJ per action. The result maps the component's own name (path and instance range
stripped) to {action: pJ}. Where an older ERT lists several argument variants of one action
(e.g. reads with and without address changes), the largest energy is taken: it is the random
access Timeloop charges when the mapping gives it no pattern to exploit (noted to the user).
"""
from __future__ import annotations

import re

from ..units import Where
from .yamlio import number


def is_ert(data) -> bool:
    return isinstance(data, dict) and ("ERT" in data or "ERT_summary" in data)


def component_name(full: str) -> str:
    """`system_top_level.PE[0..15].weights_spad[1..168]` -> `weights_spad`."""
    return re.sub(r"\[[^\]]*\]", "", str(full)).split(".")[-1].strip()


def read_ert(data, where: Where, notes: list[str]) -> dict[str, dict[str, float]]:
    if "ERT" in data:
        body, w = data["ERT"], where / "ERT"
        tables_key = "tables"
    else:
        body, w = data["ERT_summary"], where / "ERT_summary"
        tables_key = "table_summary"
    if not isinstance(body, dict) or not isinstance(body.get(tables_key), list):
        raise (w / tables_key).error("expected a list of tables, each {name, actions: [{name, energy}]}")
    out: dict[str, dict[str, float]] = {}
    for i, table in enumerate(body[tables_key]):
        tw = w / tables_key / i
        if not isinstance(table, dict) or not isinstance(table.get("name"), str) \
                or not isinstance(table.get("actions"), list):
            raise tw.error("expected {name: COMPONENT, actions: [{name: ACTION, energy: PJ}]}")
        name = component_name(table["name"])
        energies: dict[str, float] = {}
        for j, action in enumerate(table["actions"]):
            aw = tw / "actions" / j
            if not isinstance(action, dict) or not isinstance(action.get("name"), str):
                raise aw.error("expected {name: ACTION, energy: PJ}")
            key = next((k for k in ("energy", "max_energy", "average_energy") if k in action), None)
            if key is None:
                raise aw.error("expected an `energy` (or `max_energy`) in pJ")
            if key != "energy":
                notes.append(f"{where.file}: {table['name']}.{action['name']}: took `{key}` "
                             "(the summary gives no single energy)")
            value = float(number(action[key], aw / key, "an energy in pJ"))
            previous = energies.get(action["name"])
            if previous is not None and previous != value:
                notes.append(f"{where.file}: {table['name']}.{action['name']} has several argument "
                             f"variants; took the largest energy")
            energies[action["name"]] = max(value, previous or value)
        out[name] = energies
    return out


def check_matches(data, where: Where, components) -> None:
    """The ERT prices the architecture it came with: every table names one of its components,
    and every storage level and the compute unit has a table (the compute unit's with a MAC
    action). A mismatch (an ERT from another design, a renamed component) would price accesses
    at 0 pJ without a word, so it is an error naming the ERT's file and key."""
    body_key, tables_key = ("ERT", "tables") if "ERT" in data else ("ERT_summary", "table_summary")
    w = where / body_key / tables_key
    tables = data[body_key][tables_key]
    known = {c.name for c in components}
    named: dict[str, int] = {}
    for i, table in enumerate(tables):
        name = component_name(table["name"])
        if name not in known:
            raise (w / i / "name").error(f"{table['name']!r} is not a component of the architecture "
                                         f"(components: {', '.join(sorted(known))})")
        named[name] = i
    for comp in components:
        if comp.kind == "dummy":
            continue
        if comp.name not in named:
            raise w.error(f"no table for {comp.name!r}, a {comp.kind} component of the architecture "
                          f"({comp.where.file}): the ERT does not match it")
        if comp.kind == "compute":
            actions = {a["name"] for a in tables[named[comp.name]]["actions"]}
            if not actions & {"compute", "mac_random", "mac_reused"}:
                raise (w / named[comp.name] / "actions").error(
                    f"{comp.name} is the compute unit: expected a `compute` (or mac_random) action")
