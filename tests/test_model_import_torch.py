"""Real networks from PyTorch and transformers (random or meta weights: nothing is downloaded)
against the bundled presets: every layer's einsum, sizes and count, the total MACs, the same
results-store keys; grouped-query attention and depthwise convolutions swept on h100.

Marked `torch` (the `torch` extra: torch, onnxscript, transformers); `.ci/run` runs them in
their own step. Slow: each network is exported by torch.onnx (GPT-2 about half a minute)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from mapper.cli import main
from mapper.errors import SpecError
from mapper.model_import import import_model
from mapper.sweep.models import expand, load_model
from mapper.sweep.points import digest

from script_modules import script_module

pytestmark = pytest.mark.torch
EXPORTED = script_module("exported_models")      # the networks, as bench_import.py gives them


def _groups(model, phase, inputs) -> dict[str, tuple]:
    e = expand(model, phase, inputs)
    return {digest(g.workload): (g.count, g.workload.einsum, g.workload.sizes) for g in e.groups}


def _macs(model, phase, inputs) -> int:
    return sum(g.workload.macs * g.count for g in expand(model, phase, inputs).groups)


def _same_as_preset(imported, preset: str, phase: str, inputs: dict):
    mine, theirs = _groups(imported.model, None, {}), _groups(load_model(preset), phase, inputs)
    assert {k: v[0] for k, v in mine.items()} == {k: v[0] for k, v in theirs.items()}, (mine, theirs)
    assert _macs(imported.model, None, {}) == _macs(load_model(preset), phase, inputs)


@pytest.fixture(scope="module")
def gpt2_onnx(tmp_path_factory):
    """GPT-2 small with random weights exported to an ONNX file (`exported_models.gpt2_onnx`)."""
    return EXPORTED.gpt2_onnx(tmp_path_factory.mktemp("gpt2"))


def test_gpt2_onnx_matches_the_preset(gpt2_onnx):
    imported = import_model(gpt2_onnx, seq=1024, dtype="bf16", output_dtype="fp32")
    _same_as_preset(imported, "gpt2", "prefill", {"seq": 1024})
    assert (len(imported.data["layers"]), len(imported.data["chains"])) == (7, 5)      # the 12 blocks as one
    assert imported.data["inputs"] == {"batch": 1, "seq": 1024}
    chains = {c["name"]: [op.get("kind", "einsum") for op in c["ops"]] for c in imported.data["chains"]}
    # the preset's chains: LayerNorm, QKV and bias; scores, scale, mask, softmax, values; the MLP
    assert ["layernorm", "einsum", "bias"] in chains.values()
    assert ["einsum", "scale", "mask", "softmax", "einsum"] in chains.values()
    assert ["einsum", "bias", "add", "layernorm", "einsum", "bias", "gelu", "einsum", "bias", "add"] in chains.values()


def test_gpt2_sweep_finds_the_presets_points(gpt2_onnx, tmp_path, capsys):
    model_file, db = tmp_path / "gpt2.yaml", str(tmp_path / "r.sqlite")
    assert main(["import-model", gpt2_onnx, "--seq", "128", "--dtype", "bf16", "--output-dtype", "fp32",
                 "-o", str(model_file)]) == 0
    flags = ["--seq", "128", "--time-limit", "60", "--jobs", "2", "--db", db, "--quiet"]
    assert main(["sweep", "h100", "--model", "gpt2"] + flags) == 0
    preset = capsys.readouterr().out
    assert main(["sweep", "h100", "--model", str(model_file)] + flags) == 0
    imported = capsys.readouterr().out
    assert "0 searched" in imported.splitlines()[0] and "14 already in" in imported.splitlines()[0]

    def totals(text):
        lines = text[text.index("model totals"):].splitlines()
        return [line for line in lines if line.startswith(("greedy", "joint"))]
    assert totals(imported) == totals(preset)


def test_gpt2_onnx_sweeps_fused_on_h100(gpt2_onnx, tmp_path, capsys):
    db = str(tmp_path / "r.sqlite")
    status = main(["sweep", "h100", "--model", gpt2_onnx, "--seq", "128", "--fuse", "--strategy", "joint",
                   "--time-limit", "30", "--jobs", "2", "--db", db, "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "5 studied" in out and "0 failed" in out
    assert "fused saves" in out


def test_bert_module_matches_the_preset():
    import torch
    from transformers import BertConfig, BertModel
    config = BertConfig()
    config._attn_implementation = "eager"
    with torch.device("meta"):
        module = BertModel(config, add_pooling_layer=False).eval()
    imported = import_model(module, (torch.ones(1, 128, dtype=torch.long, device="meta"),),
                            dtype="bf16", output_dtype="fp32")
    _same_as_preset(imported, "bert-base", "encode", {"seq": 128})


def test_llama7b_config_imports_on_meta_tensors_in_under_2_gb(tmp_path):
    from transformers import LlamaConfig
    path = EXPORTED.config_file(tmp_path, "llama-7b", LlamaConfig(
        hidden_size=4096, num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008,
        num_hidden_layers=32, vocab_size=32000, architectures=["LlamaForCausalLM"]))
    # the peak of the process's own memory (VmHWM: getrusage's maxrss would count the forked
    # copy of this test process too, which Linux keeps across the exec)
    script = ("import json, re; from mapper.model_import import import_model; "
              f"m = import_model({path!r}, seq=2048, dtype='bf16', output_dtype='fp32'); "
              "peak = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)); "
              "print(json.dumps({'model': m.data, 'rss': peak}))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["rss"] < 2 * 1024 * 1024, f"peak memory {result['rss'] / 1024:.0f} MB"      # kB
    from mapper.sweep.models import model_from_dict
    from mapper.units import Where
    model = model_from_dict(result["model"], Where(path))
    mine, theirs = _groups(model, None, {}), _groups(load_model("llama-7b"), "prefill", {"seq": 2048})
    assert {k: v[0] for k, v in mine.items()} == {k: v[0] for k, v in theirs.items()}


def test_resnet50_config_matches_the_preset(tmp_path):
    from transformers import ResNetConfig
    # the preset is ResNet-50 v1 (stride 2 in the first 1x1 of a stage): transformers' flag for it
    path = EXPORTED.config_file(tmp_path, "resnet-50", ResNetConfig(downsample_in_bottleneck=True, num_labels=1000,
                                                        architectures=["ResNetForImageClassification"]))
    imported = import_model(path, dtype="bf16", output_dtype="fp32")
    _same_as_preset(imported, "resnet50", "inference", {})
    # identical bottlenecks once (37 entries and 31 chains when their chains' dims were named per block)
    assert (len(imported.data["layers"]), len(imported.data["chains"])) == (26, 20)


def test_grouped_query_attention_sweeps_on_h100(tmp_path, capsys):
    from transformers import LlamaConfig
    path = EXPORTED.config_file(tmp_path, "llama-3-8b", LlamaConfig(
        hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
        num_hidden_layers=2, vocab_size=128256, architectures=["LlamaForCausalLM"]))
    imported = import_model(path, seq=256, dtype="bf16", output_dtype="fp32")
    score = next(layer for layer in imported.data["layers"] if layer["name"].endswith("score"))
    # 4 query heads share each KV head: K is indexed by the 8 KV heads, the 4 packed into i
    assert score["einsum"] == "S[g,i,j] += Q[g,i,d] * K[g,j,d]"
    assert score["sizes"] == {"g": "8 * batch", "i": "4 * seq", "j": "seq", "d": 128}
    qkv = next(layer for layer in imported.data["layers"] if "q_proj" in layer.get("description", ""))
    assert qkv["sizes"]["n"] == 4096 + 2 * 1024
    _every_layer_mapped_on_h100(imported, tmp_path, capsys, "greedy,joint", 30)


def _every_layer_mapped_on_h100(imported, tmp_path, capsys, strategies: str, seconds: int) -> None:
    model_file = tmp_path / "model.yaml"
    imported.write(model_file)
    status = main(["sweep", "h100", "--model", str(model_file), "--strategy", strategies, "--time-limit", str(seconds),
                   "--jobs", "2", "--db", str(tmp_path / "r.sqlite"), "--quiet"])
    out = capsys.readouterr().out
    assert status == 0 and " 0 failed" in out.splitlines()[0], out


def test_mobilenetv2_depthwise_layers_sweep_on_h100(tmp_path, capsys):
    from transformers import MobileNetV2Config
    path = EXPORTED.config_file(tmp_path, "mobilenet-v2", MobileNetV2Config(num_labels=1000,
                                                                architectures=["MobileNetV2ForImageClassification"]))
    imported = import_model(path, dtype="bf16", output_dtype="fp32")
    depthwise = [layer for layer in imported.data["layers"] if layer["einsum"].startswith("O[n,g,p,q]")]
    assert depthwise and all(layer["einsum"] in ("O[n,g,p,q] += I[n,g,p+r,q+s] * W[g,r,s]",
                                                 "O[n,g,p,q] += I[n,g,2*p+r,2*q+s] * W[g,r,s]") for layer in depthwise)
    assert sum(layer["count"] for layer in depthwise) == 17        # one per inverted residual block
    _every_layer_mapped_on_h100(imported, tmp_path, capsys, "joint", 20)


def test_a_saved_torch_export_program_imports(tmp_path):
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(x)))
    program = torch.export.export(Block(), (torch.zeros(4, 16, 32),),
                                  dynamic_shapes={"x": {1: torch.export.Dim("seq")}})
    torch.export.save(program, str(tmp_path / "block.pt2"))
    # a saved program keeps torch's own names for its symbols (s0, s27, ...): the error names it
    with pytest.raises(SpecError) as info:
        import_model(str(tmp_path / "block.pt2"))
    symbol = re.search(r"--dim (\w+)=N", str(info.value)).group(1)
    imported = import_model(str(tmp_path / "block.pt2"), dims={symbol: 16})
    assert [layer["sizes"] for layer in imported.data["layers"]] == [{"m": f"4 * {symbol}", "n": 64, "k": 32},
                                                                     {"m": f"4 * {symbol}", "n": 32, "k": 64}]
    (chain,) = imported.data["chains"]
    assert [op.get("kind", "einsum") for op in chain["ops"]] == ["einsum", "bias", "gelu", "einsum", "bias", "add"]


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_llama_module_on_meta_same_attention_either_way(attention):
    """A module on the meta device through the API; transformers' default attention (sdpa,
    which torch writes out with scaled operands and a NaN guard) imports as the eager one does."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(hidden_size=1024, num_attention_heads=16, num_key_value_heads=4, intermediate_size=2816,
                         num_hidden_layers=2, vocab_size=1000, use_cache=False)
    config._attn_implementation = attention
    with torch.device("meta"):
        module = LlamaForCausalLM(config).eval()
    imported = import_model(module, (torch.ones(1, 64, dtype=torch.long, device="meta"),))
    score = next(layer for layer in imported.data["layers"] if layer["name"].endswith("score"))
    assert score["einsum"] == "S[g,i,j] += Q[g,i,d] * K[g,j,d]"
    assert score["sizes"] == {"g": 4, "i": 256, "j": 64, "d": 64}
    chain = next(c for c in imported.data["chains"] if score["name"] in c["layers"])
    kinds = [op.get("kind", "einsum") for op in chain["ops"]]
    assert kinds.count("einsum") == 2 and "softmax" in kinds and kinds.index("softmax") == len(kinds) - 2
