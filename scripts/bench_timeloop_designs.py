"""Benchmark: mapper's search against Timeloop's mapper on Timeloop's four example designs.

    python scripts/bench_timeloop_designs.py [--time-limit S] [--only SUBSTRING] [--no-greedy]

The designs (eyeriss_like, simba_like, simple_output_stationary, simple_weight_stationary), each
on its default problem, are translated in archs/, workloads/, constraints/ and mappings/
timeloop-<design>.yaml; Timeloop's reported figures are in tests/data/timeloop_designs.yaml.
Per design: Timeloop's reported EDP, `evaluate` of the mapping Timeloop's mapper chose (and its
ratio to Timeloop's figure, which checks the translation), greedy's EDP, the joint search's EDP
and its ratio to Timeloop's, whether it is proven optimal (else the proven gap), the seconds and
the peak resident memory of its process (`benchlib.run_measured`). EDP is in pJ x cycles.

Each mapspace file holds Timeloop's constraints, or a superset where the format cannot say them
exactly (partial loop orders); it lacks only Timeloop's imperfect (remainder) factors, and
Timeloop's mapping lies in it. Other differences a ratio may carry: no bandwidth limits here
(Timeloop's were not binding on its mappings) and the counting rules listed in the reference file.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from benchlib import Table, bench_parser, joint_variants, run_measured
from mapper import evaluate, load_arch, load_mapping, load_workload
from mapper.load import load_constraints
from mapper.mapspace import Mapspace
from mapper.search import Greedy, parse_objective

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "tests" / "data" / "timeloop_designs.yaml"


def main() -> None:
    parser = bench_parser(__doc__, "designs")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--no-greedy", action="store_true", help="skip the greedy column")
    parser.add_argument("--ablation", action="store_true", help="also without CP-SAT, without local search")
    args = parser.parse_args()
    table = Table()
    with open(REFERENCE) as f:
        designs = yaml.safe_load(f)["designs"]
    table.print(f"EDP in pJ x cycles; joint and greedy with the EDP objective, --time-limit {args.time_limit:g} s")
    table.print(f"{'design':25} {'timeloop':>10} {'eval TL map':>11} {'/TL':>6} {'greedy':>10} {'/TL':>6} "
          f"{'variant':9} {'joint':>10} {'/TL':>6} {'proven':>6} {'gap':>7} {'seconds':>7} {'peak MiB':>8}")
    for case in designs:
        name = case["design"]
        if args.only and args.only not in name:
            continue
        head = f"{name:25}"
        try:
            arch, workload = load_arch(ROOT / case["arch"]), load_workload(ROOT / case["workload"])
            space = Mapspace(arch, workload, load_constraints(ROOT / case["mapspace"]))
            objective = parse_objective("edp", arch)
            theirs = evaluate(arch, workload, load_mapping(ROOT / case["mapping"], arch, workload))
        except Exception as exc:
            table.print(f"{head} {type(exc).__name__}: {str(exc)[:120]}")
            continue
        reported = case["timeloop"]["edp_pj_cycles"]
        head += f" {reported:>10.4g} {theirs.edp:>11.4g} {theirs.edp / reported:>6.3f}"
        greedy, greedy_error = None, None
        if args.no_greedy:
            head += f" {'-':>10} {'':>6}"
        else:
            greedy, greedy_error, _, _ = run_measured(Greedy(), space, objective, args.time_limit)
            head += (f" {greedy.evaluation.edp:>10.4g} {greedy.evaluation.edp / reported:>6.3f}" if greedy
                     else f" {'error':>10} {'':>6}")
        for variant, strategy in joint_variants(args.ablation):
            result, error, seconds, peak = run_measured(strategy, space, objective, args.time_limit)
            if result is None:
                table.print(f"{head} {variant:9} {'':>10} {'':>6} {'':>6} {'':>7} {seconds:>7.1f} {peak:>8.0f}"
                            f"  joint: {error}")
                continue
            edp = result.evaluation.edp
            gap = "" if result.optimal or result.gap is None else f"{result.gap:.1%}"
            table.print(f"{head} {variant:9} {edp:>10.4g} {edp / reported:>6.3f} {str(result.optimal):>6} {gap:>7} "
                        f"{seconds:>7.1f} {peak:>8.0f}")
        if greedy_error:
            table.print(f"{'':25} greedy: {greedy_error}")
    table.write(args.write, "bench_timeloop_designs" + ("_ablation" if args.ablation else ""))


if __name__ == "__main__":
    main()
