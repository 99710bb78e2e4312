"""What lowering builds: the importer's ops over materialised tensors and their views (`Lowered`),
and the helpers every kind of node uses (a new tensor, broadcasting, a streaming op)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecError
from .atoms import AtomTable, View
from .onnx_graph import Node, Shapes, Source
from .ops import Op, Operand


@dataclass
class Lowered:
    table: AtomTable
    ops: list[Op]
    base: dict[str, str]                         # tensor -> the materialised tensor it views
    views: dict[str, View]
    shapes: dict[str, tuple[int, ...]]           # materialised tensors' shapes
    dtypes: dict[str, object]
    constant: set[str]                           # materialised tensors that are not data
    weights: set[str]                            # ... of which the graph's weights (the rest: what
                                                 # shapes alone determine, a causal mask, positions)
    origins: dict[str, frozenset[str]]           # a copy -> the tensors it copies from
    producer: dict[str, int] = field(default_factory=dict)   # materialised tensor -> op id
    copies: list[Node] = field(default_factory=list)         # layout nodes that copy data
    unknown: list[Node] = field(default_factory=list)        # nodes kept as streaming ops
    folded: int = 0                              # nodes on constants only (not ops)

    def add(self, op: Op) -> Op:
        """Append an op: its id is its place, and it produces its output tensor."""
        op.id = len(self.ops)
        self.ops.append(op)
        self.producer[op.output.tensor] = op.id
        return op

    def operand(self, tensor: str) -> Operand:
        return Operand(self.base[tensor], tuple(self.views[tensor]))

    def roots(self, tensor: str) -> frozenset[str]:
        """The materialised tensors a tensor's data comes from, through views and copies (and
        what a copy's sources were copied from in turn)."""
        base = self.base[tensor]
        if base not in self.origins:
            return frozenset({base})
        return frozenset().union(*(self.roots(t) for t in self.origins[base]))


def shape_of(source: Source, shapes: Shapes, tensor: str, node: Node | None) -> tuple[int, ...]:
    shape = shapes.shapes.get(tensor)
    if shape is None:
        where = f"node {node.name} ({node.op})" if node else "the graph"
        raise SpecError(source.path, where, f"the shape of tensor {tensor} cannot be inferred: bind the "
                        "graph's symbolic dims (--seq, --batch, --dim NAME=N) or export it with fixed shapes")
    if any(s <= 0 for s in shape):
        raise SpecError(source.path, f"tensor {tensor}", f"has shape {list(shape)}: every size must be "
                        "positive (an empty tensor moves nothing)")
    return tuple(shape)


def materialise(low: Lowered, tensor: str, shape) -> None:
    low.base[tensor] = tensor
    low.views[tensor] = low.table.fresh(shape)
    low.shapes[tensor] = tuple(shape)


def constant_value(shapes: Shapes, tensor: str):
    value = shapes.values.get(tensor)
    return None if value is None else np.asarray(value)


def ints(value) -> list[int] | None:
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def aligned(low: Lowered, inputs, out_view):
    """Right-aligned broadcasting: each input axis of the output's size iterates with it."""
    equal = []
    for operand in inputs:
        for axis, out_axis in zip(reversed(operand.axes), reversed(out_view)):
            if axis and out_axis and low.table.axis_size(axis) == low.table.axis_size(out_axis):
                equal.append((axis, out_axis))
    return equal


def copy(low: Lowered, node: Node, out_shapes) -> None:
    low.copies.append(node)
    sources = frozenset(t for t in node.inputs if t and t in low.base and t not in low.constant)
    for t, shape in out_shapes.items():
        materialise(low, t, shape)
        low.origins[t] = frozenset(low.base[s] for s in sources)


def stream(low: Lowered, node: Node, out_shapes, flops: float, note: str) -> None:
    """An op known only by its bytes: every input read, the first output written; its other
    outputs read back from it (so each is written once)."""
    outs = [t for t in node.outputs if t]
    names = [t for t in node.inputs if t and t in low.base]
    first = outs[0]
    materialise(low, first, out_shapes[first])
    op = Op(kind="stream", role="opaque", output=low.operand(first),
            inputs=[low.operand(t) for t in names], equal=[], nodes=(node,), scope=node.scope,
            weights=frozenset(i for i, t in enumerate(names) if t in low.constant),
            flops_per_element=flops, note=note)
    low.add(op)
    for extra in outs[1:]:
        materialise(low, extra, out_shapes[extra])
        op2 = Op(kind="stream", role="opaque", output=low.operand(extra),
                 inputs=[low.operand(first)], equal=[], nodes=(node,), scope=node.scope,
                 flops_per_element=0.0, note=f"{node.op}: output {extra}")
        low.add(op2)
