"""Benchmark: the op-graph presets fused, each as a user runs it (`mapper fuse ARCH CHAIN --json`).

    python scripts/bench_fuse.py [--arch h100] [--time-limit S] [--only SUBSTRING] [--write docs/RESULTS.md]

Per chain: the outermost level's bytes and the energy unfused and fused, the saving, the
chain's lower bound (every input read once, every result written once) and the fused bytes'
gap to it, the kernels, the wall seconds of the command and the peak resident memory of its
process.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

from benchlib import Table, bench_parser

CHAINS = ["chain-gemm-bias-relu", "chain-layernorm-gemm-gelu", "chain-mlp-gelu", "chain-swiglu-mlp",
          "chain-attention", "chain-attention-8192", "chain-llama7b-block"]

_MEASURED = ("import resource, subprocess, sys; out = subprocess.run(sys.argv[1:], check=True, "
             "capture_output=True, text=True).stdout; print(out); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def run(arch: str, chain: str, time_limit: float) -> tuple[dict, float, float]:
    command = [sys.executable, "-m", "mapper", "fuse", arch, chain, "--json", "--time-limit", str(time_limit)]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURED, *command], check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    *body, peak = done.stdout.strip().splitlines()
    return json.loads("\n".join(body)), seconds, int(peak) / 1024


def main() -> None:
    parser = bench_parser(__doc__, "chains")
    parser.add_argument("--arch", default="h100")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    table = Table()
    table.print(f"{'chain':<28} {'arch':<6} {'unfused B':>15} {'fused B':>15} {'saving':>7} {'bound B':>13} "
                f"{'gap':>6} {'energy saving':>13} {'kernels':>9} {'seconds':>8} {'peak MiB':>9}")
    for chain in CHAINS:
        if args.only and args.only not in chain:
            continue
        out, seconds, peak = run(args.arch, chain, args.time_limit)
        u, f, bound = out["unfused"], out["fused"], out["lower_bound_outer_bytes"]
        table.print(f"{chain:<28} {args.arch:<6} {u['outer_bytes']:>15,.0f} {f['outer_bytes']:>15,.0f} "
                    f"{1 - f['outer_bytes'] / u['outer_bytes']:>7.1%} {bound:>13,.0f} {f['outer_bytes'] / bound:>5.2f}x "
                    f"{1 - f['energy_pj'] / u['energy_pj']:>13.1%} {len(u['groups']):>4}->{len(f['groups']):<4} "
                    f"{seconds:>8.1f} {peak:>9.0f}")
    table.write(args.write, "bench_fuse")


if __name__ == "__main__":
    main()
