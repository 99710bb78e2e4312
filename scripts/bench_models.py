"""Benchmark: whole models swept on an architecture, every point with the default mapspace.

    python scripts/bench_models.py [--arch h100] [--time-limit S] [--only SUBSTRING] [--write docs/RESULTS.md]

Per model (and phase): the points mapped and proven optimal, the largest proven gap among the
others, the wall time of the whole sweep on all local cores and the peak resident memory of
its largest process. Each sweep runs as a user runs it (`mapper sweep ARCH --model M ...
--strategy joint`) into a fresh results file, read back with `mapper results --jsonl -`.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import Table, bench_parser

# (label, the sweep's model flags)
MODELS = [
    ("llama-7b prefill 2048", ["--model", "llama-7b", "--phase", "prefill", "--seq", "2048"]),
    ("llama-7b decode b1,64", ["--model", "llama-7b", "--phase", "decode", "--seq", "2048", "--batch", "1,64"]),
    ("bert-base seq128", ["--model", "bert-base"]),
    ("resnet50 batch1", ["--model", "resnet50"]),
    ("gpt2 prefill 1024", ["--model", "gpt2", "--phase", "prefill"]),
]


_MEASURED = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def sweep(arch: str, flags: list[str], time_limit: float, db: Path) -> tuple[list[dict], float, float]:
    """The points of one sweep, its wall seconds and the peak MiB of its largest process."""
    command = [sys.executable, "-m", "mapper", "sweep", arch, *flags, "--strategy", "joint",
               "--time-limit", str(time_limit), "--db", str(db), "--quiet"]
    start = time.perf_counter()
    # through a process of its own, whose children's peak is this sweep's alone
    peak_kib = subprocess.run([sys.executable, "-c", _MEASURED, *command], check=True,
                              capture_output=True, text=True).stdout.split()[-1]
    seconds = time.perf_counter() - start
    peak = int(peak_kib) / 1024
    out = subprocess.run([sys.executable, "-m", "mapper", "results", "--db", str(db), "--jsonl", "-"],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()], seconds, peak


def main() -> None:
    parser = bench_parser(__doc__, "models")
    parser.add_argument("--arch", default="h100")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds per point (default 120)")
    args = parser.parse_args()
    table = Table()
    table.print(f"{'model':24} {'arch':8} {'points':>6} {'mapped':>6} {'proven':>6} {'largest gap':>11} "
                f"{'wall s':>7} {'peak MiB':>8}")
    for label, flags in MODELS:
        if args.only and args.only not in label:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            rows, seconds, peak = sweep(args.arch, flags, args.time_limit, Path(tmp) / "results.sqlite")
        mapped = [r for r in rows if r["status"] == "ok"]
        proven = [r for r in mapped if r["optimal"]]
        gaps = [r["gap"] for r in mapped if not r["optimal"] and r["gap"] is not None]
        largest = f"{max(gaps):.1%}" if gaps else ("-" if len(proven) == len(rows) else "unknown")
        table.print(f"{label:24} {args.arch:8} {len(rows):6} {len(mapped):6} {len(proven):6} {largest:>11} "
                    f"{seconds:7.1f} {peak:8.0f}")
    table.write(args.write, "bench_models")


if __name__ == "__main__":
    main()
