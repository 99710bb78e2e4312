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
from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecError
from .atoms import AtomTable, Mismatch, View
from .onnx_graph import SHAPE_OPS, Node, Shapes, Source
from .ops import Affine, Op, Operand

VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Identity",
                      "Dropout"})
COPY_OPS = frozenset({"Slice", "Split", "Concat", "Pad", "Tile", "Gather", "GatherElements", "DepthToSpace",
                      "SpaceToDepth", "ReverseSequence", "ScatterND", "ScatterElements"})
# elementwise nodes: arithmetic per output element (estimates: a transcendental as 4)
ELEMENTWISE = {"Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Pow": 1, "Neg": 1, "Abs": 1, "Sqrt": 1, "Reciprocal": 1,
               "Exp": 4, "Log": 4, "Sin": 4, "Cos": 4, "Tanh": 4, "Sigmoid": 4, "Erf": 4, "Relu": 1,
               "LeakyRelu": 2, "PRelu": 2, "Elu": 4, "Selu": 4, "Celu": 4, "Softplus": 4, "Softsign": 2,
               "HardSigmoid": 2, "HardSwish": 3, "Mish": 8, "Gelu": 8, "Clip": 1, "Min": 1, "Max": 1,
               "Mean": 1, "Sum": 1, "Where": 1, "Cast": 0, "CastLike": 0, "Floor": 1, "Ceil": 1, "Round": 1,
               "Sign": 1, "Equal": 1, "Greater": 1, "Less": 1, "GreaterOrEqual": 1, "LessOrEqual": 1,
               "Not": 1, "And": 1, "Or": 1, "Xor": 1, "IsNaN": 1, "IsInf": 1, "Mod": 1, "BitShift": 1,
               "ThresholdedRelu": 1, "Shrink": 1, "Atan": 4, "Asin": 4, "Acos": 4, "Tan": 4,
               "Sinh": 4, "Cosh": 4, "QuickGelu": 5, "com.microsoft.FastGelu": 8,
               "com.microsoft.QuickGelu": 5, "com.microsoft.Gelu": 8}
REDUCE_OPS = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                        "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin"})
POOL_OPS = frozenset({"MaxPool", "AveragePool", "LpPool"})
GLOBAL_POOL_OPS = frozenset({"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})


@dataclass
class Lowered:
    table: AtomTable
    ops: list[Op]
    base: dict[str, str]                         # tensor -> the materialised tensor it views
    views: dict[str, View]
    shapes: dict[str, tuple[int, ...]]           # materialised tensors' shapes
    dtypes: dict[str, object]
    constant: set[str]                           # materialised tensors that are not data
    origins: dict[str, frozenset[str]]           # a copy -> the tensors it copies from
    producer: dict[str, int] = field(default_factory=dict)   # materialised tensor -> op id
    copies: list[Node] = field(default_factory=list)         # layout nodes that copy data
    unknown: list[Node] = field(default_factory=list)        # nodes kept as streaming ops
    folded: int = 0                              # nodes on constants only (not ops)

    def operand(self, tensor: str) -> Operand:
        return Operand(self.base[tensor], tuple(self.views[tensor]))

    def roots(self, tensor: str) -> frozenset[str]:
        """The materialised tensors a tensor's data comes from, through views and copies (and
        what a copy's sources were copied from in turn)."""
        base = self.base[tensor]
        if base not in self.origins:
            return frozenset({base})
        return frozenset().union(*(self.roots(t) for t in self.origins[base]))


def lower(source: Source, shapes: Shapes) -> Lowered:
    low = Lowered(AtomTable(), [], {}, {}, {}, dict(source.dtypes), set(), {})
    for name in [i.name for i in source.data_inputs]:
        _materialise(low, name, _shape(source, shapes, name, None))
    for node in source.nodes:
        if node.op in SHAPE_OPS or not any(t in source.data for t in node.inputs if t):
            low.folded += 1
            continue
        for t in node.inputs:
            if t and t not in low.base:          # a constant read by a data node
                _materialise(low, t, _shape(source, shapes, t, node))
                low.constant.add(t)
        _lower_node(low, source, shapes, node)
    return low


def _shape(source: Source, shapes: Shapes, tensor: str, node: Node | None) -> tuple[int, ...]:
    shape = shapes.shapes.get(tensor)
    if shape is None:
        where = f"node {node.name} ({node.op})" if node else "the graph"
        raise SpecError(source.path, where, f"the shape of tensor {tensor} cannot be inferred: bind the "
                        "graph's symbolic dims (--seq, --batch, --dim NAME=N) or export it with fixed shapes")
    if any(s <= 0 for s in shape):
        raise SpecError(source.path, f"tensor {tensor}", f"has shape {list(shape)}: every size must be "
                        "positive (an empty tensor moves nothing)")
    return tuple(shape)


def _materialise(low: Lowered, tensor: str, shape) -> None:
    low.base[tensor] = tensor
    low.views[tensor] = low.table.fresh(shape)
    low.shapes[tensor] = tuple(shape)


def _const(source: Source, shapes: Shapes, tensor: str):
    value = shapes.values.get(tensor)
    return None if value is None else np.asarray(value)


def _ints(value) -> list[int] | None:
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


# ------------------------------------------------------------------------------ dispatch

def _lower_node(low: Lowered, source: Source, shapes: Shapes, node: Node) -> None:
    op = node.op
    outs = [t for t in node.outputs if t]
    out_shapes = {t: _shape(source, shapes, t, node) for t in outs}
    if op in VIEW_OPS and _view(low, source, shapes, node, out_shapes):
        return
    if op == "Gather" and node.inputs[0] in source.weights and node.inputs[1] in source.data:
        return _gather_rows(low, node, out_shapes)
    if op in COPY_OPS:
        return _copy(low, node, out_shapes)
    handler = HANDLERS.get(op)
    if handler is not None:
        handler(low, source, shapes, node, out_shapes)
    elif op in ELEMENTWISE:
        _elementwise(low, source, shapes, node, out_shapes, ELEMENTWISE[op])
    else:
        low.unknown.append(node)
        _stream(low, node, out_shapes, flops=0.0, note=f"{op}: not modelled as compute (its bytes only)")


def _add(low: Lowered, node: Node, kind: str, role: str, out: str, out_shape, inputs, equal, **extra) -> Op:
    _materialise(low, out, out_shape)
    op = Op(id=len(low.ops), kind=kind, role=role, output=low.operand(out), inputs=list(inputs),
            equal=list(equal), nodes=(node,), scope=node.scope, **extra)
    low.ops.append(op)
    low.producer[out] = op.id
    return op


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
            _materialise(low, extra, out_shapes[extra])
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


def _copy(low: Lowered, node: Node, out_shapes) -> None:
    low.copies.append(node)
    sources = frozenset(t for t in node.inputs if t and t in low.base and t not in low.constant)
    for t, shape in out_shapes.items():
        _materialise(low, t, shape)
        low.origins[t] = frozenset(low.base[s] for s in sources)


def _gather_rows(low: Lowered, node: Node, out_shapes) -> None:
    """An embedding lookup: the rows it reads are a tensor of the output's shape (`<table>.rows`),
    indexed with the lookup's indices."""
    out = node.outputs[0]
    rows = f"{node.inputs[0]}.rows"
    _materialise(low, out, out_shapes[out])
    low.base[rows], low.views[rows], low.shapes[rows] = rows, low.views[out], out_shapes[out]
    low.dtypes[rows] = low.dtypes.get(node.inputs[0])
    low.constant.add(rows)
    ids = low.operand(node.inputs[1])
    axis = node.attrs.get("axis", 0)
    out_view = low.views[out]
    lead = out_view[axis:axis + len(ids.axes)]
    equal = [(a, b) for a, b in zip(ids.axes, lead) if a and b]
    op = Op(id=len(low.ops), kind="gather", role="gather", output=low.operand(out),
            inputs=[ids, Operand(rows, tuple(out_view))], equal=equal, nodes=(node,), scope=node.scope,
            weights=frozenset({1}), note="embedding lookup: the rows it reads")
    low.ops.append(op)
    low.producer[out] = op.id


# ------------------------------------------------------------------------------ elementwise

def _aligned(low: Lowered, inputs, out_view):
    """Right-aligned broadcasting: each input axis of the output's size iterates with it."""
    equal = []
    for operand in inputs:
        for axis, out_axis in zip(reversed(operand.axes), reversed(out_view)):
            if axis and out_axis and low.table.axis_size(axis) == low.table.axis_size(out_axis):
                equal.append((axis, out_axis))
    return equal


def _elementwise(low: Lowered, source: Source, shapes: Shapes, node: Node, out_shapes, flops: float) -> None:
    out = node.outputs[0]
    names = [t for t in node.inputs if t]
    inputs = [low.operand(t) for t in names]
    kind, note = _elementwise_kind(low, source, shapes, node, names)
    _materialise(low, out, out_shapes[out])
    out_view = low.views[out]
    op = Op(id=len(low.ops), kind=kind, role="elementwise", output=low.operand(out), inputs=inputs,
            equal=_aligned(low, inputs, out_view), nodes=(node,), scope=node.scope,
            weights=frozenset(i for i, t in enumerate(names) if t not in source.data),
            flops_per_element=None if kind not in ("map",) else float(flops), note=note)
    low.ops.append(op)
    low.producer[out] = op.id


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


# ------------------------------------------------------------------------------ contractions

def _matmul_views(low: Lowered, a, b, a_view, b_view, out: str, out_shape, node: Node, role="bmm", extra=None):
    """A matrix product of two views (numpy's rules: 1-D operands, batch broadcasting)."""
    _materialise(low, out, out_shape)
    z = low.views[out]
    equal = []
    a_mat = a_view[-2:] if len(a_view) >= 2 else a_view
    b_mat = b_view[-2:] if len(b_view) >= 2 else b_view
    a_k = a_mat[-1]
    b_k = b_mat[0]
    z_rest = list(z)
    if len(b_view) >= 2:
        equal.append((b_mat[1], z_rest.pop()))
    if len(a_view) >= 2:
        equal.append((a_mat[0], z_rest.pop()))
    if a_k and b_k:
        equal.append((a_k, b_k))
    a_batch, b_batch = list(a_view[:-2]), list(b_view[:-2])
    for i in range(1, len(z_rest) + 1):
        zi = z_rest[-i]
        for batch in (a_batch, b_batch):
            if i <= len(batch) and batch[-i] and zi and low.table.axis_size(batch[-i]) == low.table.axis_size(zi):
                equal.append((batch[-i], zi))
    weights = frozenset(i for i, t in enumerate((a, b)) if t in low.constant)
    z_axes = tuple(z)
    if len(a_view) >= 2 and not any(a_view[:-1]):
        # one row (a batch of one token, say): its unit dim kept, as a GEMM's m of 1
        unit = (low.table.new(1),)
        a_view = tuple(a_view[:-2]) + (unit, a_view[-1])
        z_axes = z_axes[:-2] + (unit, z_axes[-1]) if len(b_view) >= 2 else z_axes[:-1] + (unit,)
    # a data operand is indexed in the order its data is laid out in: a transposed view of the
    # last two axes is read as such (the kernel's transA/transB), not as a copy; a weight is laid
    # out as the kernel wants it ([k, n]), as the presets write it
    if len(a_view) >= 2 and a not in low.constant and _inner_first(low, a, a_view[-2], a_view[-1]):
        a_view = tuple(a_view[:-2]) + (a_view[-1], a_view[-2])
    if len(b_view) >= 2 and b not in low.constant and _inner_first(low, b, b_view[-2], b_view[-1]):
        b_view = tuple(b_view[:-2]) + (b_view[-1], b_view[-2])
    op = Op(id=len(low.ops), kind="einsum", role=role if not weights else "gemm", output=Operand(out, z_axes),
            inputs=[Operand(low.base[a], tuple(a_view)), Operand(low.base[b], tuple(b_view))], equal=equal,
            nodes=(node,), scope=node.scope, weights=weights, attrs=dict(extra or {}))
    low.ops.append(op)
    low.producer[out] = op.id
    return op


def _inner_first(low: Lowered, tensor: str, outer, inner) -> bool:
    """Whether the data of axis `outer` lies inside that of axis `inner` (a transposed view)."""
    base = low.base[tensor]
    order = {x: i for i, x in enumerate(low.table.leaves(a for axis in low.views[base] for a in axis))}
    first = [order[x] for x in low.table.leaves(outer) if x in order]
    second = [order[x] for x in low.table.leaves(inner) if x in order]
    return bool(first and second) and min(first) > max(second)


def _matmul(low, source, shapes, node, out_shapes):
    a, b = node.inputs[:2]
    _matmul_views(low, a, b, low.views[a], low.views[b], node.outputs[0], out_shapes[node.outputs[0]], node)


def _gemm(low, source, shapes, node, out_shapes):
    a, b = node.inputs[:2]
    a_view, b_view = low.views[a], low.views[b]
    if node.attrs.get("transA", 0):
        a_view = a_view[::-1]
    if node.attrs.get("transB", 0):
        b_view = b_view[::-1]
    out = node.outputs[0]
    c = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    alpha, beta = node.attrs.get("alpha", 1.0), node.attrs.get("beta", 1.0)
    product = f"{out}.product" if c or alpha != 1.0 else out
    _matmul_views(low, a, b, a_view, b_view, product, out_shapes[out], node)
    if c is None and alpha == 1.0:
        return
    # Y = alpha A B + beta C: the bias (and a scale) as elementwise ops after the product
    inputs = [low.operand(product)] + ([low.operand(c)] if c else [])
    shape = low.shapes[low.base[c]] if c else ()
    kind = "bias" if c and sum(s > 1 for s in shape) == 1 and shape[-1] > 1 else ("map" if c else "scale")
    _materialise(low, out, out_shapes[out])
    op = Op(id=len(low.ops), kind=kind, role="elementwise", output=low.operand(out), inputs=inputs,
            equal=_aligned(low, inputs, low.views[out]), nodes=(node,), scope=node.scope,
            weights=frozenset({1}) if c else frozenset(), flops_per_element=1.0 if kind == "map" else None,
            note="Gemm's C" if c else "Gemm's alpha")
    low.ops.append(op)
    low.producer[out] = op.id


def _conv(low, source, shapes, node, out_shapes, transposed=False):
    """Conv and ConvTranspose as einsums. Channels split (groups, per group) where `group` > 1:
    O[n,g,k,p] += I[n,g,c,stride*p+dilation*r] * W[g,k,c,r] (a depthwise layer has k = c = 1);
    a transposed convolution scatters: O[n,g,k,stride*p+dilation*r] += I[n,g,c,p] * W[g,c,k,r].
    A 1-wide window at stride 1 over equal sizes is a plain dim (a 1x1 convolution: p itself)."""
    x, w = node.inputs[:2]
    out = node.outputs[0]
    table = low.table
    x_shape, w_shape, y_shape = low.shapes[low.base[x]], low.shapes[low.base[w]], out_shapes[out]
    spatial = len(y_shape) - 2
    group = node.attrs.get("group", 1)
    strides = list(node.attrs.get("strides") or [1] * spatial)
    dilations = list(node.attrs.get("dilations") or [1] * spatial)
    _materialise(low, out, y_shape)
    xv, wv, yv = low.views[x], low.views[w], low.views[out]
    if not xv[0]:                                # a batch of one: its unit dim kept, as the presets' n
        unit = (table.new(1),)
        xv, yv = (unit,) + tuple(xv[1:]), (unit,) + tuple(yv[1:])
    x_channels, y_channels = table.axis_size(xv[1]), y_shape[1]
    w_first, w_second = (x_channels, y_channels // group) if transposed else (y_channels, x_channels // group)
    try:
        x_g, x_c = table.regroup((xv[1],), (group, x_channels // group))
        y_g, y_k = table.regroup((yv[1],), (group, y_channels // group))
        w_g, w_a = table.regroup((wv[0],), (group, w_first // group))
        w_b = wv[1]
    except Mismatch:
        return _stream(low, node, {out: y_shape}, flops=0.0, note="a grouped convolution whose channels do not split")
    w_c, w_k = (w_a, w_b) if transposed else (w_b, w_a)
    equal = [(xv[0], yv[0]), (x_g, y_g), (w_g, y_g), (x_c, w_c), (w_k, y_k)]
    kernel = wv[2:]
    x_index, y_index = list(xv[2:]), list(yv[2:])
    for i in range(spatial):
        small = w_shape[2 + i] == 1
        if not transposed and small and strides[i] == 1 and x_shape[2 + i] == y_shape[2 + i]:
            equal.append((xv[2 + i], yv[2 + i]))          # a 1-wide window at stride 1: the same positions
            continue
        inner = xv[2 + i] if transposed else yv[2 + i]
        terms = ((inner, strides[i]),) + (() if small else ((kernel[i], dilations[i]),))
        if transposed:
            y_index[i] = Affine(terms)
        else:
            x_index[i] = Affine(terms)
    op = Op(id=len(low.ops), kind="einsum", role="conv",
            output=Operand(out, (yv[0], y_g, y_k) + tuple(y_index)),
            inputs=[Operand(low.base[x], (xv[0], x_g, x_c) + tuple(x_index)),
                    Operand(low.base[w], (w_g, w_a, w_b) + tuple(kernel))],
            equal=[(a, b) for a, b in equal if a and b], nodes=(node,), scope=node.scope,
            weights=frozenset({1}) if w in low.constant else frozenset(),
            attrs={"group": group, "transposed": transposed})
    low.ops.append(op)
    low.producer[out] = op.id
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    if bias is not None:
        _conv_bias(low, node, op, out, bias, y_shape)


def _conv_bias(low: Lowered, node: Node, conv: Op, out: str, bias: str, y_shape) -> None:
    """A convolution's bias as its own elementwise op (per output channel)."""
    product = f"{out}.product"
    low.base[product], low.views[product], low.shapes[product] = product, low.views[out], y_shape
    conv.output = Operand(product, conv.output.axes)
    low.producer[product] = conv.id
    low.dtypes[product] = low.dtypes.get(out)
    _materialise(low, out, y_shape)
    yv = low.views[out]
    b = low.operand(bias)
    equal = [(b.axes[0], yv[1])] + [(a, c) for a, c in zip(low.views[product], yv) if a and c]
    op = Op(id=len(low.ops), kind="map", role="elementwise", output=low.operand(out),
            inputs=[Operand(product, low.views[product]), b], equal=equal, nodes=(node,), scope=node.scope,
            weights=frozenset({1}), flops_per_element=1.0, note="convolution bias, per output channel")
    low.ops.append(op)
    low.producer[out] = op.id


def _conv_transpose(low, source, shapes, node, out_shapes):
    _conv(low, source, shapes, node, out_shapes, transposed=True)


def _einsum(low, source, shapes, node, out_shapes):
    """ONNX's Einsum: letters name the dims (no ellipsis: with one it is a streaming op)."""
    equation = str(node.attrs.get("equation", "")).replace(" ", "")
    out = node.outputs[0]
    if "..." in equation or "->" not in equation:
        return _stream(low, node, out_shapes, flops=0.0, note=f"Einsum {equation} (implicit output or ellipsis)")
    lhs, rhs = equation.split("->")
    terms = lhs.split(",")
    names = [t for t in node.inputs if t]
    _materialise(low, out, out_shapes[out])
    operands = [low.operand(t) for t in names]
    first = {}
    equal = []
    for letters, view in list(zip(terms, [o.axes for o in operands])) + [(rhs, low.views[out])]:
        for letter, axis in zip(letters, view):
            if not axis:
                continue
            if letter in first:
                equal.append((first[letter], axis))
            else:
                first[letter] = axis
    weights = frozenset(i for i, t in enumerate(names) if t in low.constant)
    op = Op(id=len(low.ops), kind="einsum" if len(names) == 2 else "stream", role="einsum",
            output=low.operand(out), inputs=operands, equal=equal, nodes=(node,), scope=node.scope,
            weights=weights, flops_per_element=None if len(names) == 2 else 0.0,
            attrs={"letters": [*terms, rhs]})
    low.ops.append(op)
    low.producer[out] = op.id


def _attention(low, source, shapes, node, out_shapes):
    """ONNX's Attention (opset 23): scores, scale, mask, softmax and values as five ops."""
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) > 3 and node.inputs[3] else None
    out = node.outputs[0]
    table = low.table
    qs, ks = low.shapes[low.base[q]], low.shapes[low.base[k]]
    hq = node.attrs.get("q_num_heads") or (qs[1] if len(qs) == 4 else 1)
    hk = node.attrs.get("kv_num_heads") or (ks[1] if len(ks) == 4 else 1)
    try:
        qv, kv, vv = (_heads(low, t, h) for t, h in ((q, hq), (k, hk), (v, hk)))
        group = hq // hk
        qv = qv[:1] + table.regroup((qv[1],), (hk, group)) + qv[2:] if group > 1 else qv[:2] + ((),) + qv[2:]
        rep = ((table.new(group, broadcast=True),) if group > 1 else ())
        kv = kv[:2] + (rep,) + kv[2:]
        vv = vv[:2] + (rep,) + vv[2:]
    except Mismatch:
        return _stream(low, node, out_shapes, flops=0.0, note="Attention whose heads do not split")
    b, s, l = qs[0], qv[3], kv[3]
    s_len, l_len = table.axis_size(s), table.axis_size(l)
    dims = (b, hk, group, s_len, l_len)
    scores = f"{out}.scores"
    kt = kv[:3] + (kv[4], kv[3])
    score = _matmul_views(low, q, k, qv, kt, scores, dims, node, role="score")
    score.inputs[1] = Operand(low.base[k], kt)
    steps = [("scale", None), ("mask", mask), ("softmax", None)]
    current = scores
    for kind, extra in steps:
        if kind == "mask" and extra is None and not node.attrs.get("is_causal", 0):
            continue
        nxt = f"{out}.{kind}"
        inputs = [low.operand(current)] + ([low.operand(extra)] if extra else [])
        _materialise(low, nxt, dims)
        reduced = low.views[nxt][-1] if kind == "softmax" else None
        op = Op(id=len(low.ops), kind=kind, role="elementwise" if kind != "softmax" else "reduction",
                output=low.operand(nxt), inputs=inputs, equal=_aligned(low, inputs, low.views[nxt]),
                nodes=(node,), scope=node.scope, weights=frozenset({1}) if extra else frozenset(),
                reduced=reduced, note="causal mask" if kind == "mask" and extra is None else "")
        low.ops.append(op)
        low.producer[nxt] = op.id
        current = nxt
    dv = vv[4]
    _matmul_views(low, current, v, low.views[current], vv, f"{out}.values",
                  (b, hk, group, s_len, table.axis_size(dv)), node, role="value")
    # the result in the node's own layout: a view of the values
    values = f"{out}.values"
    low.base[out] = low.base[values]
    try:
        low.views[out] = table.regroup(low.views[values], out_shapes[out]) if len(out_shapes[out]) != 4 else \
            table.regroup(low.views[values], out_shapes[out])
    except Mismatch:
        _copy(low, node, {out: out_shapes[out]})


def _heads(low: Lowered, tensor: str, heads: int) -> View:
    """A [B, H, S, D] view of an attention input given as such or as [B, S, H*D]."""
    view = low.views[tensor]
    if len(view) == 4:
        return view
    b, s, hd = view
    split = low.table.regroup((hd,), (heads, low.table.axis_size(hd) // heads))
    return (b, split[0], s, split[1])


# ------------------------------------------------------------------------------ reductions

def _softmax(low, source, shapes, node, out_shapes):
    out = node.outputs[0]
    src = node.inputs[0]
    inputs = [low.operand(src)]
    _materialise(low, out, out_shapes[out])
    view = low.views[out]
    axis = node.attrs.get("axis", -1) % len(view)
    op = Op(id=len(low.ops), kind="softmax", role="reduction", output=low.operand(out), inputs=inputs,
            equal=_aligned(low, inputs, view), nodes=(node,), scope=node.scope, reduced=view[axis],
            note="" if node.op == "Softmax" else node.op)
    low.ops.append(op)
    low.producer[out] = op.id


def _norm(low, source, shapes, node, out_shapes, kind: str):
    out = node.outputs[0]
    names = [t for t in node.inputs if t]
    inputs = [low.operand(t) for t in names]
    _materialise(low, out, out_shapes[out])
    view = low.views[out]
    axis = node.attrs.get("axis", -1) % len(view)
    row = tuple(a for ax in view[axis:] for a in ax)
    op = Op(id=len(low.ops), kind=kind, role="reduction", output=low.operand(out), inputs=inputs,
            equal=_aligned(low, inputs, view), nodes=(node,), scope=node.scope,
            weights=frozenset(i for i, t in enumerate(names) if t not in source.data), reduced=row)
    low.ops.append(op)
    low.producer[out] = op.id
    for extra in node.outputs[1:]:            # mean and inverse deviation: training outputs
        if extra:
            _materialise(low, extra, out_shapes[extra])
            low.constant.add(extra)


def _layernorm(low, source, shapes, node, out_shapes):
    _norm(low, source, shapes, node, out_shapes, "layernorm")


def _rmsnorm(low, source, shapes, node, out_shapes):
    _norm(low, source, shapes, node, out_shapes, "rmsnorm")


def _skip_layernorm(low, source, shapes, node, out_shapes):
    """ONNX Runtime's SkipLayerNormalization: a residual add, then a layernorm."""
    x, skip = node.inputs[:2]
    out = node.outputs[0]
    summed = f"{out}.sum"
    inputs = [low.operand(x), low.operand(skip)]
    _materialise(low, summed, out_shapes[out])
    op = Op(id=len(low.ops), kind="add", role="elementwise", output=low.operand(summed), inputs=inputs,
            equal=_aligned(low, inputs, low.views[summed]), nodes=(node,), scope=node.scope)
    low.ops.append(op)
    low.producer[summed] = op.id
    renamed = Node(node.index, node.name, "LayerNormalization", (summed,) + tuple(node.inputs[2:4]),
                   (out,), node.attrs, node.scope)
    _norm(low, source, shapes, renamed, out_shapes, "layernorm")


def _batchnorm(low, source, shapes, node, out_shapes):
    """Inference batch normalisation: a per-channel scale and shift (2 FLOPs an element)."""
    out = node.outputs[0]
    names = [t for t in node.inputs if t]
    inputs = [low.operand(t) for t in names]
    _materialise(low, out, out_shapes[out])
    view = low.views[out]
    equal = [(a, b) for a, b in zip(inputs[0].axes, view) if a and b]
    equal += [(o.axes[0], view[1]) for o in inputs[1:] if o.axes and o.axes[0]]
    op = Op(id=len(low.ops), kind="map", role="elementwise", output=low.operand(out), inputs=inputs,
            equal=equal, nodes=(node,), scope=node.scope, weights=frozenset(range(1, len(names))),
            flops_per_element=2.0, note="batch normalisation (inference): a scale and shift per channel")
    low.ops.append(op)
    low.producer[out] = op.id
    for extra in node.outputs[1:]:
        if extra:
            _materialise(low, extra, out_shapes[extra])
            low.constant.add(extra)


def _reduce(low, source, shapes, node, out_shapes):
    """A reduction over some axes (kept or dropped): a streaming op whose input indexes the
    reduced dims its output lacks."""
    src = node.inputs[0]
    out = node.outputs[0]
    view = low.views[src]
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        axes = _ints(_const(source, shapes, node.inputs[1]))
    if node.op in ("ArgMax", "ArgMin"):
        axes = [node.attrs.get("axis", 0)]
    if axes is None:
        axes = [] if node.attrs.get("noop_with_empty_axes", 0) else list(range(len(view)))
    axes = sorted(a % len(view) for a in axes)
    _materialise(low, out, out_shapes[out])
    out_view = low.views[out]
    keep = [a for a in range(len(view)) if a not in axes]
    kept_out = [ax for ax in out_view if ax] if not (node.attrs.get("keepdims", 1)) else \
        [out_view[a] for a in keep]
    equal = [(view[a], o) for a, o in zip(keep, kept_out) if view[a] and o]
    inputs = [low.operand(src)]
    op = Op(id=len(low.ops), kind="stream", role="reduce", output=low.operand(out), inputs=inputs, equal=equal,
            nodes=(node,), scope=node.scope, flops_per_element=0.0,
            reduced=tuple(a for i in axes for a in view[i]), note=node.op, attrs={"axes": axes})
    low.ops.append(op)
    low.producer[out] = op.id


def _pool(low, source, shapes, node, out_shapes):
    """Windowed pooling: a streaming op whose input rows are `stride*p + dilation*r`."""
    src = node.inputs[0]
    out = node.outputs[0]
    xv = low.views[src]
    kernel = list(node.attrs.get("kernel_shape") or [])
    spatial = len(xv) - 2
    strides = list(node.attrs.get("strides") or [1] * spatial)
    dilations = list(node.attrs.get("dilations") or [1] * spatial)
    _materialise(low, out, out_shapes[out])
    yv = low.views[out]
    x_axes = list(xv[:2])
    for i in range(spatial):
        terms = ((yv[2 + i], strides[i]),)
        if kernel[i] > 1:
            terms += (((low.table.new(kernel[i]),), dilations[i]),)
        x_axes.append(Affine(terms))
    op = Op(id=len(low.ops), kind="stream", role="pool", output=low.operand(out),
            inputs=[Operand(low.base[src], tuple(x_axes))],
            equal=[(a, b) for a, b in zip(xv[:2], yv[:2]) if a and b], nodes=(node,),
            scope=node.scope, flops_per_element=float(math.prod(kernel)), note=node.op)
    low.ops.append(op)
    low.producer[out] = op.id


def _global_pool(low, source, shapes, node, out_shapes):
    src = node.inputs[0]
    view = low.views[src]
    out = node.outputs[0]
    _materialise(low, out, out_shapes[out])
    out_view = low.views[out]
    equal = [(a, b) for a, b in zip(view[:2], out_view[:2]) if a and b]
    op = Op(id=len(low.ops), kind="stream", role="reduce", output=low.operand(out), inputs=[low.operand(src)],
            equal=equal, nodes=(node,), scope=node.scope, flops_per_element=0.0, note=node.op,
            reduced=tuple(a for ax in view[2:] for a in ax))
    low.ops.append(op)
    low.producer[out] = op.id


def _stream(low: Lowered, node: Node, out_shapes, flops: float, note: str) -> None:
    """An op known only by its bytes: every input read, the first output written; its other
    outputs read back from it (so each is written once)."""
    outs = [t for t in node.outputs if t]
    names = [t for t in node.inputs if t and t in low.base]
    first = outs[0]
    _materialise(low, first, out_shapes[first])
    op = Op(id=len(low.ops), kind="stream", role="opaque", output=low.operand(first),
            inputs=[low.operand(t) for t in names], equal=[], nodes=(node,), scope=node.scope,
            weights=frozenset(i for i, t in enumerate(names) if t in low.constant),
            flops_per_element=flops, note=note)
    low.ops.append(op)
    low.producer[first] = op.id
    for extra in outs[1:]:
        _materialise(low, extra, out_shapes[extra])
        op2 = Op(id=len(low.ops), kind="stream", role="opaque", output=low.operand(extra),
                 inputs=[low.operand(first)], equal=[], nodes=(node,), scope=node.scope,
                 flops_per_element=0.0, note=f"{node.op}: output {extra}")
        low.ops.append(op2)
        low.producer[extra] = op2.id


HANDLERS = {"MatMul": _matmul, "Gemm": _gemm, "Conv": _conv, "ConvTranspose": _conv_transpose,
            "Einsum": _einsum, "Attention": _attention, "Softmax": _softmax, "LogSoftmax": _softmax,
            "LayerNormalization": _layernorm, "RMSNormalization": _rmsnorm,
            "com.microsoft.SimplifiedLayerNormalization": _rmsnorm,
            "com.microsoft.SkipLayerNormalization": _skip_layernorm,
            "BatchNormalization": _batchnorm, **{op: _reduce for op in REDUCE_OPS},
            **{op: _pool for op in POOL_OPS}, **{op: _global_pool for op in GLOBAL_POOL_OPS}}
