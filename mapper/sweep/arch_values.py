"""The values of one varied architecture field (`--vary "PATH=GRID"`, a sweep file's `vary:`).

The sweep's grammar (a value, a list, `a,b`, `a..b:xF`, `a..b:+S`: `grid`) over the field's
own units: a range's ends are read by the loader's parser of that field (`units`), so
`8MiB..256MiB:x2` and `1.5TB/s..6TB/s:x2` refuse what a file would, and its values step in the
unit of its start (a step `+S` may name its own unit). Counts (instances, block size, SMs) are
positive integers, exactly as a sweep's sizes (`grid.size_values`); a mesh is written `128x128`.

Each value comes back as (label, YAML value): the label names it in a derived architecture's
name (`32MiB`, written without spaces); the YAML value is what the loader then reads in the
field's place. Single values are passed through as written: the loader checks them there.
"""
from __future__ import annotations

import math
import re
from types import MappingProxyType

from ..errors import shown
from ..units import (Where, parse_area, parse_bandwidth, parse_bytes, parse_energy, parse_frequency,
                     parse_latency, progression, split_quantity)
from .grid import MAX_VALUES, size_values

# a field's kind -> the loader's parser of it, as (value, where, clock in Hz) -> internal units
PARSERS = MappingProxyType({
    "size": lambda value, where, clock: parse_bytes(value, where),
    "bandwidth": parse_bandwidth,
    "frequency": lambda value, where, clock: parse_frequency(value, where),
    "energy": lambda value, where, clock: parse_energy(value, where),
    "latency": parse_latency,
    "area": lambda value, where, clock: parse_area(value, where),
})
EXAMPLES = MappingProxyType({"size": "'8MiB..256MiB:x2'", "bandwidth": "'1.5TB/s..6TB/s:x2'",
                             "frequency": "'1GHz..2GHz:+0.25GHz'", "energy": "'0.5pJ..4pJ:x2'",
                             "latency": "'100ns..400ns:x2'", "area": "'0.5mm^2..4mm^2:x2'"})
KINDS = ("count", "mesh") + tuple(PARSERS)
# digits of a mesh axis: far above MAX_INSTANCES (the loader's limit), far below a slow int()
_MESH = re.compile(r"^\s*([0-9]{1,12})\s*[xX]\s*([0-9]{1,12})\s*$")
MAX_TEXT = 200          # characters of one value or range: a longer one is a typo


def field_values(kind: str, raw, where: Where, clock_hz: float) -> tuple[tuple[str, object], ...]:
    """(label, YAML value) for each value of `raw`, in the order written, each label once."""
    if kind == "count":
        return tuple((str(v), v) for v in size_values(raw, where))
    out: dict[str, object] = {}
    for item in _items(raw, where):
        pairs = [_mesh(item, where)] if kind == "mesh" else _quantities(kind, item, where, clock_hz)
        for label, value in pairs:
            out.setdefault(label, value)
    return tuple(out.items())


def _items(raw, where: Where) -> list:
    """A list's items, or a comma-separated string's parts (inside a list too), or one value."""
    if isinstance(raw, list) and raw:
        return [part for item in raw for part in _items(item, where)]
    if isinstance(raw, str) and raw.strip() and len(raw) <= 100 * MAX_TEXT:
        return raw.split(",")
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return [raw]
    raise where.error(f"expected a value, a list of values or a range such as '8MiB..256MiB:x2', got {shown(raw)}")


def _mesh(item, where: Where) -> tuple[str, list[int]]:
    match = _MESH.match(item) if isinstance(item, str) else None
    if not match:
        raise where.error(f"expected a mesh written XxY, e.g. '128x128' (several: '128x128,256x256'), "
                          f"got {shown(item)}")
    x, y = int(match.group(1)), int(match.group(2))
    return f"{x}x{y}", [x, y]


def _quantities(kind: str, item, where: Where, clock_hz: float) -> list[tuple[str, object]]:
    if not isinstance(item, str):                       # a YAML number: the field's bare unit
        return [(_text(item), item)]
    text = item.strip()
    if not text or len(text) > MAX_TEXT:
        raise where.error(f"expected a value or a range such as {EXAMPLES[kind]}, got {shown(item)}")
    if ".." not in text:
        return [("".join(text.split()), text)]
    return _range(kind, text, where, clock_hz)


def _range(kind: str, text: str, where: Where, clock_hz: float) -> list[tuple[str, str]]:
    """`a..b:xF` or `a..b:+S` (`a..b` steps by one of a's unit), stepping in a's unit."""
    parse, what = PARSERS[kind], f"a range such as {EXAMPLES[kind]}"
    low_text, _, rest = text.partition("..")
    high_text, colon, step_text = rest.partition(":")
    low_number, unit = split_quantity(low_text, where, what)
    low, high = parse(low_text, where, clock_hz), parse(high_text, where, clock_hz)
    if not (math.isfinite(low) and math.isfinite(high)):
        raise where.error(f"range {shown(text)}: its ends are numbers ('unlimited' is a value of its own)")
    # internal units per one of the start's unit (the start may be 0: then one of the unit)
    per_unit = low / low_number if low_number else parse(f"1 {unit}", where, clock_hz)
    step_text = step_text.strip() if colon else "+1"
    sign, step = step_text[:1], step_text[1:]
    if sign == "x":
        factor = split_quantity(step, where, "a factor such as 'x2'")
        if factor[1] or not factor[0] > 1 or not low_number > 0:
            raise where.error(f"range {shown(text)}: a geometric range starts above 0 and steps by a plain "
                              "factor above 1 ('x2')")
        step_number = factor[0]
    elif sign == "+":
        number, step_unit = split_quantity(step, where, f"a step such as '+1' or '+64KiB' in {shown(text)}")
        step_number = parse(step, where, clock_hz) / per_unit if step_unit else number
        if not step_number > 0:
            raise where.error(f"range {shown(text)}: an arithmetic step is above 0")
    else:
        raise where.error(f"range {shown(text)}: expected a step ':xF' or ':+S' after the ends, e.g. {EXAMPLES[kind]}")
    high_number = high / per_unit
    if high_number < low_number * (1 - 1e-12):
        raise where.error(f"range {shown(text)}: the end is below the start")
    numbers = progression(low_number, high_number, sign, step_number, where, text, MAX_VALUES)
    return [(_text(n) + unit, f"{_text(n)} {unit}".strip()) for n in numbers]


def _text(number) -> str:
    """A number as the label and the YAML text give it: 12 significant digits, so that the
    steps' rounding (0.1 + 0.2) does not show."""
    return f"{number:.12g}"
