"""Contractions: MatMul, Gemm, Conv, ConvTranspose, Einsum and ONNX's Attention as einsum ops
(`ops.py`) over the operands' views; a Gemm's or a convolution's bias as an elementwise op of
its own."""
from __future__ import annotations

from types import MappingProxyType

from .atoms import Mismatch, View
from .lowered import Lowered, aligned, copy, materialise, stream
from .onnx_graph import Node
from .ops import Affine, Op, Operand


def matmul_views(low: Lowered, a, b, a_view, b_view, out: str, out_shape, node: Node, role="bmm") -> Op:
    """A matrix product of two views (numpy's rules: 1-D operands, batch broadcasting)."""
    materialise(low, out, out_shape)
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
    if len(a_view) >= 2 and a not in low.constant and inner_first(low, a, a_view[-2], a_view[-1]):
        a_view = tuple(a_view[:-2]) + (a_view[-1], a_view[-2])
    if len(b_view) >= 2 and b not in low.constant and inner_first(low, b, b_view[-2], b_view[-1]):
        b_view = tuple(b_view[:-2]) + (b_view[-1], b_view[-2])
    op = Op(kind="einsum", role=role if not weights else "gemm", output=Operand(out, z_axes),
            inputs=[Operand(low.base[a], tuple(a_view)), Operand(low.base[b], tuple(b_view))], equal=equal,
            nodes=(node,), scope=node.scope, weights=weights)
    low.add(op)
    return op


def inner_first(low: Lowered, tensor: str, outer, inner) -> bool:
    """Whether the data of axis `outer` lies inside that of axis `inner` (a transposed view)."""
    base = low.base[tensor]
    order = {x: i for i, x in enumerate(low.table.leaves(a for axis in low.views[base] for a in axis))}
    first = [order[x] for x in low.table.leaves(outer) if x in order]
    second = [order[x] for x in low.table.leaves(inner) if x in order]
    return bool(first and second) and min(first) > max(second)


def _matmul(low, source, shapes, node, out_shapes):
    a, b = node.inputs[:2]
    matmul_views(low, a, b, low.views[a], low.views[b], node.outputs[0], out_shapes[node.outputs[0]], node)


def _gemm(low, source, shapes, node, out_shapes):
    a, b = node.inputs[:2]
    a_view, b_view = low.views[a], low.views[b]
    if node.attrs.get("transA", 0):
        a_view = a_view[::-1]
    if node.attrs.get("transB", 0):
        b_view = b_view[::-1]
    out = node.outputs[0]
    c = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] else None
    alpha = node.attrs.get("alpha", 1.0)             # beta scales C: the same one op either way
    product = f"{out}.product" if c or alpha != 1.0 else out
    matmul_views(low, a, b, a_view, b_view, product, out_shapes[out], node)
    if c is None and alpha == 1.0:
        return
    # Y = alpha A B + beta C: the bias (and a scale) as elementwise ops after the product
    inputs = [low.operand(product)] + ([low.operand(c)] if c else [])
    shape = low.shapes[low.base[c]] if c else ()
    kind = "bias" if c and sum(s > 1 for s in shape) == 1 and shape[-1] > 1 else ("map" if c else "scale")
    materialise(low, out, out_shapes[out])
    op = Op(kind=kind, role="elementwise", output=low.operand(out), inputs=inputs,
            equal=aligned(low, inputs, low.views[out]), nodes=(node,), scope=node.scope,
            weights=frozenset({1}) if c else frozenset(), flops_per_element=1.0 if kind == "map" else None,
            note="Gemm's C" if c else "Gemm's alpha")
    low.add(op)


def _conv(low, source, shapes, node, out_shapes, transposed=False):
    """Conv and ConvTranspose as einsums. Channels split (groups, per group) where `group` > 1:
    O[n,g,k,p] += I[n,g,c,stride*p+dilation*r] * W[g,k,c,r] (a depthwise layer has k = c = 1);
    a transposed convolution scatters: O[n,g,k,stride*p+dilation*r] += I[n,g,c,p] * W[g,c,k,r].
    A 1-wide window at stride 1 over equal sizes is a plain dim (a 1x1 convolution: p itself)."""
    x, w = node.inputs[:2]
    out = node.outputs[0]
    table = low.table
    x_shape = [table.axis_size(a) for a in low.views[x]]
    w_shape, y_shape = [table.axis_size(a) for a in low.views[w]], out_shapes[out]
    spatial = len(y_shape) - 2
    group = node.attrs.get("group", 1)
    strides = list(node.attrs.get("strides") or [1] * spatial)
    dilations = list(node.attrs.get("dilations") or [1] * spatial)
    materialise(low, out, y_shape)
    xv, wv, yv = low.views[x], low.views[w], low.views[out]
    if not xv[0]:                                # a batch of one: its unit dim kept, as the presets' n
        unit = (table.new(1),)
        xv, yv = (unit,) + tuple(xv[1:]), (unit,) + tuple(yv[1:])
    x_channels, y_channels = table.axis_size(xv[1]), y_shape[1]
    w_first = x_channels if transposed else y_channels        # the weight's first axis holds the groups
    try:
        x_g, x_c = table.regroup((xv[1],), (group, x_channels // group))
        y_g, y_k = table.regroup((yv[1],), (group, y_channels // group))
        w_g, w_a = table.regroup((wv[0],), (group, w_first // group))
        w_b = wv[1]
    except Mismatch:
        return stream(low, node, {out: y_shape}, flops=0.0, note="a grouped convolution whose channels do not split")
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
    op = Op(kind="einsum", role="conv",
            output=Operand(out, (yv[0], y_g, y_k) + tuple(y_index)),
            inputs=[Operand(low.base[x], (xv[0], x_g, x_c) + tuple(x_index)),
                    Operand(low.base[w], (w_g, w_a, w_b) + tuple(kernel))],
            equal=[(a, b) for a, b in equal if a and b], nodes=(node,), scope=node.scope,
            weights=frozenset({1}) if w in low.constant else frozenset(),
            # which axis each of the presets' names goes to (`einsums.named`)
            attrs={"roles": {"n": yv[0], "g": y_g, "k": y_k, "c": x_c,
                             **dict(zip(("p", "q", "h"), (xv if transposed else yv)[2:])),
                             **dict(zip(("r", "s", "v"), kernel))}})
    low.add(op)
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
    materialise(low, out, y_shape)
    yv = low.views[out]
    b = low.operand(bias)
    equal = [(b.axes[0], yv[1])] + [(a, c) for a, c in zip(low.views[product], yv) if a and c]
    op = Op(kind="map", role="elementwise", output=low.operand(out),
            inputs=[Operand(product, low.views[product]), b], equal=equal, nodes=(node,), scope=node.scope,
            weights=frozenset({1}), flops_per_element=1.0, note="convolution bias, per output channel")
    low.add(op)


def _conv_transpose(low, source, shapes, node, out_shapes):
    _conv(low, source, shapes, node, out_shapes, transposed=True)


def _einsum(low, source, shapes, node, out_shapes):
    """ONNX's Einsum: letters name the dims (no ellipsis: with one it is a streaming op)."""
    equation = str(node.attrs.get("equation", "")).replace(" ", "")
    out = node.outputs[0]
    if "..." in equation or "->" not in equation:
        return stream(low, node, out_shapes, flops=0.0, note=f"Einsum {equation} (implicit output or ellipsis)")
    lhs, rhs = equation.split("->")
    terms = lhs.split(",")
    names = [t for t in node.inputs if t]
    materialise(low, out, out_shapes[out])
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
    op = Op(kind="einsum" if len(names) == 2 else "stream", role="einsum",
            output=low.operand(out), inputs=operands, equal=equal, nodes=(node,), scope=node.scope,
            weights=weights, flops_per_element=None if len(names) == 2 else 0.0)
    low.add(op)


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
        return stream(low, node, out_shapes, flops=0.0, note="Attention whose heads do not split")
    b, s, l = qs[0], qv[3], kv[3]
    s_len, l_len = table.axis_size(s), table.axis_size(l)
    dims = (b, hk, group, s_len, l_len)
    scores = f"{out}.scores"
    matmul_views(low, q, k, qv, kv[:3] + (kv[4], kv[3]), scores, dims, node, role="score")
    steps = [("scale", None), ("mask", mask), ("softmax", None)]
    current = scores
    for kind, extra in steps:
        if kind == "mask" and extra is None and not node.attrs.get("is_causal", 0):
            continue
        nxt = f"{out}.{kind}"
        inputs = [low.operand(current)] + ([low.operand(extra)] if extra else [])
        materialise(low, nxt, dims)
        reduced = low.views[nxt][-1] if kind == "softmax" else None
        op = Op(kind=kind, role="elementwise" if kind != "softmax" else "reduction",
                output=low.operand(nxt), inputs=inputs, equal=aligned(low, inputs, low.views[nxt]),
                nodes=(node,), scope=node.scope, weights=frozenset({1}) if extra else frozenset(),
                reduced=reduced, note="causal mask" if kind == "mask" and extra is None else "")
        low.add(op)
        current = nxt
    dv = vv[4]
    matmul_views(low, current, v, low.views[current], vv, f"{out}.values",
                  (b, hk, group, s_len, table.axis_size(dv)), node, role="value")
    # the result in the node's own layout ([B, H, S, D], or [B, S, H*D] from 3-D inputs)
    values = f"{out}.values"
    view = low.views[values]
    if len(out_shapes[out]) == 3:
        view = (view[0], view[3], view[1] + view[2] + view[4])
    try:
        low.views[out] = table.regroup(view, out_shapes[out])
        low.base[out] = low.base[values]
    except Mismatch:
        copy(low, node, {out: out_shapes[out]})


def _heads(low: Lowered, tensor: str, heads: int) -> View:
    """A [B, H, S, D] view of an attention input given as such or as [B, S, H*D]."""
    view = low.views[tensor]
    if len(view) == 4:
        return view
    b, s, hd = view
    split = low.table.regroup((hd,), (heads, low.table.axis_size(hd) // heads))
    return (b, split[0], s, split[1])


HANDLERS = MappingProxyType({"MatMul": _matmul, "Gemm": _gemm, "Conv": _conv, "ConvTranspose": _conv_transpose,
                             "Einsum": _einsum, "Attention": _attention})
