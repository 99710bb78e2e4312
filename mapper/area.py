"""`mapper area ARCH`: the area of each level (one instance, all instances) and of the compute
units, their sum, and the published die area where the file gives one, each figure with its
source; and the energies the component model gave (`energy: auto`), with theirs.

The figures are the loader's (`load/area.py` resolves `auto` once); this module only lays
them out. A level without an area counts 0 in the sum and is shown as not given: off-chip
memory (HBM, DRAM) is no die area.
"""
from __future__ import annotations

from dataclasses import dataclass

from .components import MODEL
from .spec import Arch

AUTO_PARTS = ("sram", "sram_energy", "mac", "dram")      # the component model's parts an `auto` source names


@dataclass(frozen=True)
class AreaRow:
    name: str
    instances: int
    capacity: float | None         # bytes per instance; None for the compute units
    each: float | None             # mm^2 of one instance; None: not given
    source: str

    @property
    def total(self) -> float:
        return (self.each or 0.0) * self.instances


@dataclass(frozen=True)
class AutoEnergy:
    """An energy the component model gave (`energy: auto`, `energy_per_byte: auto`)."""
    name: str
    figure: str                    # e.g. "3.95 pJ per byte"
    source: str


@dataclass(frozen=True)
class AreaReport:
    arch: str
    node_nm: float | None
    rows: tuple[AreaRow, ...]      # levels outermost first, then the compute units
    die_area: float | None
    die_area_source: str
    energies: tuple[AutoEnergy, ...] = ()

    @property
    def total(self) -> float:
        return sum(row.total for row in self.rows)


def area_report(arch: Arch) -> AreaReport:
    rows = [AreaRow(lv.name, lv.instances, lv.capacity, lv.area, lv.area_source) for lv in arch.levels]
    rows.append(AreaRow(arch.compute.name, arch.compute.instances, None, arch.compute.area,
                        arch.compute.area_source))
    tech = arch.technology
    return AreaReport(arch.name, tech.node_nm, tuple(rows), tech.die_area, tech.die_area_source,
                      auto_energies(arch))


def auto_energies(arch: Arch) -> tuple[AutoEnergy, ...]:
    out = []
    for lv in arch.levels:
        if lv.energy_source:
            per_byte = lv.byte_energy_read > 0 or lv.energy_read == 0
            figure = (f"{lv.byte_energy_read:.4g} pJ per byte" if per_byte else
                      f"{lv.energy_read:.4g} pJ per access of {lv.block_size} x {lv.word_bits}-bit words")
            out.append(AutoEnergy(lv.name, figure, lv.energy_source))
    if arch.compute.energy_source:
        out.append(AutoEnergy(arch.compute.name, f"{arch.compute.energy_per_mac:.4g} pJ per MAC",
                              arch.compute.energy_source))
    return tuple(out)


def _mm2(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g} mm^2" if value >= 1e-3 else f"{value * 1e6:.4g} um^2"


def _bytes(value: float | None) -> str:
    if value is None:
        return ""
    if value == float("inf"):
        return "unlimited"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value:.4g} B"


def area_text(report: AreaReport) -> str:
    node = f" at {report.node_nm:g} nm" if report.node_nm is not None else ""
    lines = [f"area of {report.arch}{node}",
             f"  {'part':<16} {'instances':>9} {'capacity':>11} {'each':>13} {'total':>13}"]
    for row in report.rows:
        lines.append(f"  {row.name:<16} {row.instances:>9,} {_bytes(row.capacity):>11} {_mm2(row.each):>13} "
                     f"{_mm2(row.total) if row.each is not None else '-':>13}")
    lines.append(f"  {'sum':<16} {'':>9} {'':>11} {'':>13} {_mm2(report.total):>13}")
    if report.die_area is not None:
        share = f" (the sum is {report.total / report.die_area:.1%} of it)" if report.die_area else ""
        lines.append(f"  published die: {_mm2(report.die_area)}{share}; the rest is what the levels do not model")
    lines.append("sources:")
    for row in report.rows:
        lines.append(f"  {row.name}: {row.source or 'not given (counts 0: off-chip or unknown)'}")
    if report.die_area is not None:
        lines.append(f"  die: {report.die_area_source or 'given in the file'}")
    for energy in report.energies:
        lines.append(f"  {energy.name} energy: {energy.figure}, {energy.source}")
    for part, source in model_sources(report).items():
        lines.append(f"  component model {part}: {source}")
    return "\n".join(lines)


def model_sources(report: AreaReport) -> dict[str, str]:
    """The component model's sources for each of its parts some figure of `report` used."""
    used = " ".join([row.source for row in report.rows] + [e.source for e in report.energies])
    return {part: MODEL.source(part) for part in AUTO_PARTS if f"(component model: {part})" in used}


def area_json(report: AreaReport) -> dict:
    return {"arch": report.arch, "node_nm": report.node_nm, "total_mm2": report.total,
            "die_area_mm2": report.die_area, "die_area_source": report.die_area_source,
            "component_model_sources": model_sources(report),
            "parts": [{"name": row.name, "instances": row.instances, "capacity_bytes": row.capacity,
                       "each_mm2": row.each, "total_mm2": row.total if row.each is not None else None,
                       "source": row.source} for row in report.rows],
            "auto_energies": [{"name": e.name, "figure": e.figure, "source": e.source} for e in report.energies]}


def _run(args) -> int:
    from .load import load_arch
    from .report import strict_json
    report = area_report(load_arch(args.arch))
    print(strict_json(area_json(report)) if args.json else area_text(report))
    return 0


def add_command(sub) -> None:
    p = sub.add_parser("area", help="area per level and in total, with each figure's source")
    p.add_argument("arch", help="architecture YAML file or preset name")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=_run)
