"""The `onnx` surface of `fuzz_cases.py`: ONNX files for `import-model` and for a sweep that
imports a model on the fly (`sweep ARCH --model FILE.onnx`).

The bases are small valid graphs built with `onnx.helper` (a transformer-like block with a
symbolic batch and sequence, and a convolution stage), made hostile one way per case: bytes
flipped or cut, an op type, an input's dim, an attribute, an input name or an element type
changed, a node dropped or duplicated, an initializer's shape or data damaged; or passed
valid with hostile flags.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPS = ["MatMul", "Relu", "Add", "Softmax", "Conv", "Reshape", "Transpose", "CumSum", "TopK", "NoSuchOp", "Gemm",
       "Einsum", "Attention", "MaxPool", "Gather", "Expand", "Concat", "LayerNormalization", "Identity", "Mul",
       "ReduceMean", "Sigmoid", "Loop", "If", "BatchNormalization", "ConvTranspose", "Slice", "Split"]
DIMS = [0, -1, 1, 3, 7, 10**9, 2**40, 2**63 - 1]
SYMBOLS = ["seq", "batch", "", "weird sym", "0", "x" * 300, "ü", "seq"]
INTS = [-5, 0, 1, 3, 99, 2**40, -2**63]
TYPES = [TensorProto.FLOAT16, TensorProto.INT8, TensorProto.BOOL, TensorProto.STRING, TensorProto.DOUBLE,
         TensorProto.UNDEFINED, 999]


def _weight(name: str, shape) -> TensorProto:
    return numpy_helper.from_array(np.full(shape, 0.01, np.float32), name)


def block() -> onnx.ModelProto:
    """x[batch, seq, 32] -> attention (one head, scaled softmax) + residual -> layernorm ->
    MLP (matmul, bias, GELU written as erf, matmul) + residual."""
    d = 32
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [_weight(n, (d, d)) for n in ("wq", "wk", "wv", "wo")] + [
        _weight("w1", (d, 4 * d)), _weight("b1", (4 * d,)), _weight("w2", (4 * d, d)),
        _weight("gamma", (d,)), _weight("beta", (d,)),
        numpy_helper.from_array(np.array(d ** -0.5, np.float32), "scale"),
        numpy_helper.from_array(np.array(2 ** -0.5, np.float32), "rsqrt2"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.array([0, 2, 1], np.int64), "perm_unused")]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "wq"], ["q"], name="/attn/q"), n("MatMul", ["x", "wk"], ["k"], name="/attn/k"),
             n("MatMul", ["x", "wv"], ["v"], name="/attn/v"),
             n("Transpose", ["k"], ["kt"], name="/attn/kt", perm=[0, 2, 1]),
             n("MatMul", ["q", "kt"], ["s"], name="/attn/s"), n("Mul", ["s", "scale"], ["ss"], name="/attn/scale"),
             n("Softmax", ["ss"], ["p"], name="/attn/softmax", axis=-1),
             n("MatMul", ["p", "v"], ["a"], name="/attn/pv"), n("MatMul", ["a", "wo"], ["o"], name="/attn/o"),
             n("Add", ["o", "x"], ["r1"], name="/res1"),
             n("LayerNormalization", ["r1", "gamma", "beta"], ["h"], name="/norm", axis=-1, epsilon=1e-5),
             n("MatMul", ["h", "w1"], ["u"], name="/mlp/fc1"), n("Add", ["u", "b1"], ["ub"], name="/mlp/bias"),
             n("Mul", ["ub", "rsqrt2"], ["ue"], name="/mlp/gelu/a"), n("Erf", ["ue"], ["e"], name="/mlp/gelu/erf"),
             n("Add", ["e", "one"], ["e1"], name="/mlp/gelu/b"), n("Mul", ["ub", "e1"], ["g0"], name="/mlp/gelu/c"),
             n("Mul", ["g0", "half"], ["g"], name="/mlp/gelu/d"),
             n("MatMul", ["g", "w2"], ["m"], name="/mlp/fc2"), n("Add", ["m", "r1"], ["y"], name="/res2")]
    graph = helper.make_graph(nodes, "block", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def conv_stage() -> onnx.ModelProto:
    """x[batch, 8, 16, 16] -> conv 3x3 (16 filters) -> batchnorm -> relu -> maxpool -> conv 1x1."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [_weight("w", (16, 8, 3, 3)), _weight("w2", (8, 16, 1, 1))] + [
        _weight(name, (16,)) for name in ("scale", "bias", "mean", "var")]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"], name="/conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             n("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["b"], name="/bn"),
             n("Relu", ["b"], ["r"], name="/relu"),
             n("MaxPool", ["r"], ["p"], name="/pool", kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p", "w2"], ["y"], name="/conv2", kernel_shape=[1, 1])]
    graph = helper.make_graph(nodes, "conv", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def damaged(rng, model: onnx.ModelProto) -> tuple[bytes, str]:
    """`model` damaged one way, serialised, and how."""
    kind = rng.choice(["bytes", "cut", "op", "dim", "attr", "input", "type", "drop", "twice", "init", "valid"])
    if kind in ("bytes", "cut"):
        data = bytearray(model.SerializeToString())
        if kind == "cut":
            return bytes(data[:rng.randrange(len(data))]), "cut short"
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "bytes flipped"
    graph = model.graph
    node = rng.choice(graph.node)
    how = kind
    if kind == "op":
        node.op_type = rng.choice(OPS)
        how = f"{node.name} as {node.op_type}"
    elif kind == "dim":
        dim = rng.choice(list(graph.input[0].type.tensor_type.shape.dim))
        dim.Clear()
        if rng.random() < 0.5:
            dim.dim_value = rng.choice(DIMS)
        else:
            dim.dim_param = rng.choice(SYMBOLS)
        how = f"input dim {dim}".replace("\n", " ")[:40]
    elif kind == "attr" and node.attribute:
        attribute = rng.choice(list(node.attribute))
        if attribute.type == attribute.INTS:
            attribute.ints[:] = [rng.choice(INTS) for _ in range(rng.choice([len(attribute.ints), 1, 0, 5]))]
        elif attribute.type == attribute.INT:
            attribute.i = rng.choice(INTS)
        elif attribute.type == attribute.FLOAT:
            attribute.f = rng.choice([float("nan"), float("inf"), -1.0, 0.0])
        how = f"{node.name}.{attribute.name}"
    elif kind == "input" and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice(["x", "nope", "", node.output[0], "y"])
        how = f"{node.name} input renamed"
    elif kind == "type":
        graph.input[0].type.tensor_type.elem_type = rng.choice(TYPES)
    elif kind == "drop":
        graph.node.remove(node)
        how = f"{node.name} dropped"
    elif kind == "twice":
        graph.node.append(node)
        how = f"{node.name} twice"
    elif kind == "init" and graph.initializer:
        init = rng.choice(list(graph.initializer))
        if rng.random() < 0.5:
            init.dims[:] = [rng.choice(DIMS[:5]) for _ in range(rng.choice([1, 2, 3]))]
        else:
            init.raw_data = init.raw_data[:rng.randrange(len(init.raw_data) + 1)]
        how = f"initializer {init.name}"
    return model.SerializeToString(), how


def onnx_case(rng, pool, case_type) -> object:
    """One run of `import-model` (with or without flags and an output) or of a sweep that
    imports the file on the fly, on a damaged or valid base."""
    base = rng.choice([block, conv_stage])
    data, how = damaged(rng, base())
    files = {"model.onnx": data}
    # mostly the values the graph needs (a block's sequence has no default), else hostile ones
    flags = ["--seq", "16"] if base is block else []
    if rng.random() < 0.25:
        flags = ["--seq", rng.choice(["8", "0", "-3", "2147483647", "①", "99999999999999999999", "x"])]
    if rng.random() < 0.3:
        flags += ["--batch", rng.choice(["1", "2", "0", "3.5", "2147483647", "65536"])]
    if rng.random() < 0.7:
        out = rng.choice(["{dir}/model.yaml"] * 5 + ["{dir}", "{dir}/no/such/folder/m.yaml", "{model.onnx}"])
        argv = ["import-model", "{model.onnx}", "-o", out, *flags]
    else:
        argv = ["sweep", "toy", "--model", "{model.onnx}", "--jobs", "1", "--db", "{dir}/results.sqlite",
                "--quiet", "--time-limit", "0.5", "--strategy", "greedy", *flags]
        if rng.random() < 0.3:
            argv.append("--fuse")
    return case_type("onnx", files, argv, f"onnx: {how}")
