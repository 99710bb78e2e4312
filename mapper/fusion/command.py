"""`mapper fuse ARCH WORKLOAD [--json] [--plot DIR] [--time-limit S] [--objective O]`."""
from __future__ import annotations

import sys

from .. import flags

TIME_LIMIT_DEFAULT = 60.0
REPORT_S = 1.5


def add_parser(sub) -> None:
    p = sub.add_parser("fuse", help="which ops of an op graph share a kernel, the fused mappings and what they save")
    p.add_argument("arch", help="architecture YAML file or preset name")
    p.add_argument("workload", help="op-graph workload (`ops:`) file or preset name, e.g. chain-layernorm-gemm-gelu")
    p.add_argument("--time-limit", type=flags.seconds, default=None,
                   help=f"the searches' work budget, S nominal seconds of mappings priced at a fixed rate (the "
                        f"same inputs give the same result, whatever the machine's load), and a wall-clock stop at "
                        f"S seconds (default {TIME_LIMIT_DEFAULT:.0f})")
    p.add_argument("--max-evaluations", type=flags.count, default=None, metavar="N",
                   help="stop the op searches after about N mappings priced in all, each search's share of "
                        "the time limit then N / S mappings a second, with no wall-clock stop")
    p.add_argument("--objective", default="energy", choices=["energy", "cycles", "bytes"],
                   help="what the grouping minimises, summed over kernels (bytes: at the outermost level); "
                        "each kernel's mapping is the joint search's best by the same objective "
                        "(by EDP on a GPU)")
    p.add_argument("--mapspace", default=None, metavar="NAME",
                   help="a constraints preset or file whose `levels` are added to every op's space "
                        "(e.g. tpu-v4i-roles: keeps by role) and whose `cta_pairs` runs the kernels on "
                        "CTA pairs (cta-pairs, b200); its other keys are refused")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", default=None, metavar="DIR", help="write the per-boundary traffic plot (PNG) to DIR")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..load import load_arch, load_constraints, load_opgraph
    from ..report import strict_json
    from ..search import SearchContext
    from .report import fuse_json, fuse_text, plot_boundaries
    from .run import fuse, fusion_space
    time_limit = args.time_limit or TIME_LIMIT_DEFAULT
    from ..search.context import seconds_since_start
    # the interpreter's start-up counts against the limit where this process is the command
    since = seconds_since_start() if getattr(args, "own_process", False) else 0.0
    # the searches end REPORT_S before the limit: the choice over groupings, the boundaries'
    # reasons and the report come after them
    context = SearchContext.for_command(time_limit, args.max_evaluations, since=since + min(REPORT_S, time_limit / 10))
    arch, graph = load_arch(args.arch), load_opgraph(args.workload)
    arch, extra = fusion_space(arch, graph, load_constraints(args.mapspace)) if args.mapspace else (arch, ())
    result = fuse(arch, graph, context, time_limit, args.objective, extra)
    if args.json:
        print(strict_json(fuse_json(result)))
    else:
        print(fuse_text(result))
    if args.plot:
        print(f"plot: {plot_boundaries(result, args.plot)}", file=sys.stderr)
    return 0

