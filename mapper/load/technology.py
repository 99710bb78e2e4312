"""The keys of an architecture file the component model (`components`) can answer:
`technology:`, a level's `area` / `area_per_byte` and the compute unit's `area` (per unit),
a level's `energy_per_byte` / `energy` and the compute unit's `energy` (per MAC), each a
figure with units or `auto` (the component model at the technology's node).

`auto` is resolved here, once, into a number with its source: every later reader sees mm^2
and pJ, and an architecture derived by `--vary` (re-read by the loader) gets the area and
energies of its own capacity and node.
"""
from __future__ import annotations

from ..components import MODEL, ComponentError
from ..errors import shown
from ..spec import Technology
from ..units import Where, parse_area
from ..validate import fields, finite_number, name_text, text

TECHNOLOGY_KEYS = ("node_nm", "mac_dtype", "dram", "die_area", "die_area_source")
MIN_NODE, MAX_NODE = 1.0, 1000.0


def technology(data, where: Where) -> Technology:
    if data is None:
        return Technology()
    fields(data, where, (), TECHNOLOGY_KEYS)
    node = data.get("node_nm")
    return Technology(
        node_nm=None if node is None else finite_number(node, where / "node_nm", "a node in nm",
                                                        MIN_NODE, MAX_NODE),
        mac_dtype=None if data.get("mac_dtype") is None else name_text(data["mac_dtype"], where / "mac_dtype"),
        dram=None if data.get("dram") is None else name_text(data["dram"], where / "dram"),
        die_area=None if data.get("die_area") is None else parse_area(data["die_area"], where / "die_area"),
        die_area_source=text(data.get("die_area_source", ""), where / "die_area_source"))


def _required(value, where: Where, hint: str):
    """A `technology:` figure an `auto` needs, or its refusal saying how to give it."""
    if value is None:
        raise where.error(f"`auto` needs {hint}")
    return value


def _node(tech: Technology, where: Where) -> float:
    return _required(tech.node_nm, where, "the technology node: add `technology: {node_nm: 7}` to the architecture")


def _mac_dtype(tech: Technology, where: Where) -> str:
    return _required(tech.mac_dtype, where, "the MAC's type: add `mac_dtype: bf16` (or int8, int16, fp16, fp32) "
                     "under `technology:`")


def level_area(data, capacity: float, where: Where, tech: Technology) -> tuple[float | None, str]:
    """(mm^2 of one instance, its source) of a level's dict, or (None, "") when it gives none."""
    if "area" in data and "area_per_byte" in data:
        raise (where / "area_per_byte").error("give `area` or `area_per_byte`, not both")
    finite = capacity != float("inf")
    if "area_per_byte" in data:
        if not finite:
            raise (where / "area_per_byte").error("an area per byte needs a finite capacity")
        per_byte = parse_area(data["area_per_byte"], where / "area_per_byte")
        return per_byte * capacity, f"area_per_byte x capacity ({where.file})"
    if "area" not in data:
        return None, ""
    if data["area"] != "auto":
        return parse_area(data["area"], where / "area"), f"given ({where.file})"
    if not finite:
        raise (where / "area").error("`auto` prices an SRAM of the level's capacity; this level's "
                                     "capacity is unlimited (give an area, 0 mm^2 for off-chip memory)")
    try:
        area = MODEL.sram(capacity, 64, _node(tech, where / "area"))[0]
    except ComponentError as exc:
        raise (where / "area").error(str(exc)) from None
    return area, f"auto: SRAM of the capacity at {tech.node_nm:g} nm (component model: sram)"


def compute_area(data, macs_per_cycle: int, where: Where, tech: Technology) -> tuple[float | None, str]:
    """(mm^2 of one compute unit, its source), or (None, "") when it gives none."""
    if "area" not in data:
        return None, ""
    if data["area"] != "auto":
        return parse_area(data["area"], where / "area"), f"given ({where.file})"
    node, dtype = _node(tech, where / "area"), _mac_dtype(tech, where / "area")
    try:
        mac = MODEL.mac(dtype, node)[0]
    except ComponentError as exc:
        raise (where / "area").error(f"{exc} (technology.mac_dtype {shown(tech.mac_dtype)})") from None
    return mac * macs_per_cycle, (f"auto: {macs_per_cycle} {tech.mac_dtype} MAC(s) at {node:g} nm "
                                  "(component model: mac)")


def energy_per_byte_auto(capacity: float, where: Where, tech: Technology) -> tuple[float, float, str]:
    """(pJ per byte read, pJ per byte written or updated, their source) of a level whose
    `energy_per_byte` (or, per access, `energy`) says `auto`: an SRAM of the level's capacity at
    the node, or for an unlimited (off-chip) level the DRAM of `technology.dram`. The SRAM model
    is linear in the access width, so the figures per byte do not depend on it."""
    try:
        if capacity == float("inf"):
            kind = _required(tech.dram, where, "the off-chip memory's kind to price a DRAM: add `dram: hbm2` "
                             "(or ddr3, lpddr4) under `technology:`")
            pj = MODEL.dram_pj_per_byte(kind)
            return pj, pj, f"auto: {kind} DRAM (component model: dram)"
        node = _node(tech, where)
        read, write = MODEL.sram(capacity, 64, node)[1:]
    except ComponentError as exc:
        raise where.error(str(exc)) from None
    return read / 8, write / 8, f"auto: SRAM of the capacity at {node:g} nm (component model: sram_energy)"


def mac_energy_auto(where: Where, tech: Technology) -> tuple[float, str]:
    """(pJ per MAC, its source) of a compute unit whose `energy` says `auto`."""
    node, dtype = _node(tech, where), _mac_dtype(tech, where)
    try:
        pj = MODEL.mac(dtype, node)[1]
    except ComponentError as exc:
        raise where.error(f"{exc} (technology.mac_dtype {shown(dtype)})") from None
    return pj, f"auto: one {dtype} MAC at {node:g} nm (component model: mac)"
