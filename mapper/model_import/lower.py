"""ONNX nodes -> the importer's ops (`ops.py`), at one binding of the symbols.

Layout ops (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Identity, Dropout) make
*views* and cost nothing; Slice, Split, Concat, Pad, Tile, a Gather by constant indices and
their like make a *copy* (a new tensor, recorded: the element order changes). Every other node
whose inputs include data becomes an op: a contraction (MatMul, Gemm, Conv, ConvTranspose,
Einsum, Attention), an elementwise map, a row reduction, a gather of embedding rows or, for
anything else (pooling, global reductions, an operator this importer does not know), a
streaming op that keeps the node's bytes. Nodes that only constants and shapes determine
(masks, positions, shape arithmetic) are not ops: a runtime computes them once.
"""
from __future__ import annotations

import math
from types import MappingProxyType

from ..errors import SpecError
from . import contractions, reductions
from .atoms import AtomTable, Mismatch, View
from .lowered import Lowered, aligned, copy, materialise, shape_of, stream
from .onnx_graph import SHAPE_OPS, Node, Shapes, Source
from .ops import Op, Operand

VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Identity",
                      "Dropout"})
COPY_OPS = frozenset({"Slice", "Split", "Concat", "Pad", "Tile", "Gather", "GatherElements", "DepthToSpace",
                      "SpaceToDepth", "ReverseSequence", "ScatterND", "ScatterElements"})
# elementwise nodes: arithmetic per output element (estimates: a transcendental as 4)
ELEMENTWISE = MappingProxyType({
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Pow": 1, "Neg": 1, "Abs": 1, "Sqrt": 1, "Reciprocal": 1,
    "Exp": 4, "Log": 4, "Sin": 4, "Cos": 4, "Tanh": 4, "Sigmoid": 4, "Erf": 4, "Relu": 1, "LeakyRelu": 2,
    "PRelu": 2, "Elu": 4, "Selu": 4, "Celu": 4, "Softplus": 4, "Softsign": 2, "HardSigmoid": 2, "HardSwish": 3,
    "Mish": 8, "Gelu": 8, "Clip": 1, "Min": 1, "Max": 1, "Mean": 1, "Sum": 1, "Where": 1, "Cast": 0,
    "CastLike": 0, "Floor": 1, "Ceil": 1, "Round": 1, "Sign": 1, "Equal": 1, "Greater": 1, "Less": 1,
    "GreaterOrEqual": 1, "LessOrEqual": 1, "Not": 1, "And": 1, "Or": 1, "Xor": 1, "IsNaN": 1, "IsInf": 1,
    "Mod": 1, "BitShift": 1, "ThresholdedRelu": 1, "Shrink": 1, "Atan": 4, "Asin": 4, "Acos": 4, "Tan": 4,
    "Sinh": 4, "Cosh": 4, "QuickGelu": 5, "com.microsoft.FastGelu": 8, "com.microsoft.QuickGelu": 5,
    "com.microsoft.Gelu": 8})


def lower(source: Source, shapes: Shapes) -> Lowered:
    low = Lowered(AtomTable(), [], {}, {}, {}, dict(source.dtypes), set(), set(source.weights), {})
    for name in [i.name for i in source.data_inputs]:
        materialise(low, name, shape_of(source, shapes, name, None))
    for node in source.nodes:
        if node.op in SHAPE_OPS or not any(t in source.data for t in node.inputs if t):
            low.folded += 1
            continue
        for t in node.inputs:
            if t and t not in low.base:          # a constant read by a data node
                materialise(low, t, shape_of(source, shapes, t, node))
                low.constant.add(t)
        _lower_node(low, source, shapes, node)
    return low


# ------------------------------------------------------------------------------ dispatch

def _lower_node(low: Lowered, source: Source, shapes: Shapes, node: Node) -> None:
    op = node.op
    outs = [t for t in node.outputs if t]
    out_shapes = {t: shape_of(source, shapes, t, node) for t in outs}
    if op in VIEW_OPS and _view(low, source, shapes, node, out_shapes):
        return
    if op == "Gather" and node.inputs[0] in source.weights and node.inputs[1] in source.data:
        return _gather_rows(low, node, out_shapes)
    if op in COPY_OPS:
        return copy(low, node, out_shapes)
    handler = HANDLERS.get(op)
    if handler is not None:
        problem = _malformed(low, node, out_shapes)
        if problem:
            raise SpecError(source.path, f"node {node.name} ({op})", f"{problem}: not a valid {op}")
        handler(low, source, shapes, node, out_shapes)
    elif op in ELEMENTWISE:
        _elementwise(low, source, shapes, node, out_shapes, ELEMENTWISE[op])
    else:
        low.unknown.append(node)
        stream(low, node, out_shapes, flops=0.0, note=f"{op}: not modelled as compute (its bytes only)")


def _malformed(low: Lowered, node: Node, out_shapes) -> str | None:
    """What makes a node the lowering reads by its ranks and attributes unreadable (a damaged
    or hand-made graph that ONNX's inference let through), or None."""
    op = node.op
    ins = [t for t in node.inputs if t]
    ranks = [len(low.views[t]) if t in low.views else 0 for t in node.inputs]
    out_rank = len(next(iter(out_shapes.values()))) if out_shapes else 0
    if op in ("MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum") and len(ins) < 2:
        return f"{len(ins)} input(s)"
    if op == "Gemm" and ranks[:2] != [2, 2]:
        return f"inputs of ranks {ranks[:2]} (a Gemm multiplies matrices)"
    if op in ("Conv", "ConvTranspose") or op in reductions.POOL_OPS:
        rank = ranks[0]
        spatial = rank - 2
        if rank < 3 or out_rank != rank or (op != "MaxPool" and op in ("Conv", "ConvTranspose") and ranks[1] != rank):
            return f"ranks {ranks} -> {out_rank}"
        for key in ("strides", "dilations", "kernel_shape"):
            value = node.attrs.get(key)
            if value is not None and (len(value) != spatial or any(v < 1 for v in value)):
                return f"{key} {list(value)} for {spatial} spatial axes"
        if op in reductions.POOL_OPS and not node.attrs.get("kernel_shape"):
            return "no kernel_shape"
        group = node.attrs.get("group", 1)
        if op != "MaxPool" and op not in reductions.POOL_OPS and (
                group < 1 or low.table.axis_size(low.views[ins[0]][1]) % group or out_shapes[node.outputs[0]][1] % group):
            return f"group {group} does not divide the channels"
    if op == "Attention" and (len(ins) < 3 or any(r not in (3, 4) for r in ranks[:3])):
        return f"inputs of ranks {ranks[:3]}"
    axis = node.attrs.get("axis")
    if op in ("Softmax", "LogSoftmax", "LayerNormalization") and axis is not None and not -out_rank <= axis < out_rank:
        return f"axis {axis} of a rank-{out_rank} tensor"
    return None


def _view(low: Lowered, source: Source, shapes: Shapes, node: Node, out_shapes) -> bool:
    """A layout node as a view of its input; False where it cannot be one (then a copy)."""
    src = node.inputs[0]
    out = node.outputs[0]
    shape = out_shapes[out]
    view = low.views[src]
    try:
        if node.op == "Transpose":
            perm = node.attrs.get("perm") or list(range(len(view)))[::-1]
            new = tuple(view[p] for p in perm)
        elif node.op == "Expand":
            new = _expand(low, view, shape)
        else:                                   # reshape-like: the same elements in the same order
            new = low.table.regroup(view, shape)
    except Mismatch:
        return False
    if node.op == "Transpose" and [a for a in new if a] != [a for a in view if a]:
        low.copies.append(node)                 # the element order changes: a copy where materialised
    low.base[out] = low.base[src]
    low.views[out] = new
    for extra in node.outputs[1:]:              # Dropout's mask: not data anyone needs
        if extra:
            materialise(low, extra, out_shapes[extra])
            low.constant.add(extra)
    return True


def _expand(low: Lowered, view: View, shape) -> View:
    pad = len(shape) - len(view)
    padded = ((),) * pad + tuple(view)
    new = []
    for axis, size in zip(padded, shape):
        have = low.table.axis_size(axis)
        if have == size:
            new.append(axis)
        elif have == 1:
            new.append((low.table.new(size, broadcast=True),))
        else:
            raise Mismatch("expand")
    return tuple(new)


def _gather_rows(low: Lowered, node: Node, out_shapes) -> None:
    """An embedding lookup: the rows it reads are a tensor of the output's shape (`<table>.rows`),
    indexed with the lookup's indices."""
    out = node.outputs[0]
    rows = f"{node.inputs[0]}.rows"
    materialise(low, out, out_shapes[out])
    low.base[rows], low.views[rows], low.shapes[rows] = rows, low.views[out], out_shapes[out]
    low.dtypes[rows] = low.dtypes.get(node.inputs[0])
    low.constant.add(rows)
    ids = low.operand(node.inputs[1])
    axis = node.attrs.get("axis", 0)
    out_view = low.views[out]
    lead = out_view[axis:axis + len(ids.axes)]
    equal = [(a, b) for a, b in zip(ids.axes, lead) if a and b]
    op = Op(kind="gather", role="gather", output=low.operand(out),
            inputs=[ids, Operand(rows, tuple(out_view))], equal=equal, nodes=(node,), scope=node.scope,
            weights=frozenset({1}), note="embedding lookup: the rows it reads")
    low.add(op)


def _elementwise(low: Lowered, source: Source, shapes: Shapes, node: Node, out_shapes, flops: float) -> None:
    out = node.outputs[0]
    names = [t for t in node.inputs if t]
    inputs = [low.operand(t) for t in names]
    kind, note = _elementwise_kind(low, source, shapes, node, names)
    materialise(low, out, out_shapes[out])
    out_view = low.views[out]
    op = Op(kind=kind, role="elementwise", output=low.operand(out), inputs=inputs,
            equal=aligned(low, inputs, out_view), nodes=(node,), scope=node.scope,
            weights=frozenset(i for i, t in enumerate(names) if t not in source.data),
            flops_per_element=None if kind not in ("map",) else float(flops), note=note)
    low.add(op)


def _elementwise_kind(low: Lowered, source: Source, shapes: Shapes, node: Node, names) -> tuple[str, str]:
    """The op-graph kind of one elementwise node (`opgraph.ELEMENTWISE_FLOPS`)."""
    op = node.op
    data = [t for t in names if t in source.data]
    consts = [t for t in names if t not in source.data]
    if op in ("Relu",):
        return "relu", ""
    if op in ("Gelu", "com.microsoft.Gelu", "com.microsoft.FastGelu"):
        return "gelu", ""
    if op == "Add" and len(data) == 2:
        return "add", ""
    if op == "Add" and consts:
        shape = low.shapes[low.base[consts[0]]]
        if math.prod(shape) > 1 and sum(s > 1 for s in shape) == 1 and shape[-1] > 1:
            return "bias", ""
        if math.prod(shape) > 1:
            return "add", "adds a constant tensor"
    if op == "Where" and len(data) == 1 and node.inputs[0] not in source.data:
        return "mask", "selects by a constant mask"
    if op == "Mul" and len(data) == 2:
        return "mul", ""
    if op in ("Mul", "Div") and consts and node.inputs[0] in source.data:
        return "scale", ""
    return "map", op


HANDLERS = MappingProxyType({**contractions.HANDLERS, **reductions.HANDLERS})
