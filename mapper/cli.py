"""`mapper` command line: evaluate (and the commands later issues add).

User errors (`MapperError`) are printed on one line and exit with status 2; tracebacks are
reserved for bugs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .cost import evaluate
from .errors import MapperError
from .load import (PRESET_KINDS, load_arch, load_constraints, load_mapping, load_workload,
                   preset_names)
from .mapspace import Mapspace
from .report import evaluation_json, evaluation_text, funnel_text, search_json, search_text


def _evaluate(args) -> int:
    arch = load_arch(args.arch)
    workload = load_workload(args.workload)
    mapping = load_mapping(args.mapping, arch, workload)
    ev = evaluate(arch, workload, mapping)
    if args.json:
        print(json.dumps(evaluation_json(arch, workload, mapping, ev), indent=2))
    else:
        print(evaluation_text(arch, workload, mapping, ev))
    return 0


def _mapspace(args) -> int:
    arch = load_arch(args.arch)
    workload = load_workload(args.workload)
    space = Mapspace(arch, workload, load_constraints(args.mapspace))
    start = time.perf_counter()
    funnel = space.require_nonempty(space.funnel(exact_limit=args.exact_limit))
    seconds = time.perf_counter() - start
    if args.json:
        print(json.dumps({"arch": arch.name, "workload": workload.name,
                          "constraints": space.constraints.name, "mapspace": funnel.to_json(),
                          "seconds": seconds}, indent=2))
    else:
        print(f"{workload.name} on {arch.name}, mapspace '{space.constraints.name}'")
        print(funnel_text(funnel))
        print(f"({seconds:.2f} s)")
    return 0


def _run_search(args, strategy_name: str):
    from tqdm import tqdm
    from .search import make_strategy, parse_objective
    arch = load_arch(args.arch)
    workload = load_workload(args.workload)
    space = Mapspace(arch, workload, load_constraints(args.mapspace))
    objective = parse_objective(args.objective, arch)
    warm = tuple(load_mapping(path, arch, workload) for path in getattr(args, "warm_start", None) or ())
    strategy = make_strategy(strategy_name, time_limit=args.time_limit, seed=args.seed,
                             samples=args.samples, cpsat_seconds=args.cpsat_seconds, incumbents=warm)
    with tqdm(desc=strategy_name, unit=" mappings", unit_scale=True, delay=1.0, file=sys.stderr,
              leave=False) as bar:
        def progress(evaluated):
            bar.update(evaluated - bar.n)
        result = strategy.run(space, objective, progress)
    return arch, workload, result


def _search(args) -> int:
    arch, workload, result = _run_search(args, args.strategy)
    if args.json:
        print(json.dumps(search_json(result, arch, workload), indent=2))
    else:
        print(search_text(result, arch, workload))
    return 0


def _compare(args) -> int:
    from .compare import compare_text, compare_json
    arch, workload, greedy = _run_search(args, "greedy")
    _, _, joint = _run_search(args, "joint")
    if args.json:
        print(json.dumps(compare_json(greedy, joint, arch, workload), indent=2))
    else:
        print(compare_text(greedy, joint, arch, workload))
    return 0


def _search_options(parser, strategy: bool):
    parser.add_argument("arch", help="architecture YAML file or preset name")
    parser.add_argument("workload", help="workload YAML file or preset name")
    parser.add_argument("--mapspace", default=None, help="mapspace constraints file or preset (default: default)")
    if strategy:
        parser.add_argument("--strategy", default="joint", choices=["joint", "greedy", "exhaustive", "random"])
    parser.add_argument("--objective", default="edp", help="edp, energy, cycles or bytes:LEVEL")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="random strategy seed")
    parser.add_argument("--samples", type=int, default=200_000, help="random strategy draws")
    parser.add_argument("--cpsat-seconds", type=float, default=2.0,
                        help="joint: wall-clock cap on CP-SAT proposals before the tree search (0: none)")
    parser.add_argument("--warm-start", action="append", metavar="MAPPING",
                        help="joint: start from this mapping (file or preset; repeatable)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _presets(args) -> int:
    for kind in PRESET_KINDS:
        names = preset_names(kind)
        if names:
            print(f"{kind}: {', '.join(names)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mapper", description=(
        "Find and price mappings of tensor computations onto memory hierarchies."))
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="price one mapping, level by level and tensor by tensor")
    ev.add_argument("arch", help="architecture YAML file or preset name (see `mapper presets`)")
    ev.add_argument("workload", help="workload YAML file or preset name")
    ev.add_argument("mapping", help="mapping YAML file or preset name")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.set_defaults(run=_evaluate)
    se = sub.add_parser("search", help="find the best mapping (and prove it optimal where possible)")
    _search_options(se, strategy=True)
    se.set_defaults(run=_search)
    co = sub.add_parser("compare", help="greedy top-down against the joint search, and why they differ")
    _search_options(co, strategy=False)
    co.set_defaults(run=_compare)
    ms = sub.add_parser("mapspace", help="size of the mapspace and what each pruning step leaves")
    ms.add_argument("arch")
    ms.add_argument("workload")
    ms.add_argument("--mapspace", default=None, help="mapspace constraints file or preset (default: default)")
    ms.add_argument("--exact-limit", type=int, default=3_000_000,
                    help="count exactly up to this many factor combinations, else estimate by sampling")
    ms.add_argument("--json", action="store_true")
    ms.set_defaults(run=_mapspace)
    pr = sub.add_parser("presets", help="list the bundled architectures, workloads and mappings")
    pr.set_defaults(run=_presets)
    from .sweep.cli import add_commands as add_sweep_commands      # sweep, results
    add_sweep_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except MapperError as exc:
        print(f"mapper: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
