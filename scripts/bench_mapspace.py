"""Benchmark: mapspace size and pruning funnel, with the seconds and peak memory it took.

    python scripts/bench_mapspace.py

Raw size and the per-dim steps (constraints, divisibility) are exact closed forms; the coupled
steps (fanout, capacity, occupancy) are counted exactly when the cross product of per-dim
tables is small enough, else estimated from uniform samples (marked ~).
"""
from __future__ import annotations

import time
import tracemalloc

from mapper import load_arch, load_workload
from mapper.load import load_constraints
from mapper.mapspace import Mapspace, counting

CASES = [("h100", "gemm-4096", "default", 3_000_000),
         ("h100", "gemm-4096", "gpu", 3_000_000),
         ("eyeriss", "conv-resnet50-conv3", "default", 3_000_000),
         ("toy", "gemm-256", "fixed-example", 20_000_000)]


def main() -> None:
    header = (f"{'arch':8} {'workload':20} {'mapspace':14} {'raw':>10} {'constraints':>11} "
              f"{'divisible':>10} {'fanout':>10} {'capacity':>10} {'occupancy':>10} {'exact':>5} "
              f"{'seconds':>8} {'peak MiB':>8}")
    print(header)
    for arch_name, workload_name, preset, limit in CASES:
        tracemalloc.start()
        start = time.perf_counter()
        space = Mapspace(load_arch(arch_name), load_workload(workload_name), load_constraints(preset))
        funnel = counting.funnel(space, exact_limit=limit)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        a = funnel.after
        print(f"{arch_name:8} {workload_name:20} {preset:14} {funnel.size:>10.3g} {a['constraints']:>11.3g} "
              f"{a['divisibility']:>10.3g} {a['fanout']:>10.3g} {a['capacity']:>10.3g} "
              f"{a['occupancy']:>10.3g} {str(funnel.exact):>5} {seconds:>8.2f} {peak:>8.1f}")


if __name__ == "__main__":
    main()
