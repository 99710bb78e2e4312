"""Shape checks of decoded YAML values: a mapping with the right keys, a bounded integer, a
finite number, a string, a name, a list of names.

Shared by every reader of a file: the loader's (one module per kind of file, `load`), the
sweep's and the model files' (`sweep`), the Timeloop files' (`timeloop`) and the Triton
configs' (`emit.from_config`). Each check raises a `SpecError` naming the file and key path
through `Where`.

One rule for integers everywhere (`integer`): an integer is an int, never a bool, a NaN or an
infinity, a float with a fraction or a digit `int()` refuses ('①'), and it lies within a stated
range; the error shows the value without converting a huge one to text (`errors.amount`).
"""
from __future__ import annotations

import math
import re

from .errors import amount, shown
from .limits import MAX_INT, MAX_NAME, MAX_TEXT
from .units import Where

# A number written as text (Timeloop files quote some): ASCII digits only, since `str.isdigit`
# also takes '①' and '²', which `int()` refuses, and `int()` takes other scripts' digits
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
MAX_NUMBER_TEXT = 40        # characters of a number written as text (2^64 has 20 digits)


def fields(data, where: Where, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """Check that `data` is a mapping with all `required` keys and nothing unknown."""
    if not isinstance(data, dict):
        raise where.error(f"expected a mapping with keys {', '.join(required + optional)}, "
                          f"got {type(data).__name__}")
    unknown = [k for k in data if k not in required + optional]
    if unknown:
        raise (where / unknown[0]).error(
            f"unknown key; expected one of {', '.join(required + optional)}")
    missing = [k for k in required if k not in data]
    if missing:
        raise (where / missing[0]).error("required key is missing")
    return data


def integer(value, where: Where, what: str = "a positive integer", low: int = 1, high: int = MAX_INT,
            spelled: bool = False) -> int:
    """An integer in [low, high]. `spelled`: also the loose spellings of Timeloop's files, a
    float without a fraction (`16.0`, `1e3`) or a string holding a number (`'16'`)."""
    got = value
    if spelled and isinstance(got, str):
        got = number_in_text(got)
    if spelled and isinstance(got, float) and math.isfinite(got) and got.is_integer():
        got = int(got)
    if isinstance(got, bool) or not isinstance(got, int):
        raise where.error(f"expected {what}, got {shown(value)}")
    if got < low:
        raise where.error(f"expected {what}, got {amount(got)}")
    if got > high:
        raise where.error(f"{amount(got)} is above the limit {amount(high)} this tool handles")
    return got


def positive_int(value, where: Where, what: str = "a positive integer", limit: int = MAX_INT) -> int:
    return integer(value, where, what, 1, limit)


def finite_number(value, where: Where, what: str = "a number", low: float = -math.inf,
                  high: float = math.inf, spelled: bool = False) -> float:
    """A finite number in [low, high] as a float (an int too large for a float is refused, not
    an OverflowError); `spelled` as for `integer`."""
    got = number_in_text(value) if spelled and isinstance(value, str) else value
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise where.error(f"expected {what}, got {shown(value)}")
    if isinstance(got, int) and abs(got) > 2**1023:
        raise where.error(f"{amount(got)} is above the limit {high:g} this tool handles")
    got = float(got)
    if not math.isfinite(got):
        raise where.error(f"expected {what} (a finite number), got {shown(value)}")
    if got < low:
        raise where.error(f"expected {what} >= {low:g}, got {got:g}")
    if got > high:
        raise where.error(f"{got:g} is above the limit {high:g} this tool handles")
    return got


def number_in_text(text: str):
    """The int or float a string holds (ASCII digits, at most MAX_NUMBER_TEXT characters), else
    the string itself (which the callers refuse, showing it)."""
    stripped = text.strip()
    if len(stripped) > MAX_NUMBER_TEXT:
        return text
    if _INT_TEXT.fullmatch(stripped):
        return int(stripped)
    if _FLOAT_TEXT.fullmatch(stripped):
        return float(stripped)
    return text


def flag(value, where: Where) -> bool:
    if not isinstance(value, bool):
        raise where.error(f"expected true or false, got {shown(value)}")
    return value


def text(value, where: Where, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise where.error(f"expected a string, got {shown(value)}")
    if len(value) > limit:
        raise where.error(f"a string of {len(value):,} characters, above the limit of {limit:,}")
    return value


def name_text(value, where: Where) -> str:
    """A name (of a spec, level, dim or tensor): a non-empty string of at most MAX_NAME chars."""
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"expected a name, got {shown(value)}")
    return text(value, where, MAX_NAME)


def name_list(value, where: Where) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise where.error(f"expected a list of names, got {shown(value)}")
    return [name_text(v, where / i) for i, v in enumerate(value)]
