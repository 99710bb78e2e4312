"""Small ONNX graphs built with `onnx.helper` for the model importer's tests (nothing is
downloaded, no torch needed): a builder, and the blocks the tests assemble (a GEMM with its
bias, multi-head and grouped-query attention written out, decomposed norms and activations).

Node names carry a module path the way torch's TorchScript exporter writes them
(`/blocks.0/attn/MatMul`), so the importer sees blocks and names as it would in a real export."""
from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT


class Graph:
    def __init__(self, inputs: dict, opset: int = 20):
        """`inputs`: name -> (shape with ints or symbol names, element type)."""
        self.inputs = [helper.make_tensor_value_info(n, t, list(s)) for n, (s, t) in inputs.items()]
        self.nodes, self.inits, self.opset = [], [], opset
        self._ids = itertools.count()
        self._rng = np.random.default_rng(0)

    def const(self, value, name: str | None = None) -> str:
        name = name or f"c{next(self._ids)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, shape, name: str) -> str:
        return self.const(self._rng.standard_normal(shape).astype(np.float32), name)

    def shape(self, *dims) -> str:
        return self.const(np.array(dims, dtype=np.int64))

    def node(self, op: str, inputs, scope: str = "", outputs: int = 1, **attrs):
        names = [f"{op.lower()}{next(self._ids)}" for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), names, name=f"{scope}/{op}_{len(self.nodes)}", **attrs))
        return names[0] if outputs == 1 else names

    def model(self, outputs) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(o, FLOAT, None) for o in ([outputs] if isinstance(outputs, str) else outputs)]
        graph = helper.make_graph(self.nodes, "test", self.inputs, outs, self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="tests")

    def save(self, outputs, path) -> str:
        onnx.save(self.model(outputs), str(path))
        return str(path)


def linear(g: Graph, x: str, k: int, n: int, scope: str, bias: bool = True) -> str:
    y = g.node("MatMul", [x, g.weight((k, n), f"{scope}.w")], scope)
    return g.node("Add", [y, g.weight((n,), f"{scope}.b")], scope) if bias else y


def attention(g: Graph, x: str, batch, seq, hidden: int, heads: int, kv_heads: int, scope: str,
              mask: str | None = None) -> str:
    """Q, K and V projections, heads split, K and V repeated for grouped queries (`repeat_kv`:
    Unsqueeze, Expand, Reshape), scores scaled and masked, softmax, values, heads merged, and
    the output projection."""
    d = hidden // heads
    q = linear(g, x, hidden, heads * d, f"{scope}/q_proj", bias=False)
    k = linear(g, x, hidden, kv_heads * d, f"{scope}/k_proj", bias=False)
    v = linear(g, x, hidden, kv_heads * d, f"{scope}/v_proj", bias=False)

    def heads_of(t, h):
        r = g.node("Reshape", [t, g.shape(0, 0, h, d)], scope)
        return g.node("Transpose", [r], scope, perm=[0, 2, 1, 3])
    q, k, v = heads_of(q, heads), heads_of(k, kv_heads), heads_of(v, kv_heads)
    if kv_heads != heads:
        rep = heads // kv_heads

        def repeat(t):
            u = g.node("Unsqueeze", [t, g.const(np.array([2], dtype=np.int64))], scope)
            e = g.node("Expand", [u, g.shape(1, 1, rep, 1, 1)], scope)
            return g.node("Reshape", [e, g.shape(0, heads, -1, d)], scope)
        k, v = repeat(k), repeat(v)
    kt = g.node("Transpose", [k], scope, perm=[0, 1, 3, 2])
    s = g.node("MatMul", [q, kt], scope)
    s = g.node("Mul", [s, g.const(np.float32(d ** -0.5))], scope)
    if mask is not None:
        s = g.node("Add", [s, mask], scope)
    p = g.node("Softmax", [s], scope, axis=-1)
    o = g.node("MatMul", [p, v], scope)
    o = g.node("Transpose", [o], scope, perm=[0, 2, 1, 3])
    o = g.node("Reshape", [o, g.shape(0, 0, hidden)], scope)
    return linear(g, o, hidden, hidden, f"{scope}/o_proj", bias=False)


def sdpa_attention(g: Graph, q: str, k: str, v: str, heads: int, kv_heads: int, d: int, scope: str) -> str:
    """Attention as torch's decomposed scaled_dot_product_attention writes it: K repeated for
    grouped queries and transposed, Q and K^T each scaled by sqrt(1/sqrt(d)), a NaN guard after
    the softmax."""
    if kv_heads != heads:
        u = g.node("Unsqueeze", [k, g.const(np.array([2], dtype=np.int64))], scope)
        e = g.node("Expand", [u, g.shape(1, 1, heads // kv_heads, 1, 1)], scope)
        k = g.node("Reshape", [e, g.shape(0, heads, -1, d)], scope)
        u = g.node("Unsqueeze", [v, g.const(np.array([2], dtype=np.int64))], scope)
        e = g.node("Expand", [u, g.shape(1, 1, heads // kv_heads, 1, 1)], scope)
        v = g.node("Reshape", [e, g.shape(0, heads, -1, d)], scope)
    factor = g.const(np.float32(d ** -0.25))
    qs = g.node("Mul", [q, factor], scope)
    ks = g.node("Mul", [g.node("Transpose", [k], scope, perm=[0, 1, 3, 2]), factor], scope)
    p = g.node("Softmax", [g.node("MatMul", [qs, ks], scope)], scope, axis=-1)
    p = g.node("Where", [g.node("IsNaN", [p], scope), g.const(np.float32(0.0)), p], scope)
    return g.node("MatMul", [p, v], scope)


def rmsnorm(g: Graph, x: str, hidden: int, scope: str) -> str:
    """x * 1/sqrt(mean(x^2) + eps) * w, as LLaMA's code writes it (and exporters keep it)."""
    sq = g.node("Pow", [x, g.const(np.float32(2.0))], scope)
    mean = g.node("ReduceMean", [sq, g.const(np.array([-1], dtype=np.int64))], scope, keepdims=1)
    eps = g.node("Add", [mean, g.const(np.float32(1e-6))], scope)
    rstd = g.node("Reciprocal", [g.node("Sqrt", [eps], scope)], scope)
    y = g.node("Mul", [x, rstd], scope)
    return g.node("Mul", [g.weight((hidden,), f"{scope}.w"), y], scope)


def layernorm(g: Graph, x: str, hidden: int, scope: str) -> str:
    axes = g.const(np.array([-1], dtype=np.int64))
    mean = g.node("ReduceMean", [x, axes], scope, keepdims=1)
    c = g.node("Sub", [x, mean], scope)
    var = g.node("ReduceMean", [g.node("Pow", [c, g.const(np.float32(2.0))], scope), axes], scope, keepdims=1)
    std = g.node("Sqrt", [g.node("Add", [var, g.const(np.float32(1e-5))], scope)], scope)
    y = g.node("Div", [c, std], scope)
    y = g.node("Mul", [y, g.weight((hidden,), f"{scope}.w")], scope)
    return g.node("Add", [y, g.weight((hidden,), f"{scope}.b")], scope)


def gelu_erf(g: Graph, x: str, scope: str) -> str:
    e = g.node("Erf", [g.node("Div", [x, g.const(np.float32(2 ** 0.5))], scope)], scope)
    y = g.node("Mul", [x, g.node("Add", [e, g.const(np.float32(1.0))], scope)], scope)
    return g.node("Mul", [y, g.const(np.float32(0.5))], scope)


def silu(g: Graph, x: str, scope: str) -> str:
    return g.node("Mul", [x, g.node("Sigmoid", [x], scope)], scope)


def softmax_written_out(g: Graph, x: str, scope: str) -> str:
    axes = g.const(np.array([-1], dtype=np.int64))
    m = g.node("ReduceMax", [x, axes], scope, keepdims=1)
    e = g.node("Exp", [g.node("Sub", [x, m], scope)], scope)
    return g.node("Div", [e, g.node("ReduceSum", [e, axes], scope, keepdims=1)], scope)
