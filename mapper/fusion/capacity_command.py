"""`mapper explain ARCH OPGRAPH --capacity LEVEL`: the fused and unfused capacity curves of an
op graph from the command line (an einsum's curve is `explain.capacity_command`'s, a model's
`sweep.capacity_model`'s)."""
from __future__ import annotations

from ..errors import SpecError
from ..explain.capacity_command import capacity_grid, print_curve
from ..explain.capacity_curve import curve_level
from ..load import load_arch, load_constraints, load_opgraph
from .capacity_curve import OBJECTIVE, fused_capacity_curve
from .capacity_report import fused_curve_json, fused_curve_text, plot_fused_curve
from .run import fusion_space


def capacity_command(args) -> int:
    """Print (and plot) the curves of the op graph WORKLOAD names (`--mapspace`: its `levels`
    added to every op's space, as `mapper fuse` takes it)."""
    grid = capacity_grid(args)
    if args.objective not in (None, OBJECTIVE):
        raise SpecError("--objective", "", f"an op graph's capacity curve is each fusion study's least outermost "
                        f"traffic (objective {OBJECTIVE}); got {args.objective!r}")
    arch = load_arch(args.arch)
    curve_level(arch, args.capacity)            # a bad level said before the graph is read
    graph = load_opgraph(args.workload)
    arch, extra = fusion_space(arch, graph, load_constraints(args.mapspace)) if args.mapspace else (arch, ())
    curve = fused_capacity_curve(arch, graph, args.capacity, grid, time_limit=args.time_limit,
                                 max_evaluations=args.max_evaluations, extra_levels=extra)
    return print_curve(args, curve, fused_curve_json, fused_curve_text, plot_fused_curve)
