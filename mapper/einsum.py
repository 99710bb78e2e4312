"""Parse `Z[m,n] += A[m,k] * B[k,n]` with affine indices (`2*p+r`) into tensors and axes."""
from __future__ import annotations

import re

from .errors import shown
from .units import Where

_TENSOR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[([^\]]*)\]\s*$")
_TERM = re.compile(r"^\s*(?:([0-9]{1,9})\s*\*\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:\*\s*([0-9]{1,9}))?\s*$")


def parse_einsum(text: str, where: Where) -> list[tuple[str, list[dict[str, int]], bool]]:
    """Returns [(tensor name, [axis as {dim: coefficient}], is_output)], the output first."""
    if not isinstance(text, str) or "+=" not in text:
        raise where.error(f"expected an einsum such as 'Z[m,n] += A[m,k] * B[k,n]', got {shown(text)}")
    lhs, rhs = text.split("+=", 1)
    sides = [(lhs, True)] + [(part, False) for part in rhs.split("*") if part.strip()]
    # '*' also appears inside indices (2*p): rejoin pieces until brackets balance.
    tensors, pending = [], ""
    for piece, is_output in sides:
        pending = f"{pending}*{piece}" if pending else piece
        if pending.count("[") != pending.count("]"):
            continue
        tensors.append(_parse_tensor(pending, is_output, where))
        pending = ""
    if pending:
        raise where.error(f"unbalanced brackets in einsum {shown(text)}")
    names = [name for name, _, _ in tensors]
    if len(set(names)) != len(names):
        raise where.error(f"each tensor must appear once in the einsum, got {names}")
    if len(tensors) < 2:
        raise where.error(f"expected at least one input tensor in einsum {shown(text)}")
    return tensors


def _parse_tensor(text: str, is_output: bool, where: Where):
    match = _TENSOR.match(text)
    if not match:
        raise where.error(f"expected a tensor such as 'A[m,k]', got {shown(text.strip())}")
    name, body = match.group(1), match.group(2)
    axes = []
    for raw in body.split(","):
        axis: dict[str, int] = {}
        for term in raw.split("+"):
            term_match = _TERM.match(term)
            if not term_match or (term_match.group(1) and term_match.group(3)):
                raise where.error(f"index {shown(raw.strip())} of {name}: expected dims with optional "
                                  "integer coefficients, e.g. '2*p+r'")
            coef = int(term_match.group(1) or term_match.group(3) or 1)
            if coef <= 0:
                raise where.error(f"index {shown(raw.strip())} of {name}: coefficients must be positive")
            dim = term_match.group(2)
            axis[dim] = axis.get(dim, 0) + coef
        axes.append(axis)
    if not axes or any(not axis for axis in axes):
        raise where.error(f"tensor {name} needs at least one index")
    return name, axes, is_output
