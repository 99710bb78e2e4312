"""Benchmark: mapper beside AccelForge (issue 21's pe-array GEMMs, issue 22's fused GPT-3 layer).

    python scripts/bench_peers.py [--accelforge VENV] [--time-limit S] [--fuse-time-limit S]
                                  [--mapspace NAME] [--only SUBSTRING] [--write docs/RESULTS.md]

Our side, as a user runs it: `mapper search pe-array GEMM --mapspace bypass-every --objective
energy` per GEMM (`--mapspace tensor-depths`: each tensor at its own depth in the buffer), `mapper fuse tpu-v4i chain-gpt3-6.7b-layer --mapspace tpu-v4i-roles` for the
layer. AccelForge's side only with `--accelforge VENV` (a separate environment where
`pip install accelforge` was run; scripts/accelforge_side.py runs there, in a scratch
directory), one case after the other, never at the same time as ours. Per case: the energy of
each (pJ per MAC for a GEMM, J for the layer), ours proven or its gap, the wall seconds of each
command, the CPU seconds of all its processes, its peak resident memory (the largest process),
and AccelForge's CPU seconds over ours (`cpu x`). Both sides run from compiled bytecode.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from benchlib import Table, bench_parser

# issue 21's GEMMs, issue 38's (a GEMV, squares) and three shapes with factors 3, 5, 7 and a
# large prime (1009), whose splits no power of two serves; every tensor bf16 on both sides
# (AccelForge's side: 16 bits per value), so each is written to a scratch file here: some
# presets of the same shape differ (gemm-256 is int8, gemm-1024's output fp32)
GEMMS = [("gemm-256", (256, 256, 256)), ("gemm-1024", (1024, 1024, 1024)), ("gemv-1024", (1, 1024, 1024)),
         ("gemm-768x768x3072", (768, 768, 3072)), ("gemm-1000x1000x1000", (1000, 1000, 1000)),
         ("gemm-96x4096x11008", (96, 4096, 11008)), ("gemm-1050x441x625", (1050, 441, 625)),
         ("gemm-1009x1024x768", (1009, 1024, 768)), ("gemm-729x343x1125", (729, 343, 1125))]
LAYER = "chain-gpt3-6.7b-layer"
HERE = os.path.dirname(os.path.abspath(__file__))

_MEASURED = ("import resource, subprocess, sys; out = subprocess.run(sys.argv[1:], check=True, "
             "capture_output=True, text=True).stdout; print(out); "
             "r = resource.getrusage(resource.RUSAGE_CHILDREN); print(r.ru_maxrss, r.ru_utime + r.ru_stime)")


def measured(command: list[str], cwd: str | None = None) -> tuple[dict, float, float, float]:
    """The command's JSON output, its wall seconds, its peak resident MiB and the CPU seconds of
    all its processes (its workers included: each is waited for by its parent)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURED, *command], check=True, capture_output=True,
                          text=True, cwd=cwd)
    seconds = time.perf_counter() - start
    *body, last = done.stdout.strip().splitlines()
    peak, cpu = last.split()
    return json.loads("\n".join(body)), seconds, int(peak) / 1024, float(cpu)


def gemm_file(name: str, m: int, n: int, k: int, scratch: str) -> str:
    """The GEMM's workload, every tensor bf16, written to `scratch`."""
    path = os.path.join(scratch, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f'name: {name}\neinsum: "Z[m,n] += A[m,k] * B[k,n]"\nsizes: {{m: {m}, n: {n}, k: {k}}}\n'
                "dtype: bf16\n")
    return path


def compile_ours() -> None:
    """Our package's bytecode, written once as `pip install` writes it (AccelForge's venv has
    its own): where PYTHONDONTWRITEBYTECODE is set, each of our runs would otherwise compile
    every module it imports again, about 0.15 s of CPU a run on this machine."""
    import mapper
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(mapper.__file__)], check=True)


def ours_gemm(workload: str, time_limit: float, mapspace: str) -> tuple[float, str, float, float, float]:
    out, seconds, peak, cpu = measured([sys.executable, "-m", "mapper", "search", "pe-array", workload, "--mapspace",
                                   mapspace, "--objective", "energy", "--time-limit", str(time_limit), "--json"])
    search = out["search"]
    status = "proven" if search["optimal"] else f"gap {search['gap']:.2%}"
    return out["cost"]["energy_pj"] / out["cost"]["macs"], status, seconds, peak, cpu


def ours_fuse(time_limit: float) -> tuple[dict, float, float, float]:
    return measured([sys.executable, "-m", "mapper", "fuse", "tpu-v4i", LAYER, "--mapspace", "tpu-v4i-roles",
                     "--time-limit", str(time_limit), "--json"])


def theirs(venv: str, *args: str) -> tuple[dict, float, float, float]:
    python = os.path.join(venv, "bin", "python")
    with tempfile.TemporaryDirectory() as scratch:        # AccelForge writes mapping.svg there
        return measured([python, os.path.join(HERE, "accelforge_side.py"), *args], cwd=scratch)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--accelforge", default=None, metavar="VENV", help="AccelForge's virtual environment")
    parser.add_argument("--time-limit", type=float, default=60.0, help="ours, per GEMM")
    parser.add_argument("--fuse-time-limit", type=float, default=30.0, help="ours, the fused layer")
    parser.add_argument("--mapspace", default="bypass-every",
                        help="ours, the GEMMs' mapspace (tensor-depths: each tensor at its own depth in the "
                             "global buffer, as AccelForge's storage nodes may be)")
    args = parser.parse_args()
    table = Table()
    table.print(f"{'case':<24} {'arch':<9} {'AccelForge':>12} {'s':>7} {'cpu s':>7} {'MiB':>6} {'mapper':>12} "
                f"{'proven/gap':>13} {'s':>6} {'cpu s':>6} {'MiB':>6} {'cpu x':>6}")
    compile_ours()
    scratch_dir = tempfile.TemporaryDirectory(prefix="bench_peers_")   # removed when collected
    scratch = scratch_dir.name
    for name, (m, n, k) in GEMMS:
        if args.only and args.only not in name:
            continue
        af, af_cpu = ("-", "-", "-", "-"), None
        if args.accelforge:
            out, seconds, peak, af_cpu = theirs(args.accelforge, "gemm", str(m), str(n), str(k))
            af = f"{out['energy_pj_per_mac']:.4f}", f"{seconds:.0f}", f"{af_cpu:.0f}", f"{peak:.0f}"
        energy, status, seconds, peak, cpu = ours_gemm(gemm_file(name, m, n, k, scratch), args.time_limit,
                                                       args.mapspace)
        ratio = "-" if af_cpu is None else f"{af_cpu / cpu:.1f}"
        table.print(f"{name:<24} {'pe-array':<9} {af[0]:>12} {af[1]:>7} {af[2]:>7} {af[3]:>6} {energy:>12.4f} "
                    f"{status:>13} {seconds:>6.1f} {cpu:>6.1f} {peak:>6.0f} {ratio:>6}")
    if not args.only or args.only in LAYER:
        for mode in ("unfused", "fused"):
            af, af_cpu = ("-", "-", "-", "-"), None
            if args.accelforge:
                out, seconds, peak, af_cpu = theirs(args.accelforge, "ffm", mode)
                af = f"{out['energy_j']:.4f} J", f"{seconds:.0f}", f"{af_cpu:.0f}", f"{peak:.0f}"
            if mode == "unfused":
                fused_out, fuse_seconds, fuse_peak, fuse_cpu = ours_fuse(args.fuse_time_limit)
            energy = fused_out[mode]["energy_pj"] * 1e-12
            # the grouping proven over the kernels found (not each kernel's mapping)
            status = "groups proven" if fused_out["cover_proven"] and mode == "fused" else "-"
            ratio = "-" if af_cpu is None else f"{af_cpu / fuse_cpu:.1f}"
            table.print(f"{LAYER + ' ' + mode:<24} {'tpu-v4i':<9} {af[0]:>12} {af[1]:>7} {af[2]:>7} {af[3]:>6} "
                        f"{energy:>10.4f} J {status:>13} {fuse_seconds:>6.1f} {fuse_cpu:>6.1f} {fuse_peak:>6.0f} "
                        f"{ratio:>6}")
    table.write(args.write, "bench_peers")


if __name__ == "__main__":
    main()
