"""Benchmark: real networks imported as a user imports them, against the bundled presets.

    python scripts/bench_import.py [--only SUBSTRING] [--write docs/RESULTS.md]

Needs the `torch` extra (torch, onnxscript, transformers). Per network: how it is given (an ONNX
file exported here from a random-weight model, or a `config.json` built on meta tensors), the
seconds `mapper import-model` takes as a command (its own process: Python's start-up, reading
the file, three analyses), its peak resident memory, the layers and chains written, and whether
its layers are the preset's (every group's einsum, sizes, count and results-store key; the MACs).
The ONNX export itself is not timed: it is torch's, done once per network before the import.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import Table, bench_parser
from exported_models import config_file, gpt2_onnx

DTYPES = ["--dtype", "bf16", "--output-dtype", "fp32"]

_MEASURED = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stderr.write(r.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def cases(folder: Path):
    """(label, how it is given, the file, import flags, preset, phase, preset inputs)."""
    import transformers as t
    yield ("GPT-2 (124M)", "ONNX file", lambda: gpt2_onnx(folder), ["--seq", "1024"], "gpt2", "prefill",
           {"seq": 1024})
    yield ("LLaMA-7B", "config.json, meta", lambda: config_file(folder, "llama-7b", t.LlamaConfig(
        hidden_size=4096, num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008,
        num_hidden_layers=32, vocab_size=32000, architectures=["LlamaForCausalLM"])),
        ["--seq", "2048"], "llama-7b", "prefill", {"seq": 2048})
    yield ("BERT-base", "config.json, meta", lambda: config_file(folder, "bert", t.BertConfig()), ["--seq", "128"],
           "bert-base", "encode", {"seq": 128})
    yield ("ResNet-50 (v1)", "config.json, meta", lambda: config_file(folder, "resnet50", t.ResNetConfig(
        downsample_in_bottleneck=True, num_labels=1000, architectures=["ResNetForImageClassification"])),
        [], "resnet50", "inference", {})
    yield ("Llama-3-8B-like (GQA 32/8)", "config.json, meta", lambda: config_file(folder, "llama3", t.LlamaConfig(
        hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
        num_hidden_layers=32, vocab_size=128256, architectures=["LlamaForCausalLM"])),
        ["--seq", "2048"], None, None, None)
    yield ("MobileNetV2", "config.json, meta", lambda: config_file(folder, "mobilenet", t.MobileNetV2Config(
        num_labels=1000, architectures=["MobileNetV2ForImageClassification"])), [], None, None, None)
    yield ("ViT-base", "config.json, meta", lambda: config_file(folder, "vit", t.ViTConfig(
        num_labels=1000, architectures=["ViTForImageClassification"])), [], None, None, None)


def matches(model_file: Path, preset: str, phase: str, inputs: dict) -> str:
    from mapper.sweep.models import expand, load_model
    from mapper.sweep.points import digest

    def groups(model, ph, values):
        e = expand(model, ph, values)
        return ({digest(g.workload): g.count for g in e.groups}, sum(g.workload.macs * g.count for g in e.groups))
    mine, theirs = groups(load_model(str(model_file)), None, {}), groups(load_model(preset), phase, inputs)
    same = sum(1 for k, n in mine[0].items() if theirs[0].get(k) == n)
    verdict = "yes" if mine == theirs else "NO"
    return f"{verdict} ({same}/{len(theirs[0])} groups, MACs {'equal' if mine[1] == theirs[1] else 'differ'})"


def main() -> None:
    args = bench_parser(__doc__, "networks").parse_args()
    table = Table()
    table.print(f"{'network':28}  {'given as':18}  {'import s':>8}  {'peak MiB':>8}  {'layers':>11}  {'chains':>6}  "
                f"{'GMACs':>9}  {'streaming ops':>13}  preset's layers")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for label, given, make, flags, preset, phase, inputs in cases(folder):
            if args.only and args.only.lower() not in label.lower():
                continue
            source = make()
            out = folder / f"{label.split()[0].lower()}.yaml"
            command = [sys.executable, "-m", "mapper", "import-model", source, *flags, *DTYPES, "-o", str(out)]
            start = time.perf_counter()
            run = subprocess.run([sys.executable, "-c", _MEASURED, *command], capture_output=True, text=True)
            seconds = time.perf_counter() - start
            if run.returncode or not out.exists():
                table.print(f"{label:28}  {given:18}  failed: {(run.stderr.strip().splitlines() or ['?'])[-1][:80]}")
                continue
            peak = int(run.stdout.strip().splitlines()[-1]) / 1024
            data = json.loads(json.dumps(__import__("yaml").safe_load(out.read_text())))
            from mapper.sweep.models import expand, load_model
            e = expand(load_model(str(out)), None, {})
            layers = f"{sum(g.count for g in e.groups)} in {len(data['layers'])}"
            macs = sum(g.workload.macs * g.count for g in e.groups) / 1e9
            streaming = sum(1 for c in data.get("chains", []) for op in c["ops"] if op.get("kind") == "stream")
            verdict = matches(out, preset, phase, inputs) if preset else "-"
            table.print(f"{label:28}  {given:18}  {seconds:8.1f}  {peak:8.0f}  {layers:>11}  "
                        f"{len(data.get('chains', [])):6}  {macs:9.2f}  {streaming:13}  {verdict}")
    table.write(args.write, "bench-import")


if __name__ == "__main__":
    main()
