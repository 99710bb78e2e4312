"""Timeloop problem files (`problem: {shape, instance}`, v0.3 and v0.4) -> this project's workload dict.

A data space's `projection` lists its axes; each axis is a sum of terms [dim] or [dim, coefficient]
(a coefficient is a name from `coefficients`, valued by `instance` or its default, or a number).
That is exactly this project's affine einsum index, so `Inputs[N, C, R*Wdilation + P*Wstride, ...]`
becomes `Inputs[N,C,1*R+2*P,...]`. The read-write data space is the einsum's output. Timeloop
problems carry no element type: the words are the architecture's `datawidth` bits.
"""
from __future__ import annotations

import re

from ..errors import shown
from ..limits import MAX_COEFFICIENT
from ..units import Where
from .yamlio import integer, number

_TERM = re.compile(r"^\s*(?:([A-Za-z_][A-Za-z0-9_]*|\d+)\s*\*\s*)?([A-Za-z_][A-Za-z0-9_]*|\d+)\s*$")


def is_problem(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("problem"), dict)


def _get(d: dict, *keys, default=None):
    for k in keys:
        if k in d:
            return d[k]
    return default


def translate(problem: dict, where: Where, word_bits: int, notes: list[str], name: str) -> dict:
    shape = problem.get("shape")
    if not isinstance(shape, dict):
        raise (where / "shape").error("expected the problem's shape {dimensions, data_spaces, ...}")
    instance = problem.get("instance")
    if not isinstance(instance, dict):
        raise (where / "instance").error("expected the problem's instance {DIM: size, ...}")
    sw = where / "shape"
    dims = shape.get("dimensions")
    if not isinstance(dims, list) or not all(isinstance(d, str) for d in dims):
        raise (sw / "dimensions").error("expected a list of dim names")
    coefficients: dict[str, float] = {}
    for i, c in enumerate(shape.get("coefficients") or []):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise (sw / "coefficients" / i).error("expected {name, default}")
        coefficients[c["name"]] = number(c.get("default", 1), sw / "coefficients" / i / "default")
    densities = instance.get("densities")
    if densities:
        raise (where / "instance" / "densities").error("unsupported: sparse tensors (densities) "
                                                       "are not modelled")
    iw = where / "instance"
    sizes: dict[str, int] = {}
    for d in dims:
        sizes[d] = integer(instance[d], iw / d, "a positive integer size") if d in instance else 1
    extra = []
    for key, value in instance.items():
        if key in dims or key == "densities":
            continue
        if key in coefficients:
            coefficients[key] = number(value, iw / key)
        else:
            extra.append(key)
    if extra:
        notes.append(f"{where.file}: instance keys that are neither dims nor coefficients ignored: "
                     f"{', '.join(map(shown, extra))}")
    spaces = _get(shape, "data_spaces", "data-spaces")
    if not isinstance(spaces, list) or not spaces:
        raise (sw / "data_spaces").error("expected a list of data spaces {name, projection, read_write}")
    tensors, output = [], None
    used: set[str] = set()
    for i, space in enumerate(spaces):
        dw = sw / "data_spaces" / i
        if not isinstance(space, dict) or not isinstance(space.get("name"), str) or "projection" not in space:
            raise dw.error("expected {name, projection, read_write}")
        axes = []
        projection = space["projection"]
        if isinstance(projection, str):
            projection = [p for p in projection.strip().strip("[]").split(",")]
        if not isinstance(projection, list):
            raise (dw / "projection").error("expected a list of axes")
        for j, axis in enumerate(projection):
            terms = _axis_terms(axis, dims, coefficients, dw / "projection" / j)
            used.update(d for d, _ in terms)
            axes.append("+".join(d if c == 1 else f"{c}*{d}" for d, c in terms))
        text = f"{space['name']}[{','.join(axes)}]"
        rw = _get(space, "read_write", "read-write", default=False)
        if rw:
            if output is not None:
                raise (dw / "read_write").error("unsupported: more than one read-write data space")
            output = text
        else:
            tensors.append(text)
    if output is None:
        raise (sw / "data_spaces").error("expected one data space with read_write: true (the output)")
    for d in dims:
        if d not in used:
            if sizes[d] != 1:
                raise (sw / "dimensions").error(f"unsupported: dim {d} (size {sizes[d]}) indexes no data space")
            notes.append(f"{where.file}: dim {d} (size 1) indexes no data space; dropped")
    return {"name": name, "description": f"imported from Timeloop ({where.file}, shape "
                                         f"{shape.get('name', '?')})",
            "einsum": f"{output} += {' * '.join(tensors)}",
            "sizes": {d: sizes[d] for d in dims if d in used}, "dtype": word_bits}


def _axis_terms(axis, dims, coefficients, where: Where) -> list[tuple[str, int]]:
    """One projection axis as [(dim, integer coefficient)]."""
    if isinstance(axis, str):
        raw_terms = []
        for part in axis.split("+"):
            m = _TERM.match(part)
            if not m:
                raise where.error(f"expected terms such as 'Wstride*P', got {axis!r}")
            raw_terms.append([t for t in (m.group(2), m.group(1)) if t])
    elif isinstance(axis, list):
        raw_terms = axis
    else:
        raise where.error(f"expected an axis such as [[R, Wdilation], [P, Wstride]], got {axis!r}")
    terms = []
    for term in raw_terms:
        if isinstance(term, str):
            term = [term]
        if not isinstance(term, list) or not 1 <= len(term) <= 2:
            raise where.error(f"expected a term [DIM] or [DIM, COEFFICIENT], got {term!r}")
        names = [str(t) for t in term]
        dim = next((t for t in names if t in dims), None)
        if dim is None:
            raise where.error(f"term {term!r} names no dim (dims: {', '.join(dims)})")
        coef = 1
        for t in names:
            if t == dim:
                continue
            if t in coefficients:
                coef = coefficients[t]
            else:
                coef = number(t, where, f"a coefficient name ({', '.join(coefficients) or 'none'}) or number")
        coef = integer(coef, where, f"a coefficient of {dim}: a non-negative integer", low=0, high=MAX_COEFFICIENT)
        if coef:
            terms.append((dim, coef))
    if not terms:
        raise where.error("an axis needs at least one dim with a non-zero coefficient")
    return terms
