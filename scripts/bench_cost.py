"""Benchmark: mappings priced per second by the vectorised cost model (`evaluate_many`).

Prints a table for a 4-level GEMM on h100, convolutions on the Eyeriss-like preset and a small
GEMM. Random mappings are drawn once (not timed); the batches are timed over several repeats on
one core (numpy's BLAS threads are pinned to 1 so the figure is per core). Most random mappings
are invalid (tiles over capacity, spatial loops over the fanout); every row is priced all the
same, so the last columns time the valid rows alone, gathered into one table: the figure a
search that prices only valid mappings would see. The allocator is set as the `mapper` command
sets it (`mapper.memory`), unless `--allocator-default`.

    python scripts/bench_cost.py [--mappings N] [--repeats R]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from mapper import evaluate_many, load_arch, load_workload  # noqa: E402
from mapper.mapping import MappingTable                             # noqa: E402
from mapper.memory import keep_freed_memory                         # noqa: E402
from mapper.random_mappings import random_table                     # noqa: E402

CASES = [("h100", "gemm-4096"), ("eyeriss", "conv-alexnet-conv3"), ("eyeriss", "conv-resnet50-conv3"),
         ("toy", "gemm-256")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mappings", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--allocator-default", action="store_true",
                        help="leave the C allocator as it is (the `mapper` command sets keep_freed_memory)")
    args = parser.parse_args()
    if not args.allocator_default:
        keep_freed_memory()
    print(f"{'arch':8} {'workload':22} {'levels':>6} {'dims':>4} {'mappings':>9} "
          f"{'best s':>8} {'mappings/s':>12} {'valid':>6} {'valid rows':>10} {'valid/s':>12}")
    for arch_name, workload_name in CASES:
        arch, workload = load_arch(arch_name), load_workload(workload_name)
        tables = [random_table(arch, workload, args.batch, seed=i)
                  for i in range(max(1, args.mappings // args.batch))]
        n = sum(len(t) for t in tables)
        best = _best_seconds(arch, workload, tables, args.repeats)
        valid = MappingTable.concat([t.take(evaluate_many(arch, workload, t).valid) for t in tables])
        best_valid = _best_seconds(arch, workload, [valid], args.repeats)
        print(f"{arch_name:8} {workload_name:22} {len(arch.levels):>6} {len(workload.dims):>4} "
              f"{n:>9,} {best:>8.3f} {n / best:>12,.0f} {len(valid) / n:>6.1%} "
              f"{len(valid):>10,} {len(valid) / best_valid:>12,.0f}")


def _best_seconds(arch, workload, tables, repeats: int) -> float:
    """The fastest of `repeats` runs pricing every table."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for table in tables:
            evaluate_many(arch, workload, table)
        best = min(best, time.perf_counter() - start)
    return best


if __name__ == "__main__":
    main()
