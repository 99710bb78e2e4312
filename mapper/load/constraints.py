"""Mapspace files: factor bounds, loop orders, keep sets and stages per level, and the
space's global knobs (perfect or imperfect factors, padding, alignment, utilisation).

Names of levels, dims and tensors are kept as written: they are checked against the arch and
workload once those meet (`bind.check_together`).
"""
from __future__ import annotations

from ..constraints import ROLES, SWAP_CHOICES, Constraints, LevelConstraints, Range
from ..errors import shown
from ..units import Where, parse_bytes
from ..validate import fields, flag, name_list, name_text, positive_int, text
from .files import spec_data


def load_constraints(spec=None) -> Constraints:
    """Mapspace constraints from a preset name, a YAML file's path or the dict such a file
    holds (`files.spec_data`); None gives the default constraints, Constraints are returned
    as they are."""
    if spec is None:
        return Constraints()
    if isinstance(spec, Constraints):
        return spec
    data, name = spec_data("constraints", spec)
    return constraints_from_dict(data, Where(name))


def _range(value, where: Where):
    if isinstance(value, int) and not isinstance(value, bool):
        positive_int(value, where)
        return Range(value, value)
    if value is None or isinstance(value, (str, float, list)):
        raise where.error(f"expected a positive integer or {{min, max, multiple_of, power_of_two}}, got {shown(value)}")
    fields(value, where, (), ("min", "max", "multiple_of", "power_of_two"))
    low = positive_int(value.get("min", 1), where / "min")
    high = value.get("max")
    if high is not None and positive_int(high, where / "max") < low:
        raise (where / "max").error(f"max {high} is below min {low}")
    return Range(low, high, positive_int(value.get("multiple_of", 1), where / "multiple_of"),
                 flag(value.get("power_of_two", False), where / "power_of_two"))


def _ranges(value, where: Where):
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise where.error("expected a mapping of dim -> value or {min, max, multiple_of, power_of_two}")
    return tuple((name_text(k, where), _range(v, where / k)) for k, v in value.items())


def constraints_from_dict(data, where: Where):
    fields(data, where, ("name",), ("description", "factors", "max_padding", "align_to_native",
                                    "min_utilization", "min_occupancy", "clusters", "swap_operands", "cta_pairs",
                                    "levels"))
    factors = data.get("factors", "auto")
    if not isinstance(factors, str) or factors not in ("auto", "perfect", "imperfect"):
        raise (where / "factors").error(f"expected 'auto', 'perfect' or 'imperfect', got {shown(factors)}")
    levels = []
    raw_levels = data.get("levels") or {}
    if not isinstance(raw_levels, dict):
        raise (where / "levels").error("expected a mapping of level name (or innermost/outermost) -> constraints")
    for key, lv in raw_levels.items():
        w = where / "levels" / key
        fields(lv, w, (), ("temporal", "spatial", "tile", "order", "innermost_order", "stationary", "forbid", "stages",
                           "keep", "bypass", "spatial_x", "spatial_y", "capacity", "tensor_depths"))
        forbid = lv.get("forbid") or []
        if not isinstance(forbid, list):
            raise (w / "forbid").error("expected a list of loop orders, each a list of dims, outermost first")
        stationary = lv.get("stationary")
        if stationary is not None and not isinstance(stationary, str):
            raise (w / "stationary").error(f"expected one of {', '.join(ROLES)} or a tensor name")
        stages = lv.get("stages")
        if stages is not None:
            if isinstance(stages, int):
                stages = [stages]
            if not isinstance(stages, list) or not stages:
                raise (w / "stages").error("expected a stage count or a list of them")
            stages = tuple(positive_int(s, w / "stages") for s in stages)
        bypass = lv.get("bypass", False)
        if not isinstance(bypass, bool):
            raise (w / "bypass").error("expected true (enumerate keep/bypass choices) or false")
        tensor_depths = flag(lv.get("tensor_depths", False), w / "tensor_depths")
        fixed = [k for k in ("temporal", "tile", "order", "innermost_order", "stationary", "forbid") if k in lv]
        if tensor_depths and fixed:
            raise (w / "tensor_depths").error(
                f"cannot be combined with {', '.join(fixed)} on the same level: its sub-levels each take "
                "a share of the level's loops (keep, bypass, stages, spatial and capacity apply)")
        levels.append((name_text(key, where / "levels"), LevelConstraints(
            temporal=_ranges(lv.get("temporal"), w / "temporal"),
            spatial=_ranges(lv.get("spatial"), w / "spatial"),
            tile=_ranges(lv.get("tile"), w / "tile"),
            order=tuple(name_list(lv["order"], w / "order")) if "order" in lv else None,
            innermost_order=(tuple(name_list(lv["innermost_order"], w / "innermost_order"))
                             if "innermost_order" in lv else None),
            stationary=stationary, stages=stages,
            forbid=tuple(tuple(name_list(o, w / "forbid" / i)) for i, o in enumerate(forbid)),
            keep=tuple(name_list(lv["keep"], w / "keep")) if "keep" in lv else None,
            bypass=bypass,
            spatial_x=_ranges(lv.get("spatial_x"), w / "spatial_x"),
            spatial_y=_ranges(lv.get("spatial_y"), w / "spatial_y"),
            capacity=parse_bytes(lv["capacity"], w / "capacity", allow_unlimited=False) if "capacity" in lv else None,
            tensor_depths=tensor_depths)))
    min_util = data.get("min_utilization", 0.0)
    if isinstance(min_util, bool) or not isinstance(min_util, (int, float)) or not 0 <= min_util <= 1:
        raise (where / "min_utilization").error(f"expected a fraction between 0 and 1, got {shown(min_util)}")
    max_padding = data.get("max_padding", 0.125)
    if isinstance(max_padding, bool) or not isinstance(max_padding, (int, float)) or not 0 <= max_padding <= 1:
        raise (where / "max_padding").error(f"expected a fraction between 0 and 1, got {shown(max_padding)}")
    align = data.get("align_to_native", True)
    if not isinstance(align, bool):
        raise (where / "align_to_native").error("expected true or false")
    clusters = data.get("clusters", False)
    if not isinstance(clusters, bool):
        raise (where / "clusters").error("expected true (thread-block clusters in the space) or false")
    swap = data.get("swap_operands", "never")
    if not isinstance(swap, str) or swap not in SWAP_CHOICES:
        raise (where / "swap_operands").error(f"expected 'never', 'auto' or 'always', got {shown(swap)}")
    return Constraints(name=name_text(data["name"], where / "name"), file=where.file,
                       description=text(data.get("description", ""), where / "description"),
                       factors=factors, max_padding=float(max_padding),
                       align_to_native=align, min_utilization=float(min_util),
                       min_occupancy=positive_int(data.get("min_occupancy", 1), where / "min_occupancy"),
                       clusters=clusters, swap_operands=swap, levels=tuple(levels),
                       cta_pairs=flag(data.get("cta_pairs", False), where / "cta_pairs"))
