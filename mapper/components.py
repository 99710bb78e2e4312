"""Component model: the area (and energy) of an SRAM, a MAC and a DRAM byte at a technology
node, from published figures, each constant with its source.

This is what `area: auto` in an architecture file reads (`load/arch.py`). The interface is
the `ComponentModel` protocol, so that another backend (Accelergy's `hwcomponents`, CACTI)
can fill it later; `hwcomponents` is not installable here (no distribution in this machine's
package index), so the one backend is `PublishedTables`, a sourced table (docs/SPECS.md,
"Area").

Rules (each stated once here):
- SRAM area = bits x the node's high-density 6T bitcell area / array efficiency. The bitcell
  areas are the foundries' published figures; between two nodes of the table the cell is
  interpolated log-log (a node name no longer measures a dimension, so a node between two
  published ones gets a cell between theirs). Monotone in capacity and in node.
- Logic (MAC) area and energy are Horowitz's 45 nm figures scaled to the node by the same
  bitcell table: area by the cell-area ratio (measured density, where the square of the node
  names would overstate the shrink below 22 nm), energy by its square root (switched
  capacitance goes with a length, supply voltage held: a first-order rule, so energies below
  16 nm are rough).
- SRAM access energy at 45 nm: Horowitz's 64-bit reads of 10 pJ (8 KB), 20 pJ (32 KB) and
  100 pJ (1 MB) fit 10 pJ x sqrt(capacity / 8 KiB) per 64 bits (within 13%); linear in the
  width, scaled to the node as logic energy is; a write costs what a read does (assumption).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol


class ComponentError(ValueError):
    """A question the model has no figure for (a node outside its table, an unknown dtype);
    the loader turns it into a `SpecError` at the key that asked."""


class ComponentModel(Protocol):
    """What `auto` needs: areas in mm^2 and energies in pJ, at a node given in nm."""

    def sram(self, capacity_bytes: float, width_bits: int, node_nm: float) -> tuple[float, float, float]:
        """(area mm^2, read pJ per access of width_bits, write pJ per access) of one SRAM."""

    def mac(self, dtype: str, node_nm: float) -> tuple[float, float]:
        """(area mm^2, pJ per multiply-accumulate) of one MAC unit of `dtype`."""

    def dram_pj_per_byte(self, kind: str) -> float:
        """Energy per byte moved to or from a DRAM of `kind` (interface included)."""

    def source(self, part: str) -> str:
        """The sources of the figures behind `part` ('sram', 'sram_energy', 'mac' or 'dram')."""


# High-density 6T SRAM bitcell area in um^2 by node in nm (published figures)
BITCELL_UM2 = MappingProxyType({
    3: 0.0199,    # TSMC N3B, IEDM 2022 (WikiChip Fuse, "IEDM 2022: Did We Just Witness The Death Of SRAM?")
    5: 0.021,     # TSMC N5, Yeap et al., IEDM 2019 (also N3E's cell, same WikiChip report)
    7: 0.027,     # TSMC N7, Chang et al., ISSCC 2017 (7 nm 256 Mb SRAM)
    16: 0.07,     # TSMC 16FF, Wu et al., IEDM 2013
    28: 0.127,    # TSMC 28 nm high-density cell (28HPM)
    45: 0.346,    # Intel 45 nm, Mistry et al., IEDM 2007
    65: 0.570,    # Intel 65 nm, Bai et al., IEDM 2004
})
BITCELL_SOURCE = ("HD 6T bitcells: TSMC N3B 0.0199 and N5 0.021 um2 (IEDM 2022 / Yeap IEDM 2019), "
                  "N7 0.027 (Chang ISSCC 2017), 16FF 0.07 (Wu IEDM 2013), 28HPM 0.127, "
                  "Intel 45nm 0.346 (Mistry IEDM 2007), Intel 65nm 0.570 (Bai IEDM 2004)")
# Array efficiency: WikiChip's 31.8 Mib/mm^2 macro density for TSMC's 0.021 um^2 cell is
# 2^20 x 0.021 um^2 of cells per 1/31.8 mm^2, i.e. cells fill 70% of the macro
ARRAY_EFFICIENCY = 0.70
EFFICIENCY_SOURCE = "array efficiency 0.70 (WikiChip: 31.8 Mib/mm2 macros of the 0.021 um2 cell)"

# Horowitz, "Computing's Energy Problem (and what we can do about it)", ISSCC 2014, 45 nm:
# (pJ, um^2) of one operation's unit
HOROWITZ_45NM = MappingProxyType({
    "int8_mult": (0.2, 282.0), "int32_add": (0.1, 137.0), "int32_mult": (3.1, 3495.0),
    "fp16_mult": (1.1, 1640.0), "fp32_add": (0.9, 4184.0), "fp32_mult": (3.7, 7700.0),
})
REFERENCE_NODE = 45
# a MAC: its multiplier plus the accumulator's adder (int: 32-bit; float: fp32). A 16-bit integer
# multiplier is not in the paper: 4 x the 8-bit one (array multipliers grow with bits^2)
MAC_PARTS = MappingProxyType({
    "int8": (("int8_mult", 1.0), ("int32_add", 1.0)),
    "int16": (("int8_mult", 4.0), ("int32_add", 1.0)),
    "fp16": (("fp16_mult", 1.0), ("fp32_add", 1.0)),
    "bf16": (("fp16_mult", 1.0), ("fp32_add", 1.0)),      # taken as fp16's (no published bf16 figure)
    "fp32": (("fp32_mult", 1.0), ("fp32_add", 1.0)),
})
MAC_SOURCE = ("MAC = multiplier + 32-bit accumulator adder, Horowitz ISSCC 2014 45 nm figures, "
              "scaled by the bitcell table (area: ratio, energy: its square root)")
SRAM_READ_45NM_PJ = 10.0          # per 64-bit read of an 8 KB SRAM, Horowitz ISSCC 2014
SRAM_REFERENCE_BYTES = 8 * 1024
SRAM_ENERGY_SOURCE = ("SRAM read 10 pJ x sqrt(capacity / 8 KiB) per 64 bits at 45 nm (fit to Horowitz ISSCC "
                      "2014: 10 pJ 8 KB, 20 pJ 32 KB, 100 pJ 1 MB, within 13%), linear in width, a write as a "
                      "read (assumption), scaled to the node as logic energy (square root of the bitcell ratio)")

DRAM_PJ_PER_BYTE = MappingProxyType({
    "hbm2": 31.2,      # 3.9 pJ/bit incl. I/O, O'Connor et al., "Fine-Grained DRAM", MICRO 2017
    "ddr3": 162.5,     # 1.3 nJ per 64-bit access (lower end of 1.3-2.6 nJ), Horowitz ISSCC 2014
    "lpddr4": 64.0,    # 512 pJ per 64-bit access, Accelergy's LPDDR4 entry in Timeloop's simba_like ERT
})
DRAM_SOURCE = ("HBM2 3.9 pJ/bit (O'Connor MICRO 2017); DDR3 1.3 nJ per 64 bits (Horowitz ISSCC 2014); "
               "LPDDR4 512 pJ per 64 bits (Timeloop simba_like ERT)")


def bitcell_um2(node_nm: float) -> float:
    """The node's bitcell area: the table's, or interpolated log-log between two of its nodes."""
    nodes = sorted(BITCELL_UM2)
    if not nodes[0] <= node_nm <= nodes[-1]:
        raise ComponentError(f"the component model's table covers {nodes[0]} nm to {nodes[-1]} nm, "
                             f"not {node_nm:g} nm")
    if node_nm in BITCELL_UM2:
        return BITCELL_UM2[node_nm]
    high = next(n for n in nodes if n > node_nm)
    low = nodes[nodes.index(high) - 1]
    t = math.log(node_nm / low) / math.log(high / low)
    return math.exp((1 - t) * math.log(BITCELL_UM2[low]) + t * math.log(BITCELL_UM2[high]))


def _logic_scale(node_nm: float) -> tuple[float, float]:
    """(area factor, energy factor) from 45 nm to `node_nm`."""
    ratio = bitcell_um2(node_nm) / BITCELL_UM2[REFERENCE_NODE]
    return ratio, math.sqrt(ratio)


@dataclass(frozen=True)
class PublishedTables:
    """The component model from the published figures above (a value: it holds nothing)."""

    def sram(self, capacity_bytes: float, width_bits: int, node_nm: float) -> tuple[float, float, float]:
        if not (capacity_bytes > 0 and math.isfinite(capacity_bytes)):
            raise ComponentError("an SRAM needs a finite capacity")
        area = capacity_bytes * 8 * bitcell_um2(node_nm) / ARRAY_EFFICIENCY * 1e-6
        read = (SRAM_READ_45NM_PJ * math.sqrt(capacity_bytes / SRAM_REFERENCE_BYTES) * width_bits / 64
                * _logic_scale(node_nm)[1])
        return area, read, read

    def mac(self, dtype: str, node_nm: float) -> tuple[float, float]:
        if dtype not in MAC_PARTS:
            raise ComponentError(f"no MAC figures for {dtype!r}; known: {', '.join(MAC_PARTS)}")
        area_scale, energy_scale = _logic_scale(node_nm)
        pj = sum(HOROWITZ_45NM[part][0] * times for part, times in MAC_PARTS[dtype])
        um2 = sum(HOROWITZ_45NM[part][1] * times for part, times in MAC_PARTS[dtype])
        return um2 * area_scale * 1e-6, pj * energy_scale

    def dram_pj_per_byte(self, kind: str) -> float:
        if kind not in DRAM_PJ_PER_BYTE:
            raise ComponentError(f"no DRAM figure for {kind!r}; known: {', '.join(DRAM_PJ_PER_BYTE)}")
        return DRAM_PJ_PER_BYTE[kind]

    def source(self, part: str) -> str:
        return {"sram": f"{BITCELL_SOURCE}; {EFFICIENCY_SOURCE}",
                "sram_energy": f"{SRAM_ENERGY_SOURCE}; {BITCELL_SOURCE}", "mac": f"{MAC_SOURCE}; {BITCELL_SOURCE}",
                "dram": DRAM_SOURCE}[part]


MODEL: ComponentModel = PublishedTables()
