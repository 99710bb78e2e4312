"""The importer's ops: what an ONNX graph becomes once layout is resolved, before dims get names.

An `Op` reads operands (a materialised tensor seen through a view, `atoms.py`) and writes one
materialised tensor. How its operands' axes relate is written as `Index` entries per operand
axis: the axis's atoms (plain: each leaf atom a dim, matched across operands by `equal`), or an
affine sum of other operands' axes (a convolution's input row `stride*p + dilation*r`). The
`kind` is an op-graph kind (`opgraph.py`) or "einsum"; `role` says what a contraction is for
(naming: a GEMM, attention's scores or values, a convolution).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .atoms import Axis


@dataclass(frozen=True)
class Affine:
    """An axis indexed by a sum of dims: ((axis of another operand, coefficient), ...)."""
    terms: tuple[tuple[Axis, int], ...]


@dataclass
class Operand:
    tensor: str
    axes: tuple                        # per axis: its atoms (an Axis), or an Affine sum


@dataclass
class Op:
    kind: str                          # "einsum" or an op-graph kind ("gelu", "softmax", "stream", ...)
    role: str                          # "gemm", "bmm", "score", "value", "conv", "pool", "elementwise", ...
    output: Operand
    inputs: list[Operand]
    equal: list[tuple[Axis, Axis]]     # atom lists an op iterates together (aligned at refinement)
    nodes: tuple                       # the ONNX nodes it stands for
    scope: tuple[str, ...]
    weights: frozenset[int] = frozenset()   # positions of inputs that are constants (weights)
    reduced: Axis | None = None        # a row reduction's row (atoms of the output's axis)
    flops_per_element: float | None = None
    passes: int | None = None
    note: str = ""                     # what the op was recognised as (a decomposed norm, GELU, ...)
    attrs: dict = field(default_factory=dict)
    id: int = -1                       # its place in the op list (`Lowered.add`)

    @property
    def name_node(self):
        return self.nodes[0]
