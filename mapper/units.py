"""Parsing of human quantities: `228 KiB`, `3.35 TB/s`, `1.98 GHz`, `0.5 pJ`, dtypes.

Each parser takes the raw YAML value plus a `Where` (file and key path) for error messages and
returns a plain float/int in the project's internal units: bytes, bytes per second or per
cycle, Hz, picojoules, bits.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .errors import SpecError

UNLIMITED = math.inf

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-z/]*)\s*$")

BYTE_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
              "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
RATE_UNITS = {"b/s": 1, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12,
              "kib/s": 2**10, "mib/s": 2**20, "gib/s": 2**30, "tib/s": 2**40}
FREQ_UNITS = {"": 1, "hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
TIME_UNITS = {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12}
CYCLE_UNITS = ("", "cycle", "cycles", "clk", "clks")
ENERGY_UNITS = {"": 1, "pj": 1, "fj": 1e-3, "nj": 1e3, "uj": 1e6}
DTYPE_BITS = {"int4": 4, "fp4": 4, "int8": 8, "uint8": 8, "fp8": 8, "int16": 16, "fp16": 16,
              "bf16": 16, "int32": 32, "fp32": 32, "tf32": 32, "fp64": 64}


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


def _split(value, where: Where, what: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise where.error(f"expected {what}, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value), ""
    if isinstance(value, str):
        match = _QUANTITY.match(value)
        if match:
            return float(match.group(1)), match.group(2).lower()
    raise where.error(f"expected {what}, got {value!r}")


def _positive(number: float, where: Where, what: str) -> float:
    if not number > 0 or math.isinf(number):
        raise where.error(f"expected {what} > 0, got {number:g}")
    return number


def parse_bytes(value, where: Where, allow_unlimited: bool = True) -> float:
    """Bytes (`228 KiB`, `50 MB`, `64`); `unlimited` -> inf."""
    if allow_unlimited and isinstance(value, str) and value.strip().lower() in ("unlimited", "inf"):
        return UNLIMITED
    what = "a size such as '64 KiB' or 'unlimited'"
    number, unit = _split(value, where, what)
    if unit not in BYTE_UNITS:
        raise where.error(f"expected {what}; unknown unit {unit!r}")
    return _positive(number * BYTE_UNITS[unit], where, "a size")


def parse_bandwidth(value, where: Where, clock_hz: float) -> float:
    """Bandwidth in bytes per cycle (`64 B/cycle`, `3.35 TB/s`, a bare number = B/cycle)."""
    if isinstance(value, str) and value.strip().lower() in ("unlimited", "inf"):
        return UNLIMITED
    what = "a bandwidth such as '3.35 TB/s' or '64 B/cycle'"
    number, unit = _split(value, where, what)
    if unit in ("", "b/cycle", "b/clk"):
        per_cycle = number
    elif unit in RATE_UNITS:
        per_cycle = number * RATE_UNITS[unit] / clock_hz
    else:
        raise where.error(f"expected {what}; unknown unit {unit!r}")
    return _positive(per_cycle, where, "a bandwidth")


def parse_frequency(value, where: Where) -> float:
    what = "a frequency such as '1.98 GHz'"
    number, unit = _split(value, where, what)
    if unit not in FREQ_UNITS:
        raise where.error(f"expected {what}; unknown unit {unit!r}")
    return _positive(number * FREQ_UNITS[unit], where, "a frequency")


def parse_latency(value, where: Where, clock_hz: float) -> float:
    """Latency in cycles (`600 ns`, `0.4 us`, `250 cycles`, a bare number = cycles); may be zero."""
    what = "a latency such as '600 ns' or '250 cycles'"
    number, unit = _split(value, where, what)
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
    number, unit = _split(value, where, what)
    if unit not in ENERGY_UNITS:
        raise where.error(f"expected {what}; unknown unit {unit!r}")
    if number < 0:
        raise where.error(f"expected an energy >= 0, got {value!r}")
    return number * ENERGY_UNITS[unit]


def parse_dtype_bits(value, where: Where) -> int:
    """Bits per element: a dtype name (`bf16`) or a positive integer number of bits."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and value.lower() in DTYPE_BITS:
        return DTYPE_BITS[value.lower()]
    raise where.error(f"expected a dtype ({', '.join(DTYPE_BITS)}) or a number of bits, got {value!r}")
