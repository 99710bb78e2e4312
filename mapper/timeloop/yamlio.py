"""Reading Timeloop's YAML: its v0.4 node tags and its loose number/list spellings.

Timeloop's v0.4 architectures tag each node (`!Container`, `!Component`, `!Parallel`,
`!Hierarchical`); plain `yaml.safe_load` rejects unknown tags, so a small loader turns a tagged
mapping into a dict with the tag under `_tag` (and a tagged list into {"_tag", "nodes"}).
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from ..errors import SpecError, shown
from ..limits import MAX_FILE_BYTES, MAX_INT
from ..load.files import DuplicateKey, StrictLoader, check_shape
from ..units import Where
from ..validate import number_in_text, finite_number
from ..validate import integer as validate_integer

TAG_KEY = "_tag"
KNOWN_TAGS = ("Container", "Component", "Parallel", "Hierarchical", "Nothing")


class _TimeloopLoader(StrictLoader):
    """This project's strict loader (duplicate keys and oversized numbers refused) that keeps
    `!Tag` nodes as tagged dicts instead of failing."""


def _tagged(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
        return {TAG_KEY: tag_suffix, **value}
    if isinstance(node, yaml.SequenceNode):
        return {TAG_KEY: tag_suffix, "nodes": loader.construct_sequence(node, deep=True)}
    return {TAG_KEY: tag_suffix, "value": loader.construct_scalar(node)}


_TimeloopLoader.add_multi_constructor("!", _tagged)


def read_timeloop_yaml(path: Path):
    """A Timeloop file, under the same limits as this project's own files (size, nesting,
    aliases: `load.files.read_yaml`)."""
    try:
        if Path(path).stat().st_size > MAX_FILE_BYTES:
            raise SpecError(str(path), "", f"file larger than {MAX_FILE_BYTES:,} bytes (the limit "
                            "for a spec)")
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise SpecError(str(path), "", f"cannot read file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), "", f"not UTF-8 text (byte {exc.start})") from None
    try:
        check_shape(text, Path(path))
        return yaml.load(text, Loader=_TimeloopLoader)
    except DuplicateKey as exc:
        raise SpecError(str(path), f"line {exc.mark.line + 1}",
                        f"key {exc.key!r} appears twice in one mapping") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark else ""
        raise SpecError(str(path), line, f"invalid YAML ({getattr(exc, 'problem', exc)})") from None


def number(value, where: Where, what: str = "a number") -> float:
    """A finite YAML number, or a string holding one (Timeloop files quote some); NaN, an
    infinity or an int beyond a float are refused (`validate.finite_number`)."""
    if isinstance(value, str) and not isinstance(number_in_text(value), (int, float)):
        raise where.error(f"expected {what}, got {shown(value)} (expressions and variables are not "
                          "evaluated: write the number)")
    return finite_number(value, where, what, spelled=True)


def integer(value, where: Where, what: str = "a positive integer", low: int = 1, high: int = MAX_INT) -> int:
    """An integer in [low, high] in any of Timeloop's spellings (`16`, `16.0`, `'16'`): the
    project's one integer rule (`validate.integer`)."""
    return validate_integer(value, where, what, low, high, spelled=True)


_RANGE = re.compile(r"^(.*)\[\s*([0-9]+)\s*\.\.\s*([0-9]+)\s*\]\s*$")


def split_range(name: str, where: Where | None = None) -> tuple[str, int]:
    """`PE[0..15]` -> ("PE", 16); `DRAM` -> ("DRAM", 1); a range beyond the counts this tool
    handles is refused at `where` (by default the name)."""
    where = where or Where(name)
    match = _RANGE.match(name)
    if not match:
        return name.strip(), 1
    low = integer(match.group(2), where, "an instance range such as 'PE[0..15]'", low=0)
    high = integer(match.group(3), where, "an instance range such as 'PE[0..15]'", low=low)
    return match.group(1).strip(), high - low + 1


_FACTOR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*?)\s*=?\s*([0-9]+)$")


def parse_factors(value, where: Where) -> dict[str, int]:
    """Timeloop factors in any of its spellings: "R=3 P=16", "R=3,P=16", "C1 M2", [N=1, C=1]."""
    if isinstance(value, dict):
        items = [f"{k}={v}" if isinstance(k, str) and isinstance(v, (int, str)) else None
                 for k, v in value.items()]
    elif isinstance(value, list):
        items = [v if isinstance(v, str) else None for v in value]
    elif isinstance(value, str):
        items = [p for p in re.split(r"[\s,]+", value.strip()) if p]
    else:
        raise where.error(f"expected factors such as 'R=3 P=16', got {shown(value)}")
    out: dict[str, int] = {}
    for item in items:
        match = _FACTOR.match(item.strip()) if isinstance(item, str) and len(item) <= 200 else None
        if not match:
            raise where.error(f"expected factors such as 'R=3 P=16' or 'R3', got {shown(value)}")
        # 0 is kept as written: the readers refuse it where a loop bound must be positive
        out[match.group(1)] = integer(match.group(2), where, "a factor such as 'R=3'", low=0)
    return out


def parse_permutation(value, dims, where: Where) -> list[str]:
    """A permutation, innermost first: "RPK", "R P K" or [R, P, K] (dims may have long names)."""
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise where.error(f"expected a permutation such as 'RPK' or [R, P, K], got {shown(value)}")
        perm = list(value)
    elif isinstance(value, str):
        text = value.strip()
        if any(c in text for c in " ,"):
            perm = [p for p in re.split(r"[\s,]+", text) if p]
        else:
            perm, rest = [], text
            longest_first = sorted(dims, key=len, reverse=True)
            while rest:
                name = next((d for d in longest_first if rest.startswith(d)), None)
                if name is None:
                    raise where.error(f"permutation {shown(value)}: {shown(rest)} does not start with a dim "
                                      f"(dims: {', '.join(dims)})")
                perm.append(name)
                rest = rest[len(name):]
    else:
        raise where.error(f"expected a permutation such as 'RPK' (innermost first), got {shown(value)}")
    for d in perm:
        if d not in dims:
            raise where.error(f"permutation {shown(value)} names {shown(d)}, not a dim (dims: {', '.join(dims)})")
    if len(set(perm)) != len(perm):
        raise where.error(f"permutation {shown(value)} names a dim twice")
    return perm
