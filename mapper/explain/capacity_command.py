"""`mapper explain ARCH WORKLOAD --capacity LEVEL`: the capacity curve from the command line."""
from __future__ import annotations

from ..errors import SpecError
from ..report import strict_json
from ..units import Where, parse_byte_grid
from .capacity_curve import capacity_curve
from .capacity_report import curve_json, curve_text, plot_curve


def capacity_grid(args) -> tuple[float, ...] | None:
    """The capacities `--capacities` gives (None: the default grid), once the flags are
    checked to ask for a curve: any capacity curve's, an einsum's or an op graph's."""
    if args.capacity is None:
        raise SpecError("--capacities", "", "needs --capacity LEVEL: the level whose capacities they are")
    if args.mapping is not None:
        raise SpecError("--capacity", "", "takes no mapping: each capacity's mapping is the search's best "
                        f"(got {args.mapping!r})")
    return None if args.capacities is None else parse_byte_grid(args.capacities, Where("--capacities"))


def capacity_command(args, read_inputs) -> int:
    """Print (and plot) the curve the flags ask for; `read_inputs(args)` reads the arch,
    workload and mapspace as the search commands do (the command line's loader)."""
    grid = capacity_grid(args)
    found = read_inputs(args)
    curve = capacity_curve(found.arch, found.workload, found.constraints, args.capacity, grid,
                           objective=args.objective, time_limit=args.time_limit,
                           max_evaluations=args.max_evaluations, options={"cpsat_seconds": args.cpsat_seconds})
    return print_curve(args, curve, curve_json, curve_text, plot_curve)


def print_curve(args, curve, as_json, as_text, plot) -> int:
    """A curve as `--json` or text, with its plot where `--plot DIR` asks (an einsum's curve or
    an op graph's: each gives its own three forms)."""
    plots = [str(plot(curve, args.plot))] if args.plot else []
    if args.json:
        print(strict_json({**as_json(curve), "plots": plots}))
    else:
        print(as_text(curve) + "".join(f"\nwrote {p}" for p in plots))
    return 0
