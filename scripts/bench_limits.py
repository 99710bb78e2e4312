"""Budgets and memory of the largest preset searches, run as a user runs them.

Each case is one `mapper search ... --time-limit T --json` process (the checkout's code), so
the figures include reading the specs, building the mapspace and printing: the wall seconds
from start to exit against the limit (the budget holds when they stay within 10% or 0.5 s of
it), and the process's peak resident memory (ru_maxrss, the interpreter and numpy included).

    python3 scripts/bench_limits.py [--time-limit 1,5,10] [--strategies joint,greedy,random,exhaustive]
                                    [--cases eyeriss:conv-resnet50-conv3,...]

`--slowdown F` runs each search process 1/F of the time (stopped and continued every 30 ms),
as on a machine F times as loaded, without loading this one. Random search draws until the
limit (`--samples 10**9`). A search that refuses its space up front (exhaustive above its size
limit) is listed as refused: the budget is not what ended it.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ["eyeriss:conv-resnet50-conv3", "eyeriss:conv-resnet50-conv1", "tpu:conv-resnet50-conv3",
         "tpu:conv-alexnet-conv3", "h100:gemm-16384", "h100:gemm-4096"]
STRATEGIES = ["joint", "greedy", "random", "exhaustive"]


def run_case(arch: str, workload: str, strategy: str, limit: float, slowdown: float = 1.0) -> dict:
    command = [sys.executable, "-m", "mapper", "search", arch, workload, "--strategy", strategy,
               "--time-limit", str(limit), "--json"]
    if strategy == "random":
        command += ["--samples", str(10**9)]     # draws until the limit, not its default 200,000
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=out_file, stderr=err_file)
        done = threading.Event()
        if slowdown > 1:
            threading.Thread(target=_throttle, args=(process.pid, slowdown, done), daemon=True).start()
        _, status, usage = os.wait4(process.pid, 0)       # this child's own peak memory
        done.set()
        wall = time.perf_counter() - start
        out_file.seek(0), err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    process.returncode = os.waitstatus_to_exitcode(status)
    peak_mib = usage.ru_maxrss / 1024
    row = {"arch": arch, "workload": workload, "strategy": strategy, "limit": limit,
           "wall": wall, "over": wall - limit, "peak_mib": peak_mib, "rc": process.returncode}
    if process.returncode == 0:
        search = json.loads(out)["search"]
        row.update(optimal=search["optimal"], gap=search["gap"], evaluated=search["evaluated"])
    else:
        row["error"] = err.decode(errors="replace").strip().splitlines()[-1][:100] if err else ""
    return row


def _throttle(pid: int, slowdown: float, done: threading.Event, period: float = 0.03) -> None:
    """Run process `pid` 1/`slowdown` of the time (SIGSTOP / SIGCONT every `period` s): a
    machine `slowdown` times as loaded, without loading the one this runs on."""
    running = period / slowdown
    while not done.is_set():
        time.sleep(running)
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(period - running)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", default="5", help="seconds, or a comma-separated list of them")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--slowdown", type=float, default=1.0,
                        help="run each search this many times slower (SIGSTOP/SIGCONT), as on a loaded machine")
    args = parser.parse_args()
    print(f"{'case':34} {'strategy':10} {'limit':>5} {'wall':>6} {'over':>6} {'peak MiB':>8}  result")
    cases = [(case.split(":")[0], case.split(":")[1], strategy, float(limit))
             for limit in args.time_limit.split(",") for case in args.cases.split(",")
             for strategy in args.strategies.split(",")]
    worst = {}
    for arch, workload, strategy, limit in cases:
        case = f"{arch}:{workload}"
        row = run_case(arch, workload, strategy, limit, args.slowdown)
        holds = row["wall"] <= max(1.1 * row["limit"], row["limit"] + 0.5)
        refused = row["rc"] == 2 and "refuses" in row.get("error", "")
        if not refused:
            worst[strategy, limit] = max(worst.get((strategy, limit), -1e9), row["over"])
        result = (f"optimal={row['optimal']} gap={row['gap']} evaluated={row['evaluated']:,}"
                  if row["rc"] == 0 else f"rc={row['rc']} {row['error']}")
        print(f"{case:34} {strategy:10} {row['limit']:5.1f} {row['wall']:6.2f} {row['over']:+6.2f} "
              f"{row['peak_mib']:8.0f}  {'refused' if refused else 'holds' if holds else 'OVER '} {result}",
              flush=True)
    print("\nworst overrun (wall - limit, s) per strategy and limit:")
    for (strategy, limit), over in sorted(worst.items()):
        print(f"  {strategy:10} {limit:5.1f} {over:+6.2f}  "
              f"{'holds' if over <= max(0.1 * limit, 0.5) else 'OVER'}")


if __name__ == "__main__":
    main()
