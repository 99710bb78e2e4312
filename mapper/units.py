"""Parsing of human quantities: `228 KiB`, `3.35 TB/s`, `1.98 GHz`, `0.5 pJ`, dtypes.

Each parser takes the raw YAML value plus a `Where` (file and key path) for error messages and
returns a plain float/int in the project's internal units: bytes, bytes per second or per
cycle, Hz, picojoules, bits.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType

from .dtypes import canonical, element_bits, known_names
from .errors import SpecError, shown
from .limits import MAX_AREA, MAX_BITS, MAX_BYTES, MAX_CLOCK, MAX_ENERGY, MAX_RATE, MIN_CLOCK

UNLIMITED = math.inf

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z/]*(?:\^2)?)\s*$")     # ^2: areas (mm^2)

# Sizes are case-sensitive: `B` is a byte and `b` a bit (so `Gb/s` is gigabits per second);
# decimal prefixes k (or K), M, G, T; binary prefixes Ki, Mi, Gi, Ti. The words byte(s) and
# bit(s) are accepted too. A lower-case `m` would be milli, so `mb` or `mB` is refused.
# The unit tables below are read-only (MappingProxyType over a dict built once: same order,
# lookups and iteration, no mutation from elsewhere).
_PREFIXES = MappingProxyType({"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                              "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40})
_BASES = MappingProxyType({"B": 1.0, "byte": 1.0, "bytes": 1.0, "b": 0.125, "bit": 0.125, "bits": 0.125})
BYTE_UNITS = MappingProxyType({
    **{p + b: scale * per for p, scale in _PREFIXES.items() for b, per in _BASES.items()
       if not (p and b[1:])},                # prefixes go with the symbols only (KiB, Gb)
    "": 1,                                   # a bare number is bytes
})
RATE_UNITS = MappingProxyType({f"{unit}/s": scale for unit, scale in BYTE_UNITS.items() if unit})
PER_CYCLE_UNITS = MappingProxyType({
    **{f"{base}/{clock}": per for base, per in _BASES.items() for clock in ("cycle", "clk")},
    "": 1,                                   # a bare number is bytes per cycle
})
BYTE_HINT = ("units are case-sensitive: B = byte, b = bit; prefixes k, M, G, T (decimal) or "
             "Ki, Mi, Gi, Ti (binary), e.g. '64 KiB', '3.35 TB/s', '100 Gb/s', '64 B/cycle'")
FREQ_UNITS = MappingProxyType({"": 1, "hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9})
TIME_UNITS = MappingProxyType({"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12})
CYCLE_UNITS = ("", "cycle", "cycles", "clk", "clks")
ENERGY_UNITS = MappingProxyType({"": 1, "pj": 1, "fj": 1e-3, "nj": 1e3, "uj": 1e6})
# areas in mm^2; `mm^2`, `mm2` and `um^2` (or `µm²`) spellings; a bare number is mm^2
AREA_UNITS = MappingProxyType({"": 1.0, "mm^2": 1.0, "mm2": 1.0, "mm²": 1.0,
                               "um^2": 1e-6, "um2": 1e-6, "µm^2": 1e-6, "µm²": 1e-6, "µm2": 1e-6})


@dataclass(frozen=True)
class Where:
    """A position inside a spec file, used to build error messages."""

    file: str
    path: str = ""

    def __truediv__(self, key) -> "Where":
        if isinstance(key, int):
            return Where(self.file, f"{self.path}[{key}]")
        return Where(self.file, f"{self.path}.{key}" if self.path else str(key))

    def error(self, expected: str) -> SpecError:
        return SpecError(self.file, self.path, expected)


def split_quantity(value, where: Where, what: str) -> tuple[float, str]:
    """The number and the unit (case kept) of a quantity; the number is finite. (The arch
    grid's ranges split their ends with it: `8MiB..256MiB:x2` steps in MiB.)"""
    if isinstance(value, bool):
        raise where.error(f"expected {what}, got {shown(value)}")
    if isinstance(value, (int, float)):
        number, unit = value, ""
    elif isinstance(value, str) and len(value) <= 100 and (match := _QUANTITY.match(value)):
        number, unit = match.group(1), match.group(2)
    else:
        raise where.error(f"expected {what}, got {shown(value)}")
    try:
        number = float(number)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise where.error(f"expected {what} (a finite number), got {shown(value)}")
    return number, unit


def _within(number: float, where: Where, what: str, high: float, low: float = 0.0,
            low_inclusive: bool = False) -> float:
    if not (number >= low if low_inclusive else number > low) or not math.isfinite(number):
        raise where.error(f"expected {what} {'>=' if low_inclusive else '>'} {low:g}, got {number:g}")
    if number > high:
        raise where.error(f"{what} of {number:g} is above the limit of {high:g} this tool handles")
    return number


def _unlimited(value) -> bool:
    return isinstance(value, str) and value.strip().lower() in ("unlimited", "inf")


def parse_bytes(value, where: Where, allow_unlimited: bool = True) -> float:
    """Bytes (`228 KiB`, `50 MB`, `512 Kib` = 64 KiB, `64`); `unlimited` -> inf."""
    if allow_unlimited and _unlimited(value):
        return UNLIMITED
    what = "a size such as '64 KiB'" + (" or 'unlimited'" if allow_unlimited else "")
    number, unit = split_quantity(value, where, what)
    if unit not in BYTE_UNITS:
        raise where.error(f"unknown unit {shown(unit)} in {shown(value)}; {BYTE_HINT}")
    return _within(number * BYTE_UNITS[unit], where, "a size in bytes", MAX_BYTES)


def parse_bandwidth(value, where: Where, clock_hz: float) -> float:
    """Bandwidth in bytes per cycle (`64 B/cycle`, `3.35 TB/s`, `100 Gb/s`, a bare number =
    B/cycle)."""
    if _unlimited(value):
        return UNLIMITED
    what = "a bandwidth such as '3.35 TB/s' or '64 B/cycle'"
    number, unit = split_quantity(value, where, what)
    if unit in PER_CYCLE_UNITS:
        per_cycle = number * PER_CYCLE_UNITS[unit]
    elif unit in RATE_UNITS:
        per_cycle = number * RATE_UNITS[unit] / clock_hz
    else:
        raise where.error(f"unknown unit {shown(unit)} in {shown(value)}; {BYTE_HINT}")
    return _within(per_cycle, where, "a bandwidth in bytes per cycle", MAX_RATE)


def parse_frequency(value, where: Where) -> float:
    what = "a frequency such as '1.98 GHz'"
    number, unit = split_quantity(value, where, what)
    if unit.lower() not in FREQ_UNITS:
        raise where.error(f"expected {what}; unknown unit {shown(unit)}")
    hz = number * FREQ_UNITS[unit.lower()]
    if not hz > 0:
        raise where.error(f"expected a frequency > 0, got {shown(value)}")
    if not MIN_CLOCK <= hz <= MAX_CLOCK:
        raise where.error(f"frequency {hz:g} Hz is outside the range this tool handles "
                          f"({MIN_CLOCK:g} Hz to {MAX_CLOCK:g} Hz)")
    return hz


def parse_latency(value, where: Where, clock_hz: float) -> float:
    """Latency in cycles (`600 ns`, `0.4 us`, `250 cycles`, a bare number = cycles); may be zero."""
    what = "a latency such as '600 ns' or '250 cycles'"
    number, unit = split_quantity(value, where, what)
    if unit in CYCLE_UNITS:
        cycles = number
    elif unit in TIME_UNITS:
        cycles = number * TIME_UNITS[unit] * clock_hz
    else:
        raise where.error(f"expected {what}; unknown unit {unit!r}")
    if number < 0 or math.isinf(number):
        raise where.error(f"expected a latency >= 0, got {value!r}")
    return cycles


def parse_energy(value, where: Where) -> float:
    """Energy in pJ (`0.5 pJ`, `30 fJ`, a bare number = pJ); may be zero."""
    what = "an energy such as '0.5 pJ'"
    number, unit = split_quantity(value, where, what)
    if unit.lower() not in ENERGY_UNITS:
        raise where.error(f"expected {what}; unknown unit {shown(unit)}")
    return _within(number * ENERGY_UNITS[unit.lower()], where, "an energy in pJ", MAX_ENERGY,
                   low_inclusive=True)


def parse_area(value, where: Where) -> float:
    """Area in mm^2 (`2 mm^2`, `0.5 um^2`, a bare number = mm^2); may be zero (off-chip)."""
    what = "an area such as '2 mm^2' or '0.1 um^2'"
    number, unit = split_quantity(value, where, what)
    if unit not in AREA_UNITS:
        raise where.error(f"expected {what}; unknown unit {shown(unit)} (mm^2 or um^2)")
    return _within(number * AREA_UNITS[unit], where, "an area in mm^2", MAX_AREA, low_inclusive=True)


def parse_dtype(value, where: Where) -> tuple[str, int]:
    """(canonical name, bits per element) of a dtype name (`bf16`, `e4m3`), a block-scaled
    format (`nvfp4`: its elements' bits; `dtypes.py`) or a positive integer number of bits
    (name "")."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_BITS:
        return "", value
    name = canonical(value) if isinstance(value, str) and len(value) <= 40 else None
    if name is None:
        raise where.error(f"expected a dtype ({', '.join(known_names())}) or a number of bits "
                          f"from 1 to {MAX_BITS}, got {shown(value)}")
    return name, element_bits(name)


def parse_dtype_bits(value, where: Where) -> int:
    """Bits per element: a dtype name (`bf16`) or a positive integer number of bits."""
    return parse_dtype(value, where)[1]


def progression(low, high, kind: str, step, where: Where, text: str, most: int) -> list:
    """`low`, then each value `step` times (kind 'x') or `step` more (kind '+') than the last, up
    to `high`: exact for integers; floats (the arch grid's quantities) index from `low`, so
    steps of 0.1 do not drift, and reach a `high` they meet within rounding. At most `most`
    values (the range `text` is refused past them)."""
    exact = isinstance(low, int) and isinstance(step, int)
    limit = high if exact else high * (1 + 1e-9)
    values, value = [], low
    while value <= limit:
        values.append(value)
        if len(values) > most:
            raise where.error(f"range {shown(text)} has more than {most:,} values")
        if exact:
            value = value * step if kind == "x" else value + step
        else:
            value = low * step ** len(values) if kind == "x" else low + step * len(values)
    return values


MAX_GRID_VALUES = 64         # each value of a capacity grid is a search: more is a typo


def parse_byte_grid(text, where: Where) -> tuple[float, ...]:
    """Capacities from a flag, in increasing order: sizes separated by commas (`64KiB,1MiB`)
    or geometric ranges `LOW..HIGH:xF` (`8KiB..8MiB:x2`: LOW, F x LOW, ... up to HIGH), the
    sweep grid's range grammar (`sweep/grid.py`) with `parse_bytes`' sizes at its ends. Every
    value is a positive, finite size."""
    if not isinstance(text, str) or not text.strip() or len(text) > 400:
        raise where.error(f"expected sizes such as '64KiB,1MiB' or a range such as '8KiB..8MiB:x2', got {shown(text)}")
    values: list[float] = []
    for part in text.split(","):
        low, dots, rest = part.partition("..")
        if not dots:
            values.append(parse_bytes(part, where, allow_unlimited=False))
            continue
        high, colon, step = rest.partition(":")
        low, high = parse_bytes(low, where, False), parse_bytes(high, where, False)
        factor = step.strip()[1:] if colon and step.strip().startswith("x") else ""
        if not factor.isascii() or not factor.isdigit() or int(factor) < 2:
            raise where.error(f"range {shown(part.strip())}: expected a geometric step such as ':x2' after the end")
        if high < low:
            raise where.error(f"range {shown(part.strip())}: the end {high:g} B is below the start {low:g} B")
        values.extend(progression(low, high, "x", int(factor), where, part.strip(), MAX_GRID_VALUES))
    if len(values) > MAX_GRID_VALUES:
        raise where.error(f"more than {MAX_GRID_VALUES} capacities (each one is a search)")
    return tuple(sorted(set(values)))
