"""Benchmark: the capacity curve of a 4096^3 GEMM on a two-level machine (tests/data/two-level-arch.yaml),
each point the joint search's proven least DRAM traffic, checked against exhaustive search at
every capacity, with the square-root law's product traffic x sqrt(S) (constant in the
continuous regime; also for the re-fetched tensors alone, those above their compulsory
traffic, without the tensors that move once at every capacity) and the search's time per point.

    python scripts/bench_capacity.py [--workload gemm-4096] [--arch tests/data/two-level-arch.yaml]
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

import mapper


def exhaustive_least(arch, workload, level: str, capacity: float) -> tuple[float, float]:
    """(least DRAM bytes, seconds) by exhaustive search with the level's capacity replaced."""
    levels = tuple(replace(lv, capacity=capacity) if lv.name == level else lv for lv in arch.levels)
    started = time.perf_counter()
    result = mapper.run_search(replace(arch, levels=levels), workload, strategy="exhaustive",
                               objective=f"bytes:{arch.levels[0].name}", time_limit=None)
    return result.score, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="tests/data/two-level-arch.yaml")
    parser.add_argument("--workload", default="gemm-4096")
    parser.add_argument("--level", default="Buffer")
    args = parser.parse_args()
    arch, workload = mapper.load_arch(args.arch), mapper.load_workload(args.workload)
    started = time.perf_counter()
    curve = mapper.run_capacity_curve(arch, workload, args.level, time_limit=None)
    total = time.perf_counter() - started
    first = curve.points[0]
    sizes = {t.what: t.size_bytes for t in curve.thresholds}

    def refetched(p) -> float:
        """Bytes of the tensors still above their compulsory traffic, times sqrt(S)."""
        return sum(b for name, b in p.tensor_bytes.items() if b > sizes[name] * (1 + 1e-9)) * math.sqrt(p.capacity)
    print(f"{workload.name} on {arch.name}: least {curve.outer} bytes by {args.level} capacity "
          f"(compulsory {curve.compulsory_bytes:,.0f} B); curve in {total:.2f} s")
    print(f"{'capacity':>12} {'DRAM bytes':>15} {'exhaustive':>15} {'x sqrt(S) / first':>18} {'re-fetched x sqrt(S)':>21} "
          f"{'regime':>11} {'proven':>6} {'joint s':>8} {'exh. s':>7}")
    for p in curve.points:
        brute, seconds = exhaustive_least(arch, workload, args.level, p.capacity)
        law = p.outer_bytes * math.sqrt(p.capacity) / (first.outer_bytes * math.sqrt(first.capacity))
        print(f"{p.capacity:>12,.0f} {p.outer_bytes:>15,.0f} {brute:>15,.0f} {law:>18.3f} {refetched(p):>21.4g} {p.regime:>11} "
              f"{'yes' if p.proven else 'no':>6} {p.seconds:>8.2f} {seconds:>7.2f}"
              + ("" if brute == p.outer_bytes else "  MISMATCH"))
    for t in curve.thresholds:
        where = "never on this grid" if t.capacity is None else f"from {t.capacity:,.0f} B"
        print(f"threshold: {t.what} ({t.size_bytes:,.0f} B) moves only compulsory traffic {where}"
              + (" (from the first point)" if t.from_start else ""))


if __name__ == "__main__":
    main()
