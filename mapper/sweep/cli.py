"""`mapper sweep` and `mapper results`: the sweep's command-line edge (parsing flags into a
`SweepSpec`, printing the report, exporting the store)."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from .. import flags
from ..errors import MapperError, SpecError
from ..units import Where
from .store import DEFAULT_DB, NAMES, Store


def add_commands(sub) -> None:
    sw = sub.add_parser("sweep", help="search a grid of shapes, models and architectures into a results store")
    sw.add_argument("target", help="a sweep file, or with --gemm/--model/--workload the architecture(s) "
                    "(preset or file; several comma-separated)")
    sw.add_argument("--gemm", action="append", metavar="GRID",
                    help="GEMM shapes, e.g. 'm=512..8192:x2 n=4096 k=1024,4096' (a..b:xF geometric, "
                         "a..b:+S arithmetic, a,b,c a list); repeatable")
    sw.add_argument("--model", action="append", help="a model preset's layers (see `mapper presets`); repeatable")
    sw.add_argument("--phase", help="model phase(s), comma-separated (e.g. prefill, decode)")
    sw.add_argument("--seq", help="model input: sequence length(s) (value, list or range)")
    sw.add_argument("--batch", help="model input: batch size(s) (value, list or range)")
    sw.add_argument("--dtype", help="the model's operands in this dtype (fp8, e4m3, fp4, nvfp4, mxfp8, ...; "
                                    "outputs stay as the model writes them, else bf16); rows named MODEL-DTYPE")
    sw.add_argument("--fuse", action="store_true",
                    help="also each model's chains (its layers with their norms, activations, residuals, softmax) "
                         "as fusion studies: fused against unfused totals per chain and per model")
    sw.add_argument("--workload", action="append", help="a workload preset or file; repeatable")
    sw.add_argument("--vary", action="append", metavar="LEVEL.FIELD=GRID",
                    help="derive architectures from each ARCH, e.g. 'GlobalBuffer.capacity=8MiB..256MiB:x2' "
                         "(the size grammar in the field's units; a mesh as 128x128); repeatable: every "
                         "combination")
    sw.add_argument("--strategy", default=None, help="comma-separated strategies (default greedy,joint)")
    sw.add_argument("--objective", default=None, help="comma-separated objectives (default edp)")
    sw.add_argument("--mapspace", default=None, help="comma-separated mapspace presets or files")
    # 0 is a point without a time limit, as `time_limit: 0` in a sweep file
    sw.add_argument("--time-limit", type=flags.seconds_or_zero, default=None,
                    help="seconds per point at most (default 120; a point ends once it is proven)")
    sw.add_argument("--cpsat-seconds", type=flags.seconds_or_zero, default=None,
                    help="joint: CP-SAT proposal cap per point")
    sw.add_argument("--max-evaluations", type=flags.count, default=None, metavar="N",
                    help="each point's search stops after about N mappings priced, on a clock that counts them "
                         "(the same inputs then give the same result, whatever the machine's load)")
    sw.add_argument("--seed", type=flags.count_or_zero, default=None)
    sw.add_argument("--samples", type=flags.count, default=None)
    sw.add_argument("--db", default=DEFAULT_DB, help=f"results store (default {DEFAULT_DB})")
    sw.add_argument("--jobs", type=flags.count, default=None, help="local processes (default: all cores; 1 runs here)")
    sw.add_argument("--scheduler", default=None, help="address of a Dask scheduler (tcp://host:8786)")
    sw.add_argument("--plot", default=None, metavar="DIR", help="write the sweep's plots (PNG) here")
    sw.add_argument("--export-timeloop", default=None, metavar="DIR",
                    help="write each point's best mapping here as a Timeloop mapping file")
    sw.add_argument("--no-warm-start", action="store_true", help="joint points start cold")
    sw.add_argument("--retry-failed", action="store_true", help="search failed and timed-out points again")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.add_argument("--keep-going", action="store_true",
                    help="exit with status 0 even when points found no mapping (default: status 1)")
    sw.set_defaults(run=sweep_command)
    rs = sub.add_parser("results", help="list or export the results store")
    rs.add_argument("--db", default=DEFAULT_DB, help=f"results store (default {DEFAULT_DB})")
    out = rs.add_mutually_exclusive_group()
    out.add_argument("--csv", metavar="OUT", help="write CSV, one row per point ('-': standard output)")
    out.add_argument("--jsonl", metavar="OUT", help="write JSON lines, one per point ('-': standard output)")
    out.add_argument("--pareto", metavar="A,B[,C]", help="Pareto fronts (each workload's, op graph's fused and "
                     "unfused, model's totals per architecture) over two or three of energy, cycles, area, edp, "
                     "seconds, bytes (lower is better), e.g. energy,cycles,area")
    rs.add_argument("--plot", default=None, metavar="DIR", help="with --pareto: draw each front (PNG) in DIR")
    rs.set_defaults(run=results_command)


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [t.strip() for t in text.split(",") if t.strip()]


def build_spec(args):
    from ..dtypes import BLOCK_FORMATS, canonical
    from .spec import ChainSubject, SweepSpec, gemm_subjects, load_sweep, model_chains, model_subjects, workload_entry
    flag_mode = bool(args.gemm or args.model or args.workload)
    if not flag_mode:
        if args.phase or args.seq or args.batch or args.dtype or args.fuse:
            raise SpecError("--phase/--seq/--batch/--dtype/--fuse", "", "apply to --model; give --model NAME "
                            "(in a sweep file: `fuse: true`)")
        if args.vary:
            raise SpecError("--vary", "", "applies to ARCH with --gemm, --model or --workload; in a sweep "
                            "file write the grid under `archs:` as {base: NAME, vary: {LEVEL.FIELD: VALUES}}")
        spec = load_sweep(args.target)
    else:
        subjects, chains, fused_models = [], [], 0
        for grid in args.gemm or []:
            subjects += gemm_subjects(grid)
        for name in args.workload or []:
            found = workload_entry({"workload": name}, Where("--workload"))
            subjects += [s for s in found if not isinstance(s, ChainSubject)]
            chains += [s for s in found if isinstance(s, ChainSubject)]          # op graphs
        for name in args.model or []:
            entry = {"model": name}
            if args.phase:
                entry["phase"] = _split(args.phase)
            for key in ("seq", "batch", "dtype"):
                if getattr(args, key):
                    entry[key] = getattr(args, key)
            subjects += model_subjects(entry, Where(f"--model {name}"))
            of_model = model_chains(entry, Where(f"--model {name}")) if args.fuse else []
            fused_models += bool(of_model)
            chains += of_model
        if args.dtype and not args.model:
            raise SpecError("--dtype", "", "applies to --model (a --gemm or --workload file says its own dtypes)")
        if args.fuse and args.dtype and canonical(args.dtype) in BLOCK_FORMATS:
            raise SpecError("--fuse", "", f"a model in {args.dtype} has no chains to fuse: block-scaled formats are "
                            "modelled per einsum (their scales as tensors), not in op graphs")
        if args.fuse and not fused_models:
            raise SpecError("--fuse", "", "no --model with chains to fuse (see `chains:` in models/*.yaml)")
        if not subjects and not chains:
            raise SpecError("mapper sweep", "", "nothing to search")
        archs = _archs(args)
        spec = SweepSpec(name="sweep", archs=archs, mapspaces=(), strategies=("greedy", "joint"),
                         objectives=("edp",), subjects=tuple(subjects), chains=tuple(chains))
    spec = _apply_flags(spec, args)
    _einsum_flags(spec, args)
    return spec


# flags that set how one einsum's point is searched: a fusion study (an op graph) takes none
EINSUM_FLAGS = (("strategy", "--strategy"), ("objective", "--objective"), ("samples", "--samples"),
                ("seed", "--seed"), ("cpsat_seconds", "--cpsat-seconds"), ("no_warm_start", "--no-warm-start"),
                ("export_timeloop", "--export-timeloop"))


def _einsum_flags(spec, args) -> None:
    """A sweep of op graphs alone given a flag of one-einsum points: said, not ignored."""
    if spec.subjects or not spec.chains:
        return
    given = [flag for attr, flag in EINSUM_FLAGS if getattr(args, attr, None) not in (None, False)]
    if given:
        raise SpecError(given[0], "", "applies to one-einsum points (--gemm, a one-einsum --workload, --model's "
                        "layers); this sweep holds only op graphs, each a fusion study (objective energy, each "
                        "op's mapping the joint search's), which take --time-limit, --max-evaluations and --mapspace")


def _archs(args) -> tuple:
    """ARCH[,ARCH...], each with the grid of `--vary` when given."""
    from ..load import load_arch
    from .arch_grid import vary_flags
    from .spec import _load, varied_archs
    where = Where("mapper sweep") / "ARCH"
    if not args.vary:
        return tuple(_load(load_arch, name, where) for name in _split(args.target))
    varies = vary_flags(args.vary, Where("--vary"))
    return tuple(arch for name in _split(args.target) for arch in varied_archs(name, varies, where, Where("--vary")))


def _apply_flags(spec, args):
    """Flags given on the command line override the sweep file's values."""
    from dataclasses import replace
    from ..load import load_constraints
    from .spec import _load, _strategies, objectives
    changes = {}
    if args.strategy:
        changes["strategies"] = _strategies(_split(args.strategy), Where("--strategy"))
    if args.objective:
        changes["objectives"] = objectives(_split(args.objective), spec.archs, Where("--objective"))
    if args.mapspace:
        changes["mapspaces"] = tuple(_load(load_constraints, n, Where("--mapspace")) for n in _split(args.mapspace))
    elif not spec.mapspaces:
        changes["mapspaces"] = (load_constraints(None),)
    settings = spec.settings
    for flag, name in (("time_limit", "time_limit"), ("cpsat_seconds", "cpsat_seconds"), ("seed", "seed"),
                       ("samples", "samples"), ("max_evaluations", "max_evaluations")):
        value = getattr(args, flag)         # validated by its argparse type (`flags`)
        if value is not None:
            settings = replace(settings, **{name: value})
    changes["settings"] = settings
    if args.no_warm_start:
        changes["warm_start"] = False
    return replace(spec, **changes)


def sweep_command(args) -> int:
    from .points import expand_points
    from .report import failed_rows, sweep_text
    from .runner import run_points
    spec = build_spec(args)
    points = expand_points(spec)
    with Store(args.db) as store:
        run = run_points(points, store, jobs=args.jobs, scheduler=args.scheduler, warm_start=spec.warm_start,
                         progress=not args.quiet, retry_failed=args.retry_failed)
        rows = {row["key"]: row for row in store.rows({p.key for p in points})}
        fused, failed_chains = _run_chains(spec, store, args) if spec.chains else ("", [])
    print(sweep_text(run, rows, args.db) + fused if points else fused.lstrip("\n"))
    if args.plot:
        from .plots import write_plots
        written = write_plots(points, rows, Path(args.plot))
        print("\nplots:\n" + "\n".join(f"  {p}" for p in written) if written else "\nplots: nothing to plot")
    if args.export_timeloop:
        from .export import export_timeloop
        written, skipped = export_timeloop(points, rows, Path(args.export_timeloop))
        print(f"\nTimeloop mappings: {len(written)} file(s) in {args.export_timeloop}"
              + "".join(f"\n  {line}" for line in skipped))
    # a chain point (a fusion study) without a result fails the sweep as a layer point does
    failed = failed_rows(run, rows) + failed_chains
    if failed and not args.keep_going:
        print(f"mapper: {len(failed)} sweep point(s) found no mapping (the report lists them; "
              "--keep-going exits with status 0)", file=sys.stderr)
        return 1
    return 0


def _run_chains(spec, store, args) -> tuple[str, list[dict]]:
    """`--fuse`: the chain points (after the layer points): their report, and their rows
    without a result (failed now or found so in the store)."""
    import time
    from .fused import chain_points, run_chain_points
    from .fused_report import fused_text
    from .points import expand_points
    from .fusion_grid import legality_text
    started = time.perf_counter()
    cps = chain_points(spec)
    computed, skipped = run_chain_points(cps, store, args.jobs, args.scheduler, args.retry_failed)
    chain_rows = {row["key"]: row for row in store.rows({p.key for p in cps})}
    layer_points = expand_points(spec)
    rows = {row["key"]: row for row in store.rows({p.key for p in layer_points})}
    head = (f"\n\n{len(cps)} chain point(s) (fusion studies): {len(computed)} studied in "
            f"{time.perf_counter() - started:.1f} s, {skipped} already in {args.db}, "
            f"{sum(r['status'] != 'ok' for r in computed)} failed\n\n")
    failed = [chain_rows[k] for k in dict.fromkeys(p.key for p in cps)
              if k in chain_rows and chain_rows[k]["status"] != "ok"]
    legal = legality_text(list(chain_rows.values()))
    return head + fused_text(cps, chain_rows, layer_points, rows) + (f"\n\n{legal}" if legal else ""), failed


SCALARS = tuple(n for n in NAMES if n not in ("sizes", "mapping", "tiles", "cost", "notes", "settings",
                                                 "model_inputs"))


def results_command(args) -> int:
    try:
        return _results(args)
    except BrokenPipeError:          # `mapper results --csv - | head`: the reader has enough
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _results(args) -> int:
    if not Path(args.db).is_file():
        raise MapperError(f"{args.db}: no results store here (run `mapper sweep` first, or give --db FILE)")
    with Store(args.db) as store:
        rows = store.rows()
    if args.plot and not args.pareto:
        raise SpecError("--plot", "", "draws the Pareto fronts: give --pareto A,B[,C] with it")
    if args.pareto:
        from .fronts import fronts, fronts_text
        from .pareto import figure_columns
        figures = figure_columns(args.pareto)
        found = fronts(rows, tuple(column for _, column in figures))
        print(fronts_text(found, figures))
        legal = _legality(rows)
        if legal:
            print("\n" + legal)
        if args.plot:
            from .pareto_plot import write_fronts
            written = write_fronts(found, figures, Path(args.plot))
            print("\nplots:\n" + "\n".join(f"  {p}" for p in written) if written else "\nplots: no front to draw")
        return 0
    if args.jsonl:
        with _open(args.jsonl) as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
        return 0
    if args.csv:
        dims = list(dict.fromkeys(d for row in rows for d in (row["sizes"] or {})))
        columns = [("size_" + d) if d in NAMES else d for d in dims]
        with _open(args.csv) as out:
            writer = csv.writer(out)
            writer.writerow(list(SCALARS) + columns + ["settings", "model_inputs", "mapping", "tiles", "notes"])
            for row in rows:
                sizes = row["sizes"] or {}
                writer.writerow([row[n] for n in SCALARS] + [sizes.get(d, "") for d in dims]
                                + [json.dumps(row[n]) for n in ("settings", "model_inputs", "mapping", "tiles", "notes")])
        return 0
    from ..report import table
    lines = [[row["status"], row["arch"], row["workload"], row["strategy"], row["objective"],
              "-" if row["score"] is None else f"{row['score']:.4g}", row["bottleneck"] or "-",
              {1: "yes", 0: "no", None: "-"}[row["optimal"]], f"{row['search_seconds'] or 0:.2f}"]
             for row in rows]
    print(table(["status", "arch", "workload", "strategy", "objective", "score", "bottleneck", "optimal",
                 "seconds"], lines, align_left=5))
    print(f"{len(rows)} point(s) in {args.db}")
    legal = _legality(rows)
    if legal:
        print("\n" + legal)
    return 0


def _legality(rows: list[dict]) -> str:
    from .fusion_grid import legality_text
    return legality_text(rows)


class _open:
    """A file to write, or standard output for '-'."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.handle = sys.stdout if self.name == "-" else open(self.name, "w", newline="")
        return self.handle

    def __exit__(self, *exc):
        if self.handle is not sys.stdout:
            self.handle.close()
