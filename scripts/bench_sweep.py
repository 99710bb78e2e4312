"""Benchmark: sweep throughput, cold and cached, and what warm starts save.

    python scripts/bench_sweep.py [--points 60] [--strategy greedy] [--time-limit S]
                                  [--modes 1,all,dask] [--warm-saving] [--warm-shapes 8]

A GEMM grid on `h100` (m and n over 256..4096, k over 128..16384, the first `--points` shapes;
the default 60 runs in about two minutes on 2 cores, `--points 200` is the full grid) is swept into a fresh store with 1 process, with every local core and on a 2-worker Dask
LocalCluster (when dask.distributed is installed); each line gives the wall time (pool or
cluster start included) and points per second, and whether its rows equal the 1-process rows.
Then the same sweep is run again on the filled store: every point is cached.

`--warm-saving` also runs a joint sweep over `--warm-shapes` GEMMs twice, cold and warm-started
from finished neighbours (one process, so the order is the same), and compares the scores
reached within the same time limit and the seconds to the best mapping.
"""
from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from pathlib import Path

from mapper.sweep.points import expand_points
from mapper.sweep.runner import default_jobs, run_points
from mapper.sweep.spec import sweep_from_dict
from mapper.sweep.store import Store
from mapper.units import Where

GEMM = "Z[m,n] += A[m,k] * B[k,n]"
COMPARED = ("key", "status", "score", "energy_pj", "cycles", "mapping")


def gemm_points(count: int, strategy: str, time_limit: float, shapes=None):
    """The first `count` shapes of the grid (smallest k first), as sweep points."""
    grid = shapes or list(itertools.product([256, 512, 1024, 2048, 4096], [256, 512, 1024, 2048, 4096],
                                            [128, 256, 512, 1024, 2048, 4096, 8192, 16384]))
    grid = sorted(grid, key=lambda s: (s[2], s[0], s[1]))[:count]
    entries = [{"einsum": GEMM, "name": "gemm", "sizes": {"m": m, "n": n, "k": k}, "dtype": "bf16",
                "dtypes": {"Z": "fp32"}} for m, n, k in grid]
    spec = sweep_from_dict({"archs": ["h100"], "strategies": [strategy], "time_limit": time_limit,
                            "workloads": entries}, Where("bench_sweep"))
    return expand_points(spec)


def answers(db: Path) -> dict:
    with Store(db) as store:
        return {r["key"]: tuple(str(r[c]) for c in COMPARED) for r in store.rows()}


def timed(points, db: Path, **how) -> tuple[float, object]:
    with Store(db) as store:
        start = time.perf_counter()
        run = run_points(points, store, progress=False, **how)
        return time.perf_counter() - start, run


def throughput(args, tmp: Path) -> None:
    points = gemm_points(args.points, args.strategy, args.time_limit)
    cores = default_jobs()
    print(f"{len(points)} {args.strategy} points (GEMMs on h100, time limit {args.time_limit:g} s), "
          f"{cores} local core(s)\n")
    print(f"{'how':<28} {'seconds':>8} {'points/s':>9} {'load avg':>9}  rows equal to 1 process")
    reference = None
    modes = args.modes.split(",")
    labels = {"1": "1 process", "all": f"{cores} local processes", "dask": "2-worker Dask LocalCluster"}
    for mode in modes:
        db = tmp / f"{mode}.sqlite"
        load = os.getloadavg()[0]         # other work on the machine: the figures depend on it
        if mode == "1":
            seconds, run = timed(points, db, jobs=1)
        elif mode == "all":
            seconds, run = timed(points, db, jobs=cores)
        elif mode == "dask":
            try:
                from distributed import LocalCluster
            except ImportError:
                print(f"{labels[mode]:<28} (dask.distributed is not installed)")
                continue
            # Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536 unless the environment
            # sets it; that fixed threshold turns off glibc's adaptive one, and every large numpy
            # temporary is then mapped and unmapped afresh (2-4x slower searches, measured here)
            os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(128 * 2**20))
            os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 * 2**20))
            start = time.perf_counter()
            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
                seconds, run = timed(points, db, scheduler=cluster.scheduler_address)
            seconds = time.perf_counter() - start           # the cluster's start and stop included
        else:
            raise SystemExit(f"unknown mode {mode!r} (1, all, dask)")
        rows = answers(db)
        same = "-" if reference is None else ("yes" if rows == reference else
                                              f"no ({sum(rows.get(k) != v for k, v in reference.items())} differ)")
        reference = reference or rows
        failed = f", {run.failures} without a mapping" if run.failures else ""
        load = max(load, os.getloadavg()[0])
        print(f"{labels[mode]:<28} {seconds:8.1f} {len(run.computed) / seconds:9.2f} {load:9.1f}  {same}{failed}")
    cached = tmp / f"{modes[0]}.sqlite"
    seconds, run = timed(points, cached, jobs=1)
    print(f"{'re-run, every point cached':<28} {seconds:8.2f} {len(points) / seconds:9.0f} {'':>9}  "
          f"({run.skipped} skipped, {len(run.computed)} searched)")


def warm_saving(args, tmp: Path) -> None:
    shapes = [(m, 4096, k) for m in (512, 1024, 2048, 4096) for k in (1024, 4096)][:args.warm_shapes]
    points = gemm_points(len(shapes), "joint", args.warm_time_limit, shapes)
    print(f"\nwarm starts: {len(points)} joint points (GEMMs on h100, time limit {args.warm_time_limit:g} s), "
          "one process, cold then warm")
    runs = {}
    for label, warm in (("cold", False), ("warm", True)):
        seconds, run = timed(points, tmp / f"warm-{label}.sqlite", jobs=1, warm_start=warm)
        runs[label] = {r["key"]: r for r in run.computed}
        print(f"  {label}: {seconds:.1f} s")
    print(f"  {'shape':<18} {'cold score':>11} {'warm score':>11} {'warm/cold':>9} {'cold best at':>12} "
          f"{'warm best at':>12}  neighbours admitted")
    ratios, to_best = [], []
    for key, cold in runs["cold"].items():
        warm = runs["warm"][key]
        shape = "x".join(str(v) for v in cold["sizes"].values())
        if cold["status"] != "ok" or warm["status"] != "ok":
            print(f"  {shape:<18} cold {cold['status']}, warm {warm['status']}")
            continue
        ratios.append(warm["score"] / cold["score"])
        if warm["warm_admitted"]:
            to_best.append((cold["seconds_to_best"], warm["seconds_to_best"]))
        print(f"  {shape:<18} {cold['score']:11.4g} {warm['score']:11.4g} {ratios[-1]:9.3f} "
              f"{cold['seconds_to_best']:11.2f}s {warm['seconds_to_best']:11.2f}s  "
              f"{warm['warm_admitted'] or 0} of {warm['warm_given'] or 0}")
    if ratios:
        import math
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"  geometric mean warm/cold score: {geo:.3f} ({(1 - geo):+.1%} lower with warm starts); "
              f"better in {sum(r < 1 - 1e-9 for r in ratios)}, equal in {sum(abs(r - 1) <= 1e-9 for r in ratios)}, "
              f"worse in {sum(r > 1 + 1e-9 for r in ratios)}")
    if to_best:
        cold_s, warm_s = (sorted(x)[len(x) // 2] for x in zip(*to_best))
        print(f"  where a neighbour was admitted ({len(to_best)} points): median seconds to the best mapping "
              f"{cold_s:.2f} cold, {warm_s:.2f} warm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=60, help="GEMM shapes (at most 200; 0: skip)")
    parser.add_argument("--strategy", default="greedy")
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--modes", default="1,all,dask", help="comma-separated: 1, all, dask")
    parser.add_argument("--warm-saving", action="store_true")
    parser.add_argument("--warm-shapes", type=int, default=8)
    parser.add_argument("--warm-time-limit", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.points:
            throughput(args, Path(tmp))
        if args.warm_saving:
            warm_saving(args, Path(tmp))


if __name__ == "__main__":
    main()
