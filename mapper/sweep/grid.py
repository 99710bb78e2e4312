"""Size values of a sweep: `4096`, `[1024, 4096]`, `"1024,4096"`, `"512..8192:x2"` (geometric,
each value F times the last), `"128..1024:+128"` (arithmetic), and the flag form
`"m=512..8192:x2 n=4096 k=1024,4096"` that names one value set per dim.

Every parser returns a tuple of positive integers in the order written (ranges ascending) and
raises `SpecError` naming the file and key on anything else. The steps of a range
(`units.progression`) are the arch grid's and the capacity curve's too (ranges of
quantities, `8MiB..256MiB:x2`).
"""
from __future__ import annotations

import itertools
import re

from ..errors import shown
from ..units import Where, progression
from ..validate import integer

# ASCII digits only (`\d` and `str.isdigit` take other scripts' digits, and '①', which int()
# refuses); each number then passes the project's one integer rule (`validate.integer`)
_INT = re.compile(r"^\s*([0-9]+)\s*$")
_RANGE = re.compile(r"^\s*([0-9]+)\s*\.\.\s*([0-9]+)\s*(?::\s*([x+])\s*([0-9]+)\s*)?$")
MAX_VALUES = 10_000      # a range that long is a typo, not a sweep


def size_values(raw, where: Where) -> tuple[int, ...]:
    """One dim's values from YAML (int, list of ints, or a string in the grammar above)."""
    if isinstance(raw, bool):
        raise where.error(f"expected a size, a list of sizes or a range 'a..b:xF', got {shown(raw)}")
    if isinstance(raw, int):
        return (_positive(raw, where),)
    if isinstance(raw, list) and raw:
        out = []
        for i, item in enumerate(raw):
            out.extend(size_values(item, where / i))
        return _unique(out)
    if isinstance(raw, str) and raw.strip():
        out = []
        for part in raw.split(","):
            out.extend(_range_or_int(part, where))
        return _unique(out)
    raise where.error(f"expected a size, a list of sizes or a range 'a..b:xF', got {shown(raw)}")


def _range_or_int(text: str, where: Where) -> list[int]:
    text = text.strip()
    if len(text) > 200:
        raise where.error(f"expected an integer or a range such as '512..8192:x2', got {shown(text)}")
    if match := _INT.match(text):
        return [_positive(_digits(match.group(1), where), where)]
    match = _RANGE.match(text)
    if not match:
        raise where.error(f"expected an integer or a range such as '512..8192:x2' or '128..1024:+128', "
                          f"got {shown(text)}")
    low = _positive(_digits(match.group(1), where), where)
    high = _positive(_digits(match.group(2), where), where)
    kind, step = match.group(3) or "+", _digits(match.group(4) or "1", where)
    if high < low:
        raise where.error(f"range {shown(text)}: the end {high} is below the start {low}")
    if (kind == "x" and step < 2) or step < 1:
        raise where.error(f"range {shown(text)}: a geometric step must be x2 or more, an arithmetic one +1 or more")
    return progression(low, high, kind, step, where, text, MAX_VALUES)


def _digits(text: str, where: Where) -> int:
    """The int of a run of ASCII digits, refused beyond the limit before it is converted (the
    text is at most 200 characters: far below Python's 4,300-digit limit)."""
    return integer(int(text), where, "a non-negative integer", low=0)


def _positive(value: int, where: Where) -> int:
    return integer(value, where, "a positive size")


def _unique(values: list[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(values))


def parse_dim_grid(text: str, where: Where) -> dict[str, tuple[int, ...]]:
    """`"m=512..8192:x2 n=4096 k=1024,4096"` -> {dim: values}, in the order written."""
    out: dict[str, tuple[int, ...]] = {}
    if not isinstance(text, str) or not text.strip():
        raise where.error("expected dims with values, e.g. 'm=512..8192:x2 n=4096 k=1024,4096'")
    for item in text.split():
        dim, eq, values = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", dim):
            raise where.error(f"expected DIM=VALUES, got {item!r} (e.g. 'm=512..8192:x2 n=4096 k=1024,4096')")
        if dim in out:
            raise where.error(f"dim {dim!r} is given twice")
        out[dim] = size_values(values, where / dim)
    return out


def combinations(grid: dict[str, tuple[int, ...]]) -> list[dict[str, int]]:
    """Every combination of the grid's values, the last dim varying fastest."""
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]
