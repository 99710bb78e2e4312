"""Hostile model files: each is one clear error line naming the file and what to do, from the
command (exit status 2, no traceback) and from the API (`SpecError`)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import strategies as st
from onnx import TensorProto, helper

from mapper.cli import main
from mapper.errors import SpecError
from mapper.model_import import import_model
from onnx_graphs import FLOAT, Graph, linear
from scaled import quick_and_full


def _gemm(path, shape=("batch", "seq", 16)) -> str:
    g = Graph({"x": (list(shape), FLOAT)})
    return g.save(linear(g, "x", 16, 8, "/fc"), path)


def _cycle(path) -> str:
    a = helper.make_node("Relu", ["b"], ["a"], name="first")
    b = helper.make_node("Relu", ["a"], ["b"], name="second")
    c = helper.make_node("Add", ["x", "a"], ["y"], name="third")
    graph = helper.make_graph([a, b, c], "cycle", [helper.make_tensor_value_info("x", FLOAT, [4])],
                              [helper.make_tensor_value_info("y", FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    path.write_bytes(model.SerializeToString())
    return str(path)


def _truncated(path) -> str:
    data = open(_gemm(path), "rb").read()
    path.write_bytes(data[: len(data) // 2])
    return str(path)


def _strings(path) -> str:
    g = Graph({"x": ([4], TensorProto.STRING)})
    g.node("Identity", ["x"], "/id")
    model = g.model(g.nodes[-1].output[0])
    onnx.save(model, str(path))
    return str(path)


def _zero_dim(path) -> str:
    return _gemm(path, shape=(0, 4, 16))


def _negative_dim(path) -> str:
    model = onnx.load(_gemm(path, shape=(2, 4, 16)))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -3
    onnx.save(model, str(path))
    return str(path)


def _too_large(path) -> str:
    with open(path, "wb") as f:            # sparse: no disk is used
        f.truncate(2**31)
    return str(path)


CASES = {
    "text file": (lambda p: (p.write_text("name: not a model\n"), str(p))[1], "not an ONNX model"),
    "wrong magic": (lambda p: (p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4), str(p))[1],
                    "not an ONNX model"),
    "truncated": (_truncated, "not an ONNX model"),
    "empty file": (lambda p: (p.write_bytes(b""), str(p))[1], "no ONNX graph"),
    "cycle": (_cycle, "the graph has a cycle (first -> second"),
    "unbound symbol": (_gemm, "symbolic dim 'seq' (input x axis 1): give it with --seq N"),
    "zero dim": (_zero_dim, "axis 0 has size 0"),
    "negative dim": (_negative_dim, "axis 0 has size -3"),
    "string tensor": (_strings, "string tensors are not supported"),
    "too large": (_too_large, "above protobuf's 2 GiB: save the model with its weights as external data"),
    "missing": (lambda p: str(p), "no such file"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_file_is_one_clear_error(case, tmp_path, capsys):
    make, expected = CASES[case]
    path = make(tmp_path / "model.onnx")
    with pytest.raises(SpecError) as info:
        import_model(path)
    assert expected in str(info.value) and str(path) in str(info.value)
    status = main(["import-model", path, "-o", str(tmp_path / "out.yaml")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("mapper: error: ") and expected in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "out.yaml").exists()


def test_unknown_symbol_names_its_own_flag(tmp_path, capsys):
    path = _gemm(tmp_path / "m.onnx", shape=("batch", "tokens_x", 16))
    assert main(["import-model", path, "-o", "-"]) == 2
    assert "give it with --dim tokens_x=N" in capsys.readouterr().err
    assert main(["import-model", path, "-o", "-", "--dim", "tokens_x=12"]) == 0
    out = capsys.readouterr().out
    assert "inputs: {batch: 1, tokens_x: 12}" in out and "m: batch * tokens_x" in out


def test_bad_flags_are_refused(tmp_path, capsys):
    path = _gemm(tmp_path / "m.onnx")
    assert main(["import-model", path, "--seq", "4", "--dim", "seq=-1"]) == 2
    assert "--dim: expected NAME=N" in capsys.readouterr().err
    assert main(["import-model", path, "--seq", "4", "--dtype", "fp7"]) == 2
    assert "--dtype: expected one of" in capsys.readouterr().err


def test_an_existing_file_is_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _gemm(tmp_path / "m.onnx")
    (tmp_path / "m.yaml").write_text("mine\n")
    assert main(["import-model", path, "--seq", "4"]) == 2
    assert "m.yaml: exists: give -o" in capsys.readouterr().err
    assert (tmp_path / "m.yaml").read_text() == "mine\n"
    assert main(["import-model", path, "--seq", "4", "-o", path]) == 2       # the source itself: never
    assert f"mapper: error: {path}: -o names the file being imported" in capsys.readouterr().err
    assert main(["import-model", path, "--seq", "4", "-o", str(tmp_path)]) == 2
    assert "-o names a folder" in capsys.readouterr().err
    assert main(["import-model", path, "--seq", "4", "-o", "m.yaml"]) == 0       # named: overwritten
    assert "einsum: Z[m,n] += A[m,k] * B[k,n]" in (tmp_path / "m.yaml").read_text()


def test_a_tensor_nothing_defines_is_named(tmp_path):
    """A node reading a tensor no node, input or initializer gives is refused at that node (not
    as a shape inference could not make, which blamed unbound symbols)."""
    model = onnx.load(_gemm(tmp_path / "g.onnx"))
    model.graph.node[0].input[1] = "nowhere"
    onnx.save(model, str(tmp_path / "d.onnx"))
    with pytest.raises(SpecError, match="reads tensor 'nowhere', which no node produces"):
        import_model(str(tmp_path / "d.onnx"), seq=4)


def test_a_constant_only_graph_says_so(tmp_path):
    g = Graph({"x": ([4], FLOAT)})
    w = g.weight((4,), "w")
    g.node("Relu", [w], "/r")
    model = g.model(g.nodes[-1].output[0])
    model.graph.input.pop()
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(4, np.float32), "x"))
    onnx.save(model, str(tmp_path / "c.onnx"))
    with pytest.raises(SpecError, match="no data input"):
        import_model(str(tmp_path / "c.onnx"))


@pytest.mark.parametrize("field", ["producer_name", "producer_version"])
def test_a_damaged_producer_string_is_refused(tmp_path, field):
    """Invalid UTF-8 in the model's own strings (not the graph's) reaches Python as bytes: the
    import says the file is damaged (a fuzzed file once crashed concatenating them)."""
    model = onnx.load(_gemm(tmp_path / "g.onnx"))
    setattr(model, field, "QQQQ")
    data = model.SerializeToString().replace(b"QQQQ", b"\xff\xfeQQ")
    (tmp_path / "d.onnx").write_bytes(data)
    with pytest.raises(SpecError, match="not valid text: the file is damaged"):
        import_model(str(tmp_path / "d.onnx"), seq=4)


def test_an_attribute_without_a_type_is_refused(tmp_path):
    """A damaged attribute's type reads as UNDEFINED, its value as None: refused at its node (a
    fuzzed file once crashed on Softmax's axis)."""
    g = Graph({"x": ([4, 8], FLOAT)})
    model = g.model(g.node("Softmax", ["x"], "/s", axis=-1))
    model.graph.node[-1].attribute[0].type = onnx.AttributeProto.UNDEFINED
    onnx.save(model, str(tmp_path / "a.onnx"))
    with pytest.raises(SpecError, match="attribute 'axis' has no type: the file is damaged"):
        import_model(str(tmp_path / "a.onnx"))


def _mutant_base():
    from onnx_graphs import attention, layernorm
    g = Graph({"x": (["batch", 16, 64], FLOAT)})
    y = attention(g, "x", "batch", 16, 64, 4, 2, "/layers.0/attn", g.const(np.zeros((1, 1, 16, 16), np.float32)))
    y = layernorm(g, g.node("Add", [y, "x"], "/layers.0"), 64, "/layers.0/norm")
    r = g.node("Reshape", [y, g.shape(0, 64, 4, 4)], "/r")
    return g.model(g.node("Conv", [r, g.weight((8, 64, 3, 3), "w")], "/conv", pads=[1, 1, 1, 1]))


OPS = ["MatMul", "Relu", "Add", "Softmax", "Conv", "Reshape", "Transpose", "CumSum", "TopK", "NoSuchOp", "Gemm",
       "Einsum", "Attention", "MaxPool", "Gather", "Expand", "Concat", "LayerNormalization"]


def _mutate(model, rng) -> bytes:
    """One random damage: bytes flipped, an op type, an input's dim, an attribute or an input
    name changed, or a node dropped."""
    kind = rng.choice(["bytes", "op", "dim", "attr", "input", "drop"])
    if kind == "bytes":
        data = bytearray(model.SerializeToString())
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    node = rng.choice(model.graph.node)
    if kind == "op":
        node.op_type = rng.choice(OPS)
    elif kind == "dim":
        d = rng.choice(list(model.graph.input[0].type.tensor_type.shape.dim))
        d.Clear()
        if rng.random() < 0.5:
            d.dim_value = rng.choice([0, -1, 1, 7, 10**9, 2**40])
        else:
            d.dim_param = rng.choice(["seq", "batch", "", "weird sym", "0"])
    elif kind == "attr" and node.attribute:
        a = rng.choice(list(node.attribute))
        if a.type == a.INTS:
            a.ints[:] = [rng.choice([-5, 0, 1, 3, 99]) for _ in a.ints]
        elif a.type == a.INT:
            a.i = rng.choice([-5, 0, 1, 3, 99, 2**40])
    elif kind == "input" and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice(["x", "nope", "", node.output[0]])
    elif kind == "drop":
        model.graph.node.remove(node)
    return model.SerializeToString()


@quick_and_full(12, 300, st.integers(0, 2**32 - 1))
def test_damaged_graphs_import_or_say_why(tmp_path_factory, seed):
    """Whatever the damage, the import succeeds or raises one SpecError naming the file."""
    import random
    path = tmp_path_factory.mktemp("mutant") / "m.onnx"
    path.write_bytes(_mutate(_mutant_base(), random.Random(seed)))
    try:
        import_model(str(path), seq=16, batch=2)
    except SpecError as exc:
        assert str(path) in str(exc)
