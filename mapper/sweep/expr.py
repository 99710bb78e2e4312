"""Integer expressions of a model preset: sizes and counts written over its params and inputs."""
from __future__ import annotations

import ast
import operator
from types import MappingProxyType

from ..units import Where

_OPS = MappingProxyType({ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                         ast.FloorDiv: operator.floordiv})


def integer_expr(raw, env: dict[str, int], where: Where) -> int:
    """A positive integer from an int or an expression of +, -, *, // over names in `env`."""
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise where.error(f"expected an integer or an expression such as '3 * hidden', got {raw!r}")
    if isinstance(raw, int):
        value = raw
    else:
        try:
            tree = ast.parse(raw, mode="eval")
        except SyntaxError:
            raise where.error(f"expected an expression such as '3 * hidden', got {raw!r}") from None
        value = _eval(tree.body, env, where, raw)
    if value <= 0:
        raise where.error(f"{raw!r} evaluates to {value}; expected a positive integer")
    return value


def _eval(node, env, where, raw) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise where.error(f"{raw!r}: unknown name {node.id!r} (known: {', '.join(sorted(env))})")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, env, where, raw), _eval(node.right, env, where, raw))
    raise where.error(f"{raw!r}: only integers, names and + - * // are allowed")
