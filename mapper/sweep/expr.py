"""Integer expressions of a model preset: sizes and counts written over its params and inputs."""
from __future__ import annotations

import ast
import operator
from types import MappingProxyType

from ..errors import shown
from ..limits import MAX_EXPR, MAX_MACS
from ..units import Where
from ..validate import integer

_OPS = MappingProxyType({ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                         ast.FloorDiv: operator.floordiv})


def integer_expr(raw, env: dict[str, int], where: Where) -> int:
    """A positive integer from an int or an expression of +, -, *, // over names in `env`, at
    most 2^53 (exact in float64: a value may be a product divided later, as a KV cache's
    elements per head; the sizes it gives meet the workload loader's own limit)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise where.error(f"expected an integer or an expression such as '3 * hidden', got {shown(raw)}")
    if isinstance(raw, int):
        value = raw
    else:
        if len(raw) > MAX_EXPR:
            raise where.error(f"an expression of {len(raw):,} characters, above the limit of {MAX_EXPR}")
        try:
            tree = ast.parse(raw, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):   # ValueError: a NUL byte
            raise where.error(f"expected an expression such as '3 * hidden', got {shown(raw)}") from None
        value = _eval(tree.body, env, where, raw)
    if value <= 0:
        raise where.error(f"{shown(raw)} evaluates to {shown(value)}; expected a positive integer")
    return integer(value, where, "a positive integer", high=MAX_MACS)


def _eval(node, env, where, raw) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise where.error(f"{shown(raw)}: unknown name {node.id!r} (known: {', '.join(sorted(env))})")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left, env, where, raw), _eval(node.right, env, where, raw)
        if isinstance(node.op, ast.FloorDiv) and right == 0:
            raise where.error(f"{shown(raw)}: divides by zero")
        return _OPS[type(node.op)](left, right)
    raise where.error(f"{shown(raw)}: only integers, names and + - * // are allowed")
