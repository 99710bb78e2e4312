"""Op-graph workload files (`ops:`): the presets load, and each malformed graph is refused with
one line naming the file and the key path."""
from __future__ import annotations

import pytest

from mapper.errors import SpecError
from mapper.load import load_opgraph, load_workload, opgraph_from_dict
from mapper.units import Where

PRESETS = ["chain-layernorm-gemm-gelu", "chain-gemm-bias-relu", "chain-mlp-gelu", "chain-swiglu-mlp",
           "chain-attention", "chain-llama7b-block"]


def _chain(**changes):
    data = {"name": "c", "sizes": {"m": 4, "k": 8, "n": 6}, "dtype": "bf16",
            "ops": [{"name": "mm", "einsum": "Z[m,n] += A[m,k] * B[k,n]"},
                    {"name": "b", "kind": "bias", "inputs": ["Z[m,n]", "c[n]"], "output": "Y[m,n]"},
                    {"name": "g", "kind": "gelu", "inputs": ["Y[m,n]"], "output": "G[m,n]"}]}
    data.update(changes)
    return data


def _refused(data) -> str:
    with pytest.raises(SpecError) as info:
        opgraph_from_dict(data, Where("chain.yaml"))
    message = str(info.value)
    assert message.startswith("chain.yaml") and "\n" not in message
    return message


@pytest.mark.parametrize("name", PRESETS)
def test_presets_load_as_dags_with_one_producer_per_tensor(name):
    graph = load_opgraph(name)
    assert graph.graph.number_of_nodes() == len(graph.ops)
    produced = [op.output for op in graph.ops]
    assert len(produced) == len(set(produced))
    for t in graph.intermediates:            # every intermediate has a producer and a consumer
        assert graph.producer(t) is not None and graph.consumers(t)


def test_the_llama_block_holds_its_ops():
    graph = load_opgraph("chain-llama7b-block")
    kinds = [op.kind for op in graph.ops]
    assert kinds.count("einsum") == 9 and kinds.count("rmsnorm") == 2 and kinds.count("add") == 2
    assert {"softmax", "silu", "mul", "scale", "mask"} <= set(kinds)
    assert graph.outputs == ("Out",)


def test_elementwise_ops_get_a_streaming_einsum_and_flops():
    graph = opgraph_from_dict(_chain(), Where("chain.yaml"))
    bias = graph.ops[1]
    assert bias.family == "elementwise" and bias.workload.einsum == "Y[m,n] += Z[m,n] * c[n]"
    assert bias.workload.macs == 4 * 6 and bias.flops == 24 * 1.0
    assert graph.ops[2].flops == 24 * 8.0


def test_a_cycle_is_refused():
    data = _chain()
    data["ops"][0] = {"name": "mm", "einsum": "Z[m,n] += A[m,k] * G[k,n]"}
    data["sizes"] = {"m": 6, "k": 6, "n": 6}
    assert "cycle" in _refused(data) and "ops[0]" in _refused(data)


def test_a_shape_mismatch_between_producer_and_consumer_is_refused():
    data = _chain()
    data["ops"][1] = {"name": "b", "kind": "bias", "inputs": ["Z[m,k]", "c[k]"], "output": "Y[m,k]"}
    message = _refused(data)
    assert "shape mismatch" in message and "ops[1]" in message and "mm" in message


def test_a_dangling_tensor_is_refused_when_outputs_are_listed():
    data = _chain(outputs=["G"])
    data["ops"].append({"name": "r", "kind": "relu", "inputs": ["Y[m,n]"], "output": "R[m,n]"})
    message = _refused(data)
    assert "dangling" in message and "ops[3]" in message


def test_an_unknown_kind_and_a_bad_reduction_dim_are_refused():
    data = _chain()
    data["ops"][2]["kind"] = "tanhh"
    assert "ops[2].kind" in _refused(data) and "unknown op kind" in _refused(data)
    data = _chain()
    data["ops"][2] = {"name": "s", "kind": "softmax", "inputs": ["Y[m,n]"], "output": "G[m,n]", "dim": "k"}
    assert "ops[2].dim" in _refused(data)
    data["ops"][2].pop("dim")
    assert "needs `dim`" in _refused(data)


def test_an_elementwise_input_with_a_dim_the_output_lacks_is_refused():
    data = _chain()
    data["ops"][1]["inputs"] = ["Z[m,n]", "A[m,k]"]
    assert "ops[1].inputs" in _refused(data)


def test_a_plain_workload_still_loads_and_an_op_graph_is_not_one(tmp_path):
    assert load_workload("gemm-256").einsum == "Z[m,n] += A[m,k] * B[k,n]"
    with pytest.raises(SpecError, match="op graph"):
        load_workload("chain-gemm-bias-relu")


def test_fuse_command_refuses_a_bad_graph_with_one_line_and_status_2(tmp_path, capsys):
    import yaml
    from mapper.cli import main
    data = _chain()
    data["ops"][1]["inputs"] = ["Z[m,k]", "c[k]"]
    data["ops"][1]["output"] = "Y[m,k]"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["fuse", "toy", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and "shape mismatch" in err
    assert main(["fuse", "toy", "gemm-256"]) == 2
    assert "mapper search" in capsys.readouterr().err


def test_fuse_command_prints_json_and_a_plot(tmp_path, capsys):
    import json

    import yaml
    from mapper.cli import main
    path = tmp_path / "chain.yaml"
    path.write_text(yaml.safe_dump(_chain()))
    assert main(["fuse", "toy", str(path), "--json", "--time-limit", "5", "--plot", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fused"]["outer_bytes"] <= out["unfused"]["outer_bytes"]
    assert out["lower_bound_outer_bytes"] <= out["fused"]["outer_bytes"]
    assert {b["tensor"] for b in out["boundaries"]} == {"Z", "Y"}
    assert list(tmp_path.glob("fuse-c-toy.png"))
