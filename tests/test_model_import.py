"""The model importer on ONNX graphs built here (`onnx_graphs.py`): each operator kind becomes
the einsum, op-graph op or streaming op it should, with the presets' names; repeats are counted;
symbolic dims become the model's inputs; the model loads and keys its points by shape alone."""
from __future__ import annotations

import numpy as np
import pytest

from mapper.model_import import import_model
from mapper.sweep.models import expand, model_from_dict
from mapper.sweep.points import make_point
from mapper.units import Where
from onnx_graphs import (FLOAT, Graph, attention, gelu_erf, layernorm, linear, rmsnorm, sdpa_attention, silu,
                         softmax_written_out)

TOKENS = ["batch", "seq", 64]


def _layers(imported) -> dict[str, dict]:
    return {layer["name"]: layer for layer in imported.data["layers"]}


def _ops(imported) -> list[tuple[str, str]]:
    return [(op["name"], op.get("kind", "einsum")) for c in imported.data.get("chains", []) for op in c["ops"]]


def test_gemm_with_bias_is_a_layer_and_a_chain_with_symbolic_sizes():
    g = Graph({"x": (TOKENS, FLOAT)})
    y = linear(g, "x", 64, 96, "/blocks.0/fc")
    imported = import_model(g.model(y), seq=16)
    layer = _layers(imported)["fc"]
    assert layer["einsum"] == "Z[m,n] += A[m,k] * B[k,n]"
    assert layer["sizes"] == {"m": "batch * seq", "n": 96, "k": 64}
    assert imported.data["inputs"] == {"batch": 1, "seq": 16}
    (chain,) = imported.data["chains"]
    assert chain["layers"] == ["fc"] and [op.get("kind", "einsum") for op in chain["ops"]] == ["einsum", "bias"]
    groups = expand(imported.model, None, {"seq": 32, "batch": 3}).groups
    assert groups[0].workload.sizes == (96, 96, 64)         # m = batch * seq = 96


def test_gemm_transposed_weight_reads_as_k_by_n():
    g = Graph({"x": ([8, 64], FLOAT)})
    y = g.node("Gemm", ["x", g.weight((32, 64), "w"), g.weight((32,), "b")], "/head", transB=1)
    imported = import_model(g.model(y))
    (layer,) = imported.data["layers"]
    assert layer["einsum"] == "Z[m,n] += A[m,k] * B[k,n]" and layer["sizes"] == {"m": 8, "n": 32, "k": 64}
    assert [op["kind"] for op in imported.data["chains"][0]["ops"][1:]] == ["bias"]


def test_batched_matmul_broadcasts_its_batch():
    g = Graph({"a": ([4, 3, 16, 8], FLOAT), "b": ([3, 8, 5], FLOAT)})
    y = g.node("MatMul", ["a", "b"], "/bmm")
    (layer,) = import_model(g.model(y)).data["layers"]
    # b is shared by the 4 outer batches: they index A and Z alone, as rows do (an m)
    assert layer["einsum"] == "Z[m,g,m2,n] += A[m,g,m2,k] * B[g,k,n]"
    assert layer["sizes"] == {"g": 3, "m": 4, "m2": 16, "n": 5, "k": 8}


def _attention_model(heads: int, kv_heads: int, seq: int = 32, batch="batch"):
    g = Graph({"x": ([batch, seq, 64], FLOAT)})
    mask = g.const(np.triu(np.full((1, 1, seq, seq), -1e4, dtype=np.float32), 1))
    y = attention(g, "x", batch, seq, 64, heads, kv_heads, "/layers.0/attn", mask)
    y = g.node("Add", [y, "x"], "/layers.0")                      # the residual: the block
    return g.model(y)


def test_attention_written_out_is_merged_qkv_scores_softmax_values():
    imported = import_model(_attention_model(4, 4), batch=2)
    layers = _layers(imported)
    qkv = next(layer for layer in layers.values() if "q_proj" in layer.get("description", ""))
    assert qkv["sizes"] == {"m": "32 * batch", "n": 192, "k": 64}          # one GEMM for Q, K and V
    assert layers["attn.score"]["einsum"] == "S[g,i,j] += Q[g,i,d] * K[g,j,d]"
    assert layers["attn.score"]["sizes"] == {"g": "4 * batch", "i": 32, "j": 32, "d": 16}
    assert layers["attn.value"]["einsum"] == "O[g,i,d] += P[g,i,j] * V[g,j,d]"
    chain = next(c for c in imported.data["chains"] if "attn.score" in c["layers"])
    assert [op.get("kind", "einsum") for op in chain["ops"]] == ["einsum", "scale", "mask", "softmax", "einsum"]
    assert "3 projections feeding attention" in imported.summary


def test_grouped_query_attention_indexes_k_and_v_per_kv_head():
    imported = import_model(_attention_model(8, 2), batch=3)
    score = _layers(imported)["attn.score"]
    # 4 query heads per KV head packed into i: K is read once per KV head, not once per query head
    assert score["einsum"] == "S[g,i,j] += Q[g,i,d] * K[g,j,d]"
    assert score["sizes"] == {"g": "2 * batch", "i": 128, "j": 32, "d": 8}
    workload = next(g.workload for g in expand(imported.model, None, {}).groups if g.layers == ("attn.score",))
    k = workload.tensors[workload.tensor_index("K")]
    assert workload.tensor_words(workload.tensor_index("K")) == 3 * 2 * 32 * 8     # batch, kv heads, keys, dim
    assert k.name == "K"


@pytest.mark.parametrize("kernel, stride, dilation, group, channels, text", [
    (3, 1, 1, 1, 16, "O[n,k,p,q] += I[n,c,p+r,q+s] * W[k,c,r,s]"),
    (7, 2, 1, 1, 16, "O[n,k,p,q] += I[n,c,2*p+r,2*q+s] * W[k,c,r,s]"),
    (3, 1, 2, 1, 16, "O[n,k,p,q] += I[n,c,p+2*r,q+2*s] * W[k,c,r,s]"),
    (1, 1, 1, 1, 16, "O[n,k,p,q] += I[n,c,p,q] * W[k,c]"),
    (1, 2, 1, 1, 16, "O[n,k,p,q] += I[n,c,2*p,2*q] * W[k,c]"),
    (3, 1, 1, 4, 16, "O[n,g,k,p,q] += I[n,g,c,p+r,q+s] * W[g,k,c,r,s]"),
    (3, 2, 1, 16, 16, "O[n,g,p,q] += I[n,g,2*p+r,2*q+s] * W[g,r,s]"),            # depthwise
])
def test_convolutions(kernel, stride, dilation, group, channels, text):
    g = Graph({"x": (["batch", 16, 20, 20], FLOAT)})
    pad = dilation * (kernel - 1) // 2
    y = g.node("Conv", ["x", g.weight((channels, 16 // group, kernel, kernel), "w")], "/conv",
               strides=[stride, stride], dilations=[dilation, dilation], pads=[pad] * 4, group=group)
    imported = import_model(g.model(y), batch=2)
    (layer,) = imported.data["layers"]
    assert layer["einsum"] == text
    out = (20 + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    workload = expand(imported.model, None, {}).groups[0].workload
    assert workload.macs == 2 * channels * (16 // group) * out * out * kernel * kernel


def test_transposed_convolution_scatters_into_its_output():
    g = Graph({"x": ([1, 8, 10, 10], FLOAT)})
    y = g.node("ConvTranspose", ["x", g.weight((8, 4, 4, 4), "w")], "/up", strides=[2, 2], pads=[1, 1, 1, 1])
    (layer,) = import_model(g.model(y)).data["layers"]
    assert layer["einsum"] == "O[n,k,2*p+r,2*q+s] += I[n,c,p,q] * W[c,k,r,s]"
    assert layer["sizes"] == {"n": 1, "k": 4, "c": 8, "p": 10, "q": 10, "r": 4, "s": 4}


def test_decomposed_norms_and_activations_are_named_ops():
    g = Graph({"x": ([4, 16, 32], FLOAT)})
    h = rmsnorm(g, "x", 32, "/layers.0/norm1")
    h = silu(g, linear(g, h, 32, 32, "/layers.0/up", bias=False), "/layers.0/act")
    h = layernorm(g, linear(g, h, 32, 32, "/layers.0/mid", bias=False), 32, "/layers.0/norm2")
    h = gelu_erf(g, h, "/layers.0/gelu")
    h = softmax_written_out(g, linear(g, h, 32, 32, "/layers.0/down", bias=False), "/layers.0/sm")
    y = g.node("Add", [h, "x"], "/layers.0")
    imported = import_model(g.model(y))
    kinds = dict(_ops(imported))
    assert kinds["norm1"] == "rmsnorm" and kinds["act"] == "silu" and kinds["norm2"] == "layernorm"
    assert kinds["gelu"] == "gelu" and kinds["sm"] == "softmax"
    norm1 = next(op for c in imported.data["chains"] for op in c["ops"] if op["name"] == "norm1")
    assert len(norm1["inputs"]) == 2 and norm1["dim"]                 # x and its scale, along the row
    norm2 = next(op for c in imported.data["chains"] for op in c["ops"] if op["name"] == "norm2")
    assert len(norm2["inputs"]) == 3                                  # x, scale and shift


def test_pooling_and_global_reductions_keep_their_bytes():
    g = Graph({"x": (["batch", 3, 32, 32], FLOAT)})
    c = g.node("Conv", ["x", g.weight((8, 3, 3, 3), "w")], "/stem", pads=[1, 1, 1, 1])
    p = g.node("MaxPool", [c], "/pool", kernel_shape=[2, 2], strides=[2, 2])
    r = g.node("GlobalAveragePool", [g.node("Relu", [p], "/act")], "/gap")
    y = linear(g, g.node("Flatten", [r], "/flat"), 8, 10, "/fc")
    imported = import_model(g.model(y), batch=2)
    chains = {c["name"]: c for c in imported.data["chains"]}
    pool = chains["pool"]["ops"][0]
    assert pool["kind"] == "stream" and pool["inputs"] == ["X[t,u1]"] and pool["output"] == "pool[t]"
    assert chains["pool"]["sizes"] == {"t": "2048 * batch", "u1": 4}     # 8x16x16 out, 4 elements in each
    gap = chains["gap"]
    assert gap["sizes"] == {"t": "8 * batch", "u1": 256}
    assert [layer["name"] for layer in imported.data["layers"]] == ["stem", "fc"]


def test_embedding_lookup_reads_its_rows():
    g = Graph({"ids": (["batch", "seq"], 7)})
    e = g.node("Gather", [g.weight((1000, 32), "table"), "ids"], "/embed", axis=0)
    y = linear(g, e, 32, 32, "/proj", bias=False)
    imported = import_model(g.model(y), seq=10)
    ops = imported.data["chains"][0]["ops"]
    assert ops[0]["kind"] == "gather" and ops[0]["inputs"][0].endswith("[m]")
    assert "33.0 kparameters" in imported.summary           # the table and the projection


def test_unknown_operator_is_kept_as_a_streaming_op_and_listed():
    g = Graph({"x": ([8, 16], FLOAT)})
    c = g.node("CumSum", ["x", g.const(np.array(1, dtype=np.int64))], "/scan")
    y = linear(g, c, 16, 16, "/proj", bias=False)
    imported = import_model(g.model(y))
    (op,) = next(c for c in imported.data["chains"] if c["name"] == "scan")["ops"]
    assert op["kind"] == "stream" and op["inputs"] == ["X[t]"] and op["output"] == "scan[t]"
    assert "1 ops not modelled as compute (kept as streaming ops with their bytes): CumSum" in imported.summary


def test_layout_copies_are_free_and_listed():
    g = Graph({"x": ([8, 16, 4], FLOAT)})
    t = g.node("Transpose", ["x"], "/t", perm=[2, 0, 1])
    y = linear(g, g.node("Reshape", [t, g.shape(4, 128)], "/r"), 128, 8, "/proj", bias=False)
    imported = import_model(g.model(y))
    assert imported.data["layers"][0]["sizes"] == {"m": 4, "n": 8, "k": 128}
    assert "layout ops that copy data (free in the model): 1 Transpose" in imported.summary


def _blocks(n: int, width: int = 32):
    g = Graph({"x": (["batch", "seq", width], FLOAT)})
    h = "x"
    for i in range(n):
        u = g.node("Relu", [linear(g, rmsnorm(g, h, width, f"/blocks.{i}/norm"), width, 4 * width,
                                   f"/blocks.{i}/up")], f"/blocks.{i}/act")
        h = g.node("Add", [h, linear(g, u, 4 * width, width, f"/blocks.{i}/down")], f"/blocks.{i}")
    return g.model(h)


def test_identical_blocks_are_one_entry_counted():
    imported = import_model(_blocks(3), seq=8)
    layers = _layers(imported)
    assert {name: layer["count"] for name, layer in layers.items()} == {"up": 3, "down": 3}
    assert layers["down"]["after"] == ["up"]
    (chain,) = imported.data["chains"]
    assert chain["count"] == 3 and chain["layers"] == ["up", "down"]
    assert [op.get("kind", "einsum") for op in chain["ops"]] == ["rmsnorm", "einsum", "bias", "relu", "einsum",
                                                                 "bias", "add"]
    assert sum(g.count for g in expand(imported.model, None, {}).groups) == 6


def test_keys_depend_on_shapes_only(tmp_path):
    """An imported layer is the same point as a hand-written one of the same shape (a preset's
    names), so a results store finds it whatever the graph called its tensors."""
    from mapper.load import load_arch, load_constraints
    imported = import_model(_blocks(2), seq=8, batch=2, dtype="bf16", output_dtype="fp32")
    written = model_from_dict({
        "name": "by-hand", "inputs": {"seq": 8, "batch": 2}, "dtype": "bf16", "output_dtype": "fp32",
        "layers": [{"name": "up", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": "batch * seq", "n": 128,
                                                                                   "k": 32}, "count": 2},
                   {"name": "down", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": "batch * seq", "n": 32,
                                                                                     "k": 128}, "count": 2}]},
        Where("by-hand"))
    arch, space = load_arch("toy"), load_constraints(None)

    def keys(model):
        return sorted(make_point(arch, g.workload, space, "joint", "edp", {}).key
                      for g in expand(model, None, {}).groups)
    assert keys(imported.model) == keys(written)


def test_written_model_file_loads_back(tmp_path):
    from mapper.sweep.models import load_model
    imported = import_model(_attention_model(4, 2), batch=2)
    path = tmp_path / "m.yaml"
    imported.write(path)
    again = load_model(str(path))
    a, b = expand(imported.model, None, {}), expand(again, None, {})
    assert [(g.workload.einsum, g.workload.sizes, g.count) for g in a.groups] == \
        [(g.workload.einsum, g.workload.sizes, g.count) for g in b.groups]
    assert [c.graph.ops for c in a.chains] == [c.graph.ops for c in b.chains]


def test_every_size_moves_with_its_symbols():
    imported = import_model(_attention_model(4, 4, seq=32), batch=2)
    at = {b: expand(imported.model, None, {"batch": b}) for b in (1, 5)}
    macs = {b: sum(g.workload.macs * g.count for g in e.groups) for b, e in at.items()}
    assert macs[5] == 5 * macs[1]


@pytest.mark.parametrize("rank", [4, 3])
def test_onnx_attention_op_is_written_out(rank):
    """ONNX's own Attention (opset 23), grouped: 4 query heads over 2 KV heads, causal."""
    shapes = ({"q": (["batch", 4, 32, 16], FLOAT), "k": (["batch", 2, 32, 16], FLOAT), "v": (["batch", 2, 32, 16], FLOAT)}
              if rank == 4 else
              {"q": (["batch", 32, 64], FLOAT), "k": (["batch", 32, 32], FLOAT), "v": (["batch", 32, 32], FLOAT)})
    g = Graph(shapes, opset=23)
    heads = {} if rank == 4 else {"q_num_heads": 4, "kv_num_heads": 2}
    y = g.node("Relu", [g.node("Attention", ["q", "k", "v"], "/attn", is_causal=1, **heads)], "/act")
    imported = import_model(g.model(y), batch=2)
    layers = _layers(imported)
    assert layers["attn.score"]["einsum"] == "S[g,i,j] += Q[g,i,d] * K[g,j,d]"
    assert layers["attn.value"]["einsum"] == "O[g,i,d] += P[g,i,j] * V[g,j,d]"
    assert layers["attn.score"]["sizes"] == {"g": "2 * batch", "i": 64, "j": 32, "d": 16}
    kinds = [kind for _, kind in _ops(imported)]
    assert kinds[:5] == ["einsum", "scale", "mask", "softmax", "einsum"]


def test_decomposed_sdpa_is_the_same_attention():
    """torch's scaled_dot_product_attention written out (scaled Q and K^T, K repeated for its
    query heads, a NaN guard): the same einsums as attention written by hand, K read once per
    KV head, and a chain FlashAttention's matcher takes (scores, softmax, values)."""
    g = Graph({"q": (["batch", 8, 32, 16], FLOAT), "k": (["batch", 2, 32, 16], FLOAT),
               "v": (["batch", 2, 32, 16], FLOAT)})
    y = g.node("Relu", [sdpa_attention(g, "q", "k", "v", 8, 2, 16, "/attn")], "/act")
    imported = import_model(g.model(y), batch=2)
    layers = imported.data["layers"]
    assert [layer["einsum"] for layer in layers] == ["S[g,i,j] += Q[g,i,d] * K[g,j,d]",
                                                     "O[g,i,d] += P[g,i,j] * V[g,j,d]"]
    assert layers[0]["sizes"] == {"g": "2 * batch", "i": 128, "j": 32, "d": 16}
    kinds = [kind for _, kind in _ops(imported)]
    assert kinds[:3] == ["einsum", "softmax", "einsum"]


def test_identical_attention_blocks_count_once():
    """Blocks identical but for their place in the graph are one entry each, chains included
    (their dims named and folded the same way in every block)."""
    g = Graph({"x": (["batch", 16, 32], FLOAT)})
    mask = g.const(np.triu(np.full((1, 1, 16, 16), -1e4, dtype=np.float32), 1))
    h = "x"
    for i in range(3):
        a = attention(g, rmsnorm(g, h, 32, f"/layers.{i}/norm"), "batch", 16, 32, 4, 2, f"/layers.{i}/attn", mask)
        h = g.node("Add", [h, a], f"/layers.{i}")
        u = silu(g, linear(g, rmsnorm(g, h, 32, f"/layers.{i}/norm2"), 32, 64, f"/layers.{i}/up", bias=False),
                 f"/layers.{i}/act")
        h = g.node("Add", [h, linear(g, u, 64, 32, f"/layers.{i}/down", bias=False)], f"/layers.{i}")
    imported = import_model(g.model(h), batch=2)
    assert {layer["count"] for layer in imported.data["layers"]} == {3}
    assert {chain["count"] for chain in imported.data["chains"]} == {3}
    assert len(imported.data["layers"]) == 6 and len(imported.data["chains"]) == 3
