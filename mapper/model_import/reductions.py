"""Reductions: softmax and the norms (named row reductions), batch normalisation (a per-channel
map), reductions over axes and pooling (streaming ops that keep their bytes)."""
from __future__ import annotations

import math
from types import MappingProxyType

from .lowered import aligned, constant_value, ints, materialise
from .onnx_graph import Node
from .ops import Op

REDUCE_OPS = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                        "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin"})
POOL_OPS = frozenset({"MaxPool", "AveragePool", "LpPool"})
GLOBAL_POOL_OPS = frozenset({"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})


def _softmax(low, source, shapes, node, out_shapes):
    out = node.outputs[0]
    src = node.inputs[0]
    inputs = [low.operand(src)]
    materialise(low, out, out_shapes[out])
    view = low.views[out]
    axis = node.attrs.get("axis", -1) % len(view)
    op = Op(kind="softmax", role="reduction", output=low.operand(out), inputs=inputs,
            equal=aligned(low, inputs, view), nodes=(node,), scope=node.scope, reduced=view[axis],
            note="" if node.op == "Softmax" else node.op)
    low.add(op)


def _norm(low, source, shapes, node, out_shapes, kind: str):
    out = node.outputs[0]
    names = [t for t in node.inputs if t]
    inputs = [low.operand(t) for t in names]
    materialise(low, out, out_shapes[out])
    view = low.views[out]
    axis = node.attrs.get("axis", -1) % len(view)
    row = tuple(a for ax in view[axis:] for a in ax)
    op = Op(kind=kind, role="reduction", output=low.operand(out), inputs=inputs,
            equal=aligned(low, inputs, view), nodes=(node,), scope=node.scope,
            weights=frozenset(i for i, t in enumerate(names) if t not in source.data), reduced=row)
    low.add(op)
    for extra in node.outputs[1:]:            # mean and inverse deviation: training outputs
        if extra:
            materialise(low, extra, out_shapes[extra])
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
    materialise(low, summed, out_shapes[out])
    op = Op(kind="add", role="elementwise", output=low.operand(summed), inputs=inputs,
            equal=aligned(low, inputs, low.views[summed]), nodes=(node,), scope=node.scope)
    low.add(op)
    renamed = Node(node.index, node.name, "LayerNormalization", (summed,) + tuple(node.inputs[2:4]),
                   (out,), node.attrs, node.scope)
    _norm(low, source, shapes, renamed, out_shapes, "layernorm")


def _batchnorm(low, source, shapes, node, out_shapes):
    """Inference batch normalisation: a per-channel scale and shift (2 FLOPs an element)."""
    out = node.outputs[0]
    names = [t for t in node.inputs if t]
    inputs = [low.operand(t) for t in names]
    materialise(low, out, out_shapes[out])
    view = low.views[out]
    equal = [(a, b) for a, b in zip(inputs[0].axes, view) if a and b]
    equal += [(o.axes[0], view[1]) for o in inputs[1:] if o.axes and o.axes[0]]
    op = Op(kind="map", role="elementwise", output=low.operand(out), inputs=inputs,
            equal=equal, nodes=(node,), scope=node.scope, weights=frozenset(range(1, len(names))),
            flops_per_element=2.0, note="batch normalisation (inference): a scale and shift per channel")
    low.add(op)
    for extra in node.outputs[1:]:
        if extra:
            materialise(low, extra, out_shapes[extra])
            low.constant.add(extra)


def _reduce(low, source, shapes, node, out_shapes):
    """A reduction over some axes (kept or dropped): a streaming op whose input indexes the
    reduced dims its output lacks."""
    src = node.inputs[0]
    out = node.outputs[0]
    view = low.views[src]
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        axes = ints(constant_value(shapes, node.inputs[1]))
    if node.op in ("ArgMax", "ArgMin"):
        axes = [node.attrs.get("axis", 0)]
    if axes is None:
        axes = [] if node.attrs.get("noop_with_empty_axes", 0) else list(range(len(view)))
    axes = sorted(a % len(view) for a in axes)
    materialise(low, out, out_shapes[out])
    out_view = low.views[out]
    keep = [a for a in range(len(view)) if a not in axes]
    kept_out = [ax for ax in out_view if ax] if not (node.attrs.get("keepdims", 1)) else \
        [out_view[a] for a in keep]
    equal = [(view[a], o) for a, o in zip(keep, kept_out) if view[a] and o]
    inputs = [low.operand(src)]
    op = Op(kind="stream", role="reduce", output=low.operand(out), inputs=inputs, equal=equal,
            nodes=(node,), scope=node.scope, flops_per_element=0.0, note=node.op)
    low.add(op)


def _pool(low, source, shapes, node, out_shapes):
    """Windowed pooling: a streaming op (each input element read once, each output written once;
    the window's reads of the elements it shares with its neighbours come from on chip)."""
    src, out = node.inputs[0], node.outputs[0]
    materialise(low, out, out_shapes[out])
    xv, yv = low.views[src], low.views[out]
    op = Op(kind="stream", role="pool", output=low.operand(out), inputs=[low.operand(src)],
            equal=[(a, b) for a, b in zip(xv[:2], yv[:2]) if a and b], nodes=(node,), scope=node.scope,
            flops_per_element=float(math.prod(node.attrs.get("kernel_shape") or [1])), note=node.op)
    low.add(op)


def _global_pool(low, source, shapes, node, out_shapes):
    src = node.inputs[0]
    view = low.views[src]
    out = node.outputs[0]
    materialise(low, out, out_shapes[out])
    out_view = low.views[out]
    equal = [(a, b) for a, b in zip(view[:2], out_view[:2]) if a and b]
    op = Op(kind="stream", role="reduce", output=low.operand(out), inputs=[low.operand(src)],
            equal=equal, nodes=(node,), scope=node.scope, flops_per_element=0.0, note=node.op)
    low.add(op)


HANDLERS = MappingProxyType({"Softmax": _softmax, "LogSoftmax": _softmax, "LayerNormalization": _layernorm,
                             "RMSNormalization": _rmsnorm, "com.microsoft.SimplifiedLayerNormalization": _rmsnorm,
                             "com.microsoft.SkipLayerNormalization": _skip_layernorm,
                             "BatchNormalization": _batchnorm, **{op: _reduce for op in REDUCE_OPS},
                             **{op: _pool for op in POOL_OPS}, **{op: _global_pool for op in GLOBAL_POOL_OPS}})
