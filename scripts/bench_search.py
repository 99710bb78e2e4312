"""Benchmark: each search strategy's result, time to its best mapping, and whether it is proven.

    python scripts/bench_search.py [--time-limit S] [--objective edp]

Cases: a 4096-cube GEMM on h100, a GEMV (Llama-2-7B decode projection shape) on h100, and
AlexNet's conv3 on the Eyeriss-like preset. Exhaustive search refuses spaces above its limit.
"""
from __future__ import annotations

import argparse
import time

from mapper import load_arch, load_workload
from mapper.mapspace import Mapspace
from mapper.search import Exhaustive, Greedy, Joint, RandomSearch, SpaceTooLargeError, parse_objective

CASES = [("h100", "gemm-4096"), ("h100", "gemv-4096"), ("eyeriss", "conv-alexnet-conv3")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--objective", default="edp")
    parser.add_argument("--samples", type=int, default=200_000)
    args = parser.parse_args()
    print(f"{'arch':8} {'workload':20} {'strategy':10} {'score':>12} {'vs best':>8} {'to best s':>9} "
          f"{'total s':>8} {'priced':>11} {'proven':>6} {'gap':>7}")
    for arch_name, workload_name in CASES:
        space = Mapspace(load_arch(arch_name), load_workload(workload_name))
        objective = parse_objective(args.objective, space.arch)
        rows = []
        for strategy in (Greedy(), RandomSearch(samples=args.samples, time_limit=args.time_limit),
                         Joint(time_limit=args.time_limit), Exhaustive(time_limit=args.time_limit)):
            start = time.perf_counter()
            try:
                result = strategy.run(space, objective)
            except SpaceTooLargeError as exc:
                rows.append((strategy.name, None, str(exc).split(":")[0]))
                continue
            rows.append((strategy.name, result, time.perf_counter() - start))
        best = min(r.score for _, r, _ in rows if r is not None)
        for name, result, extra in rows:
            if result is None:
                print(f"{arch_name:8} {workload_name:20} {name:10} {extra}")
                continue
            gap = "" if result.gap is None else f"{result.gap:.2%}"
            print(f"{arch_name:8} {workload_name:20} {name:10} {result.score:>12.5g} "
                  f"{result.score / best - 1:>+8.2%} {result.seconds_to_best:>9.2f} {extra:>8.2f} "
                  f"{result.evaluated:>11,} {str(result.optimal):>6} {gap:>7}")


if __name__ == "__main__":
    main()
