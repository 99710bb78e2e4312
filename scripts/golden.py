"""Golden harness: deterministic CLI runs whose JSON must not change across a refactor.

    python scripts/golden.py record DIR      # run every case, write DIR/<case>.json
    python scripts/golden.py check DIR       # run every case again, report each that differs
    python scripts/golden.py check DIR --only fuse

Each case runs under `--max-evaluations`, so its result does not depend on the machine's load;
the JSON is compared with every key that holds seconds left out. A difference is either a bug
or a fix whose reason must be shown (a brute force that decides it).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

_SEARCH = [
    ("toy", "gemm-256", []), ("h100", "gemm-4096", []), ("h100", "gemm-16384", []),
    ("h100", "gemv-4096", []), ("h100", "conv-resnet50-conv3", []), ("h100", "attention-qk", []),
    ("a100", "gemm-1024", []), ("h200", "llama7b-decode-up", []), ("eyeriss", "conv-alexnet-conv3", []),
    ("tpu", "conv-resnet50-conv1", []), ("tpu-v4i", "gemm-768x768x3072", []),
    ("pe-array", "gemm-1000x1000x1000", ["--mapspace", "bypass"]),
    ("pe-array", "gemm-96x4096x11008", []), ("pe-array", "gemm-1024-int8", ["--objective", "energy"]),
    ("timeloop-simba_like", "timeloop-simba_like-problem", ["--mapspace", "timeloop-simba_like"]),
    ("timeloop-eyeriss_like", "timeloop-eyeriss_like-problem", ["--mapspace", "timeloop-eyeriss_like"]),
    ("h100", "gemm-2048", ["--strategy", "greedy"]), ("h100", "gemm-512", ["--strategy", "random",
                                                                         "--samples", "20000"]),
    ("toy", "gemm-256", ["--strategy", "exhaustive"]), ("h100", "tall-skinny-32768x64", ["--objective", "cycles"]),
    ("h100", "gemm-1024", ["--objective", "bytes:HBM"]), ("tpu", "gemm-3000x5000x1000", ["--mapspace", "unaligned"]),
]
_FUSE = [("h100", "chain-gemm-bias-relu", []), ("h100", "chain-layernorm-gemm-gelu", []),
         ("h100", "chain-mlp-gelu", []), ("h100", "chain-swiglu-mlp", []), ("h100", "chain-attention", []),
         ("h100", "chain-attention-8192", []), ("h100", "chain-llama7b-block", []),
         ("tpu-v4i", "chain-gpt3-6.7b-layer", ["--mapspace", "tpu-v4i-roles"])]
SEARCH_EVALUATIONS, FUSE_EVALUATIONS = 200_000, 400_000


def cases() -> dict[str, list[str]]:
    """Case name -> the mapper command's arguments."""
    out = {}
    for arch, workload, flags in _SEARCH:
        name = "-".join(["search", arch, workload, *(f.strip("-").replace(":", "_") for f in flags)])
        out[name] = ["search", arch, workload, *flags, "--max-evaluations", str(SEARCH_EVALUATIONS), "--json"]
    for arch, graph, flags in _FUSE:
        out[f"fuse-{arch}-{graph}"] = ["fuse", arch, graph, *flags, "--max-evaluations",
                                       str(FUSE_EVALUATIONS), "--json"]
    return out


def _timeless(value):
    """The JSON with every key naming seconds or a time left out."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items()
                if not any(word in k for word in ("seconds", "time", "elapsed", "rate"))}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def run(arguments: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "mapper", *arguments], capture_output=True, text=True)
    if done.returncode != 0:
        return {"exit": done.returncode, "stderr": done.stderr.strip().splitlines()[-1:]}
    return _timeless(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("record", "check"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--only", default="", help="the cases whose name contains this")
    args = parser.parse_args()
    args.directory.mkdir(parents=True, exist_ok=True)
    differ = 0
    for name, arguments in cases().items():
        if args.only not in name:
            continue
        result = run(arguments)
        path = args.directory / f"{name}.json"
        if args.action == "record":
            path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
            print(f"recorded {name}")
            continue
        before = json.loads(path.read_text()) if path.exists() else None
        same = before == json.loads(json.dumps(result))
        differ += not same
        print(f"{'same  ' if same else 'DIFFERS'} {name}")
    if differ:
        sys.exit(f"{differ} case(s) differ")


if __name__ == "__main__":
    main()
