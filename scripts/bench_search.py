"""Benchmark: the joint search as a scaling report, with greedy beside it and a CP-SAT ablation.

    python scripts/bench_search.py [--time-limit S] [--only SUBSTRING] [--ablation] [--write docs/RESULTS.md]

Per case: the pruned mapspace size, greedy's score, the joint search's score, the seconds to
its best mapping and in all, whether it is proven optimal (else the proven gap), the mappings
priced and the peak resident memory of its process (`benchlib.run_measured`). With `--ablation`, each case
runs twice more: without CP-SAT proposals and without the local search, to show what each does.
"""
from __future__ import annotations

from benchlib import Table, bench_parser, joint_variants, run_measured
from mapper import load_arch, load_workload
from mapper.load import load_constraints
from mapper.mapspace import Mapspace, counting
from mapper.search import Greedy, parse_objective

# (arch, workload, mapspace, objective, what the score is shown as)
CASES = [
    ("pe-array", "gemm-256", "bypass-every", "energy", "pJ/MAC"),
    ("pe-array", "gemm-1024-int8", "bypass-every", "energy", "pJ/MAC"),
    ("pe-array", "gemv-1024-int8", "bypass-every", "energy", "pJ/MAC"),
    ("h100", "gemm-512", "default", "edp", "EDP"),
    ("h100", "gemm-1024", "default", "edp", "EDP"),
    ("h100", "gemm-2048", "default", "edp", "EDP"),
    ("h100", "gemm-4096", "default", "edp", "EDP"),
    ("h100", "gemm-8192", "default", "edp", "EDP"),
    ("h100", "gemm-16384", "default", "edp", "EDP"),
    ("h100", "tall-skinny-32768x64", "default", "edp", "EDP"),
    ("h100", "gemv-8192", "default", "edp", "EDP"),
    ("h100", "conv-resnet50-conv3", "unaligned", "edp", "EDP"),
    ("h100", "attention-qk", "unaligned", "edp", "EDP"),
    ("eyeriss", "conv-alexnet-conv3", "default", "edp", "EDP"),
]


def _shown(score: float, unit: str, macs: int) -> str:
    return f"{score / macs:.4f}" if unit == "pJ/MAC" else f"{score:.4g}"


def main() -> None:
    parser = bench_parser(__doc__, "cases (arch/workload)")
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--ablation", action="store_true", help="also without CP-SAT, without local search")
    args = parser.parse_args()
    variants = joint_variants(args.ablation)
    table = Table()
    table.print(f"{'arch':9} {'workload':22} {'pruned':>9} {'greedy':>10} {'variant':9} {'joint':>10} "
          f"{'to best':>7} {'total':>7} {'proven':>6} {'gap':>7} {'priced':>11} {'peak MiB':>8}")
    for arch_name, workload_name, mapspace, objective_name, unit in CASES:
        if args.only and args.only not in f"{arch_name}/{workload_name}":
            continue
        arch, workload = load_arch(arch_name), load_workload(workload_name)
        space = Mapspace(arch, workload, load_constraints(mapspace))
        objective = parse_objective(objective_name, arch)
        pruned = counting.funnel(space).after["occupancy"]
        greedy, error, _, _ = run_measured(Greedy(), space, objective, args.time_limit)
        greedy_text = _shown(greedy.score, unit, workload.macs) if greedy else "error"
        for name, strategy in variants:
            result, error, seconds, peak = run_measured(strategy, space, objective, args.time_limit)
            head = f"{arch_name:9} {workload_name:22} {pruned:>9.2g} {greedy_text:>10} {name:9}"
            if result is None:
                table.print(f"{head} {error}")
                continue
            gap = "" if result.optimal or result.gap is None else f"{result.gap:.1%}"
            table.print(f"{head} {_shown(result.score, unit, workload.macs):>10} {result.seconds_to_best:>7.1f} "
                        f"{seconds:>7.1f} {str(result.optimal):>6} {gap:>7} {result.evaluated:>11,} {peak:>8.0f}")
    table.write(args.write, "bench_search" + ("_ablation" if args.ablation else ""))


if __name__ == "__main__":
    main()
