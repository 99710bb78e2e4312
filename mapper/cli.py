"""`mapper` command line: evaluate (and the commands later issues add).

User errors (`MapperError`) are printed on one line and exit with status 2; tracebacks are
reserved for bugs.
"""
from __future__ import annotations

import argparse
import atexit
import dataclasses
import math
import os
import signal
import sys
import threading
import time
from types import MappingProxyType

from . import depths, flags
from .cost import evaluate
from .errors import MapperError
from .memory import keep_freed_memory
from .inputs import (evaluation_inputs, native_search_inputs,
                     search_inputs, with_warm_starts)
from .load import PRESET_KINDS, preset_names
from .mapspace import Mapspace, counting, infeasible
from .report import (evaluation_json, evaluation_text, funnel_text, reference_lines, search_json,
                     search_text, strict_json)

TIME_LIMIT_DEFAULT = 60.0
INTERRUPTED = 130           # exit status after Ctrl-C (128 + SIGINT), as shells report it


def _print_notes(notes) -> None:
    for note in notes:
        print(f"mapper: note: {note}", file=sys.stderr)


def _evaluate(args) -> int:
    if args.from_triton and args.mapping is not None:
        raise MapperError("evaluate: give a MAPPING or --from-triton CONFIG, not both")
    if args.from_triton:
        from .emit.command import config_evaluation_inputs
        found = config_evaluation_inputs(args.arch, args.workload, args.from_triton)
    elif args.mapping is None:
        raise MapperError("evaluate: give a MAPPING or --from-triton CONFIG")
    else:
        found = evaluation_inputs(args.arch, args.workload, args.mapping, ert=args.ert,
                                  timeloop_rules=args.timeloop_rules)
    _print_notes(found.notes)
    arch, workload, mapping = found.arch, found.workload, found.mapping
    ev = evaluate(arch, workload, mapping)
    if args.export_timeloop:
        from .timeloop.commands import write_export
        write_export(args.export_timeloop, mapping, arch, workload, found.imported)
    if args.json:
        print(strict_json(evaluation_json(arch, workload, mapping, ev)))
    else:
        print(evaluation_text(arch, workload, mapping, ev))
    return 0


def _mapspace(args) -> int:
    found = native_search_inputs(args.arch, args.workload, args.mapspace)
    arch, workload = found.arch, found.workload
    space = Mapspace(arch, workload, found.constraints)
    start = time.perf_counter()
    funnel = infeasible.require_nonempty(space, counting.funnel(space, exact_limit=args.exact_limit))
    seconds = time.perf_counter() - start
    if args.json:
        print(strict_json({"arch": arch.name, "workload": workload.name,
                           "constraints": space.constraints.name, "mapspace": funnel.to_json(),
                           "seconds": seconds}))
    else:
        print(f"{workload.name} on {arch.name}, mapspace '{space.constraints.name}'")
        print(funnel_text(funnel))
        print(f"({seconds:.2f} s)")
    return 0


FLAG_OF_OPTION = MappingProxyType({"seed": "--seed", "samples": "--samples", "cpsat_seconds": "--cpsat-seconds",
                                   "incumbents": "--warm-start"})


def _strategy_options(args, strategy_name: str, warm: tuple) -> dict:
    """The strategy options the command line gives (those not given take their defaults); an
    evaluation budget lets random draw until it is spent unless `--samples` says otherwise."""
    options = {"seed": args.seed, "samples": args.samples, "cpsat_seconds": args.cpsat_seconds,
               # for the joint search a start; for every strategy a reference (`reference_lines`)
               "incumbents": (warm or None) if strategy_name == "joint" else None}
    if args.max_evaluations and strategy_name == "random" and args.samples is None:
        options["samples"] = 10**12
    return {k: v for k, v in options.items() if v is not None}


def _run_search(args, strategy_name: str, after_interrupt: bool = False, spent: float = 0.0):
    """(arch, workload, result, context) of the search the command asks for; `spent`: seconds
    of its time limit already used (compare: what its first search took past its own)."""
    from .search import SearchContext, make_strategy, parse_objective
    from .search.events import Interrupted
    time_limit = args.time_limit
    if time_limit is None:
        time_limit = None if args.max_evaluations else TIME_LIMIT_DEFAULT
    # the clock starts before the specs are read: building the mapspace counts
    context = SearchContext.for_command(time_limit, args.max_evaluations, since=_started_ago(args) + spent).for_search()
    if after_interrupt:         # compare: a Ctrl-C in its first search ends both
        context.interrupt()
    with _keep_best_on_ctrl_c(context):
        found = _search_inputs(args)
        arch, workload = found.arch, found.workload
        space = Mapspace(arch, workload, found.constraints)
        objective = parse_objective(args.objective or found.objective_name or "edp", arch)
        strategy = make_strategy(strategy_name, _strategy_options(args, strategy_name, found.warm_starts),
                                 where="command line", label=FLAG_OF_OPTION.get)
        with _progress_bar(strategy_name) as bar:
            def progress(evaluated, best=None, lower=None):      # the joint search gives all three
                bar.update(evaluated - bar.n)
                if best is not None and math.isfinite(best):
                    gap = f", gap <= {(best - lower) / best:.1%}" if lower is not None and best > 0 else ""
                    bar.set_postfix_str(f"best {best:.4g}{gap}", refresh=False)
            try:
                result = strategy.run(space, objective, context, progress)
            except MapperError:
                if context.interrupted:     # Ctrl-C before any mapping was found: nothing to print
                    raise _InterruptedEarly() from None
                raise
    if context.interrupted:
        result.events += (Interrupted(),)
        result.complete = False
    # reported on the space's workload: its operands in the order the kernel takes them (swap-AB),
    # and on its levels: a level split where each tensor sits at its own depth as its sub-levels
    found = dataclasses.replace(found, arch=depths.searched_arch(found.arch, space.workload, found.constraints),
                                workload=space.workload)
    return found, result, context


class _InterruptedEarly(Exception):
    """Ctrl-C stopped the search before it found any valid mapping."""


def _search_inputs(args):
    """The search's inputs from its flags (explain's search has no --ert, --timeloop-* or
    --warm-start: their defaults), its notes shown before any warm start is read."""
    found = search_inputs(args.arch, args.workload, args.mapspace, ert=getattr(args, "ert", None),
                          timeloop_rules=getattr(args, "timeloop_rules", False),
                          timeloop_mapper=getattr(args, "timeloop_mapper", None))
    _print_notes(found.notes)
    return with_warm_starts(found, getattr(args, "warm_start", None) or ())


def _progress_bar(strategy_name: str):
    """A progress bar on stderr when it is a terminal; none for scripts, sweeps and logs (tqdm,
    imported only then, costs start-up even when disabled; docs/RESULTS.md)."""
    isatty = getattr(sys.stderr, "isatty", None)
    if isatty is None or not isatty():
        return _NoBar()
    from tqdm import tqdm
    return tqdm(desc=strategy_name, unit=" mappings", unit_scale=True, delay=1.0, file=sys.stderr,
                leave=False)


class _NoBar:
    n = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, count) -> None:
        self.n += count

    def set_postfix_str(self, text, refresh=True) -> None:
        self.postfix = text


class _keep_best_on_ctrl_c:
    """While a search runs, a first Ctrl-C asks every strategy to stop at its next budget check
    and return its best so far; a second one aborts."""

    def __init__(self, context):
        self.context = context

    def _handler(self, signum, frame):
        if self.context.interrupted:
            raise KeyboardInterrupt
        self.context.interrupt()
        print("mapper: interrupted: finishing with the best mapping so far (Ctrl-C again to abort)",
              file=sys.stderr, flush=True)

    def __enter__(self):
        try:
            self.previous = signal.signal(signal.SIGINT, self._handler)
        except ValueError:          # not the main thread: leave Ctrl-C alone
            self.previous = None
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        return False


def _started_ago(args) -> float:
    """Seconds of the command's time limit already spent: the interpreter's start-up, when
    this process is the `mapper` command itself (not a caller of `main` in a longer process)."""
    from .search.context import seconds_since_start
    if not getattr(args, "own_process", False) or getattr(args, "startup_counted", False):
        return 0.0
    args.startup_counted = True         # `compare`: its second search has its own full limit
    return seconds_since_start()


def _search_json(args, result, arch, workload) -> dict:
    out = search_json(result, arch, workload)
    if args.max_evaluations:     # reproducible output: nothing that depends on the wall clock
        for key in ("seconds", "seconds_to_best", "stopped_by"):
            out["search"].pop(key, None)
    return out


def _status(context) -> int:
    return INTERRUPTED if context.interrupted else 0


def _search(args) -> int:
    found, result, context = _run_search(args, args.strategy)
    arch, workload = found.arch, found.workload
    if args.export_timeloop:
        from .timeloop.commands import write_export
        write_export(args.export_timeloop, result.mapping, arch, workload, found.imported)
    if args.warm_start and not args.json:
        references = [(path, evaluate(arch, workload, mapping))
                      for path, mapping in zip(args.warm_start, found.warm_starts)]
        print(reference_lines(result.evaluation, references), file=sys.stderr)
    if args.json:
        print(strict_json(_search_json(args, result, arch, workload)))
    else:
        print(search_text(result, arch, workload))
    return _status(context)


def _compare(args) -> int:
    from .compare import compare_text, compare_json
    started = time.perf_counter()
    found, greedy, first = _run_search(args, "greedy")
    arch, workload = found.arch, found.workload
    # the two searches share twice the time limit: what greedy took past its own (its quick
    # look per level once its budget is spent) comes off the joint search's
    over = max(0.0, time.perf_counter() - started - first.time_limit) if first.deadline is not None else 0.0
    _, joint, context = _run_search(args, "joint", after_interrupt=first.interrupted, spent=over)
    if args.json:
        print(strict_json(compare_json(greedy, joint, arch, workload)))
    else:
        print(compare_text(greedy, joint, arch, workload))
    return _status(context)


def _search_options(parser, strategy: bool):
    parser.add_argument("arch", help="architecture YAML file or preset name")
    parser.add_argument("workload", help="workload YAML file or preset name")
    parser.add_argument("--mapspace", default=None, help="mapspace constraints file or preset (default: default)")
    if strategy:
        parser.add_argument("--strategy", default="joint", choices=["joint", "greedy", "exhaustive", "random"])
    parser.add_argument("--objective", default=None,
                        help="edp, energy, cycles, delay,energy (fewest cycles, then least energy) or "
                             "bytes:LEVEL (default: a Timeloop mapper file's optimization-metrics, else edp)")
    parser.add_argument("--time-limit", type=flags.seconds, default=None,
                        help="seconds of wall clock for the whole command, reading the specs and "
                             "building the mapspace included (default 60)")
    parser.add_argument("--max-evaluations", type=flags.count, default=None, metavar="N",
                        help="stop after about N mappings priced instead of on the wall clock: the "
                             "result is independent of machine load (reproducible sweeps)")
    parser.add_argument("--seed", type=flags.count_or_zero, default=None,
                        help="random and joint: seed of their random draws (default 0; joint's proven "
                             "result does not depend on it)")
    parser.add_argument("--samples", type=flags.count, default=None, help="random: draws (default 200,000)")
    parser.add_argument("--cpsat-seconds", type=flags.seconds_or_zero, default=None,
                        help="joint: wall-clock cap on CP-SAT's proposals, solved beside the walk "
                             "(default 2; 0: none)")
    parser.add_argument("--warm-start", action="append", metavar="MAPPING",
                        help="a mapping (file or preset; repeatable; one of another shape of the same "
                             "einsum is carried to this one): joint starts from it, and every strategy's "
                             "text output compares its result with it")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--ert", default=None, metavar="FILE",
                        help="Timeloop inputs: Accelergy ERT.yaml / ERT_summary.yaml (default: one beside the arch)")
    parser.add_argument("--timeloop-rules", action="store_true", help="count with Timeloop's rules where they differ: multicast found one fanout at a time, leakage of utilized instances only, traffic always overlapped with compute")
    parser.add_argument("--timeloop-mapper", metavar="FILE",
                        help="Timeloop mapper settings (mapper.yaml): its optimization-metrics set the objective")
    if strategy:
        parser.add_argument("--export-timeloop", metavar="FILE",
                            help="write the best mapping as a Timeloop mapping file")


def _import_timeloop(args) -> int:
    from .timeloop.commands import import_command
    for path in import_command(args.files, args.output, args.ert, args.timeloop_rules):
        print(path)
    return 0


def _explain(args) -> int:
    from .explain import explain
    from .explain.report import explain_json, explain_text
    if args.capacity is not None or args.capacities is not None:
        from .load import names_model, names_opgraph
        if names_model(args.workload):
            from .sweep.capacity_model import capacity_command as model_curve
            return model_curve(args)
        if names_opgraph(args.workload):
            from .fusion.capacity_command import capacity_command as graph_curve
            return graph_curve(args)
        from .explain.capacity_command import capacity_command
        return capacity_command(args, _search_inputs)
    if args.mapping is not None:      # Timeloop's files too, with their ERT (--ert), as evaluate reads them
        given = evaluation_inputs(args.arch, args.workload, args.mapping, ert=args.ert)
        _print_notes(given.notes)
        arch, workload, mapping = given.arch, given.workload, given.mapping
        found = None
    else:
        args.strategy, args.seed, args.samples, args.warm_start = "joint", None, None, None
        args.cpsat_seconds = getattr(args, "cpsat_seconds", 2.0)
        searched, result, _ = _run_search(args, "joint")
        arch, workload, mapping = searched.arch, searched.workload, result.mapping
        found = (f"mapping: the joint search's best for {result.objective.name} "
                 f"({'proven optimal' if result.optimal else 'not proven optimal'}, "
                 f"{result.evaluated:,} mappings priced in {result.seconds:.1f} s)")
    ex = explain(arch, workload, mapping, args.level)
    plots = []
    if args.plot:
        from .explain.plots import write_plots
        plots = [str(p) for p in write_plots(ex, args.plot)]
    if args.json:
        out = explain_json(ex)
        out["plots"] = plots
        if found:
            out["found_by"] = found
        print(strict_json(out))
    else:
        print(((found + "\n") if found else "") + explain_text(ex))
        for p in plots:
            print(f"wrote {p}")
    return 0


def _presets(args) -> int:
    for kind in PRESET_KINDS:
        names = preset_names(kind)
        if names:
            print(f"{kind}: {', '.join(names)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mapper", description=(
        "Find and price mappings of tensor computations onto memory hierarchies."))
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="price one mapping, level by level and tensor by tensor")
    ev.add_argument("arch", help="architecture YAML file or preset name (see `mapper presets`)")
    ev.add_argument("workload", help="workload YAML file or preset name")
    ev.add_argument("mapping", nargs="?", default=None, help="mapping YAML file or preset name ('-': standard input)")
    ev.add_argument("--from-triton", metavar="CONFIG", help="price a Triton config instead (YAML/JSON: BLOCK_M, "
                    "BLOCK_N, BLOCK_K, num_stages, num_warps, optional GROUP_M) as the GEMM mapping it runs")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--ert", default=None, metavar="FILE",
                    help="Timeloop inputs: Accelergy ERT.yaml / ERT_summary.yaml (default: one beside the arch)")
    ev.add_argument("--export-timeloop", metavar="FILE", help="write the mapping as a Timeloop mapping file")
    ev.add_argument("--timeloop-rules", action="store_true", help="count with Timeloop's rules where they differ: multicast found one fanout at a time, leakage of utilized instances only, traffic always overlapped with compute")
    ev.set_defaults(run=_evaluate)
    it = sub.add_parser("import-timeloop", help="translate Timeloop files into this tool's YAML")
    it.add_argument("files", nargs="+", help="Timeloop architecture, problem, mapping, constraint, ERT files")
    it.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write the YAML into")
    it.add_argument("--ert", default=None, metavar="FILE", help="ERT file (default: one beside the arch)")
    it.add_argument("--timeloop-rules", action="store_true", help="write `model:` with Timeloop's counting rules into the arch")
    it.set_defaults(run=_import_timeloop)
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
    ms.add_argument("--exact-limit", type=flags.count, default=3_000_000,
                    help="count exactly up to this many factor combinations, else estimate by sampling")
    ms.add_argument("--json", action="store_true")
    ms.set_defaults(run=_mapspace)
    ex = sub.add_parser("explain", help="regimes, lower bounds, traffic split and pipeline depth of a mapping")
    ex.add_argument("arch", help="architecture YAML file or preset name")
    ex.add_argument("workload", help="workload YAML file or preset name")
    ex.add_argument("mapping", nargs="?", default=None,
                    help="mapping YAML file or preset name (default: the joint search's best)")
    ex.add_argument("--level", default=None, help="level for the traffic-vs-capacity curve "
                    "(default: a GPU's shared memory, else the level below the outermost)")
    ex.add_argument("--plot", default=None, metavar="DIR", help="write the traffic curve and roofline PNGs here")
    ex.add_argument("--json", action="store_true", help="print one JSON object")
    ex.add_argument("--mapspace", default=None, help="mapspace for the search (default: default)")
    ex.add_argument("--capacity", default=None, metavar="LEVEL", help="instead: the least outer traffic "
                    "over LEVEL's capacities, each the joint search's optimum, with the thresholds")
    ex.add_argument("--capacities", default=None, metavar="GRID", help="with --capacity: e.g. '8KiB..8MiB:x2' or "
                    "'64KiB,1MiB' (default: x2 steps up to the working set)")
    ex.add_argument("--objective", default=None, help="objective of the search (default edp; with --capacity "
                    "bytes at the outermost level)")
    ex.add_argument("--time-limit", type=flags.seconds, default=20.0, help="search seconds (default 20; "
                    "with --capacity per capacity)")
    ex.add_argument("--max-evaluations", type=flags.count, default=None, metavar="N",
                    help="mappings priced (with --capacity: per capacity) instead of a time limit: reproducible")
    ex.add_argument("--cpsat-seconds", type=flags.seconds_or_zero, default=2.0,
                    help="CP-SAT seconds within the search")
    ex.add_argument("--ert", default=None, metavar="FILE",
                    help="Timeloop inputs: Accelergy ERT.yaml / ERT_summary.yaml (default: one beside the arch)")
    ex.set_defaults(run=_explain)
    pr = sub.add_parser("presets", help="list the bundled architectures, workloads, mapspace constraints, mappings and models")
    pr.set_defaults(run=_presets)
    from .area import add_command as add_area_command               # area
    add_area_command(sub)
    from .sweep.cli import add_commands as add_sweep_commands      # sweep, results
    add_sweep_commands(sub)
    from .fusion.command import add_parser as add_fuse_command    # fuse (mapper/fusion/)
    add_fuse_command(sub)
    from .emit.command import add_command as add_emit_command       # emit
    add_emit_command(sub)
    from .model_import.command import add_parser as add_import_command   # import-model
    add_import_command(sub)
    return parser


class _VersionAction(argparse.Action):
    """`--version`, looking the version up only when asked: importlib.metadata costs start-up,
    which counts against a short time limit (docs/RESULTS.md)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("mapper")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.own_process = argv is None        # the `mapper` command itself: its start-up counts
    if args.own_process:                   # the process is the command's: its allocator too
        keep_freed_memory()
    try:
        status = args.run(args)
        sys.stdout.flush()
        return status
    except _InterruptedEarly:
        print("mapper: interrupted before a valid mapping was found", file=sys.stderr)
        return INTERRUPTED
    except MapperError as exc:
        print(f"mapper: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mapper: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`mapper presets | head`): stop quietly; point stdout at devnull
        # so the interpreter's final flush does not complain either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141                # 128 + SIGPIPE, as a shell reports a writer stopped by a closed pipe
    except OSError as exc:
        if exc.filename is not None:      # reading a file is a spec problem, reported by load
            raise
        print(f"mapper: error: cannot write the output ({exc.strerror or exc})", file=sys.stderr)
        return 1


def command() -> None:
    """The `mapper` command (console script, `python -m mapper`): `main`, then, once the output
    is flushed and the exit handlers have run, an exit without finalising the interpreter.
    Freeing numpy's and OR-Tools' modules one by one takes a noticeable part of a short time
    limit (docs/RESULTS.md), and the time limit's bar is wall time to the exit.
    With a thread still running (none of this project's commands leaves one), it exits as usual."""
    status = main()
    if threading.active_count() > 1:
        sys.exit(status)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        sys.exit(status)        # let the interpreter report what it cannot write
    os._exit(status)


if __name__ == "__main__":
    command()
