"""Shape checks of decoded YAML values: a mapping with the right keys, a bounded positive
integer, a string, a name, a list of names.

Shared by the loader's readers, one module per kind of file (`load`), and the sweep's readers
(which import them through `load`). Each check raises a `SpecError` naming the file and key
path through `Where`.
"""
from __future__ import annotations

from .errors import shown
from .limits import MAX_INT, MAX_NAME, MAX_TEXT
from .units import Where


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


def positive_int(value, where: Where, what: str = "a positive integer", limit: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise where.error(f"expected {what}, got {shown(value)}")
    if value > limit:
        raise where.error(f"{value:,} is above the limit {limit:,} this tool handles")
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
