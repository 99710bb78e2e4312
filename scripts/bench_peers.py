"""Benchmark: mapper beside AccelForge (issue 21's pe-array GEMMs, issue 22's fused GPT-3 layer).

    python scripts/bench_peers.py [--accelforge VENV] [--time-limit S] [--fuse-time-limit S]
                                  [--only SUBSTRING] [--write docs/RESULTS.md]

Our side, as a user runs it: `mapper search pe-array GEMM --mapspace bypass-every --objective
energy` per GEMM, `mapper fuse tpu-v4i chain-gpt3-6.7b-layer --mapspace tpu-v4i-roles` for the
layer. AccelForge's side only with `--accelforge VENV` (a separate environment where
`pip install accelforge` was run; scripts/accelforge_side.py runs there, in a scratch
directory), one case after the other, never at the same time as ours. Per case: the energy of
each (pJ per MAC for a GEMM, J for the layer), ours proven or its gap, the wall seconds of each
command and its peak resident memory (the largest process).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from benchlib import Table, write_results

GEMMS = [("gemm-768x768x3072", (768, 768, 3072)), ("gemm-1000x1000x1000", (1000, 1000, 1000)),
         ("gemm-96x4096x11008", (96, 4096, 11008))]
LAYER = "chain-gpt3-6.7b-layer"
HERE = os.path.dirname(os.path.abspath(__file__))

_MEASURED = ("import resource, subprocess, sys; out = subprocess.run(sys.argv[1:], check=True, "
             "capture_output=True, text=True).stdout; print(out); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def measured(command: list[str], cwd: str | None = None) -> tuple[dict, float, float]:
    """The command's JSON output, its wall seconds and its peak resident MiB."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURED, *command], check=True, capture_output=True,
                          text=True, cwd=cwd)
    seconds = time.perf_counter() - start
    *body, peak = done.stdout.strip().splitlines()
    return json.loads("\n".join(body)), seconds, int(peak) / 1024


def ours_gemm(name: str, time_limit: float) -> tuple[float, str, float, float]:
    out, seconds, peak = measured([sys.executable, "-m", "mapper", "search", "pe-array", name, "--mapspace",
                                   "bypass-every", "--objective", "energy", "--time-limit", str(time_limit), "--json"])
    search = out["search"]
    status = "proven" if search["optimal"] else f"gap {search['gap']:.2%}"
    return out["cost"]["energy_pj"] / out["cost"]["macs"], status, seconds, peak


def ours_fuse(time_limit: float) -> tuple[dict, float, float]:
    return measured([sys.executable, "-m", "mapper", "fuse", "tpu-v4i", LAYER, "--mapspace", "tpu-v4i-roles",
                     "--time-limit", str(time_limit), "--json"])


def theirs(venv: str, *args: str) -> tuple[dict, float, float]:
    python = os.path.join(venv, "bin", "python")
    with tempfile.TemporaryDirectory() as scratch:        # AccelForge writes mapping.svg there
        return measured([python, os.path.join(HERE, "accelforge_side.py"), *args], cwd=scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accelforge", default=None, metavar="VENV", help="AccelForge's virtual environment")
    parser.add_argument("--time-limit", type=float, default=60.0, help="ours, per GEMM")
    parser.add_argument("--fuse-time-limit", type=float, default=30.0, help="ours, the fused layer")
    parser.add_argument("--only", default=None)
    parser.add_argument("--write", default=None, metavar="MARKDOWN")
    args = parser.parse_args()
    table = Table()
    table.print(f"{'case':<24} {'arch':<9} {'AccelForge':>12} {'s':>7} {'MiB':>6} {'mapper':>12} "
                f"{'proven/gap':>13} {'s':>6} {'MiB':>6}")
    for name, (m, n, k) in GEMMS:
        if args.only and args.only not in name:
            continue
        af = "-", "-", "-"
        if args.accelforge:
            out, seconds, peak = theirs(args.accelforge, "gemm", str(m), str(n), str(k))
            af = f"{out['energy_pj_per_mac']:.4f}", f"{seconds:.0f}", f"{peak:.0f}"
        energy, status, seconds, peak = ours_gemm(name, args.time_limit)
        table.print(f"{name:<24} {'pe-array':<9} {af[0]:>12} {af[1]:>7} {af[2]:>6} {energy:>12.4f} "
                    f"{status:>13} {seconds:>6.1f} {peak:>6.0f}")
    if not args.only or args.only in LAYER:
        for mode in ("unfused", "fused"):
            af = "-", "-", "-"
            if args.accelforge:
                out, seconds, peak = theirs(args.accelforge, "ffm", mode)
                af = f"{out['energy_j']:.4f} J", f"{seconds:.0f}", f"{peak:.0f}"
            if mode == "unfused":
                fused_out, fuse_seconds, fuse_peak = ours_fuse(args.fuse_time_limit)
            energy = fused_out[mode]["energy_pj"] * 1e-12
            # the grouping proven over the kernels found (not each kernel's mapping)
            status = "groups proven" if fused_out["cover_proven"] and mode == "fused" else "-"
            table.print(f"{LAYER + ' ' + mode:<24} {'tpu-v4i':<9} {af[0]:>12} {af[1]:>7} {af[2]:>6} "
                        f"{energy:>10.4f} J {status:>13} {fuse_seconds:>6.1f} {fuse_peak:>6.0f}")
    if args.write:
        write_results(args.write, "bench_peers", table.lines)


if __name__ == "__main__":
    main()
