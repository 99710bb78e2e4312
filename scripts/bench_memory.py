"""Peak memory of the largest preset searches, against the 1 GB the tool promises.

Each case is one `mapper search ... --time-limit T --json` process (the checkout's code, via
`bench_limits.run_case`); its peak resident memory (ru_maxrss of that process: the interpreter,
numpy, the mapspace tables and the search's own state) is read when it exits. Memory grows
with how long a search runs (the joint search's open nodes), so the default limit is the
longest of the budget table's.

    python3 scripts/bench_memory.py [--time-limit 10] [--strategies joint,greedy,random,exhaustive]
                                    [--cases eyeriss:conv-resnet50-conv3,...]
"""
from __future__ import annotations

import argparse

from bench_limits import CASES, STRATEGIES, run_case

LIMIT_MIB = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(f"{'case':34} {'strategy':10} {'limit':>5} {'wall':>6} {'peak MiB':>8}  result")
    peaks = []
    for case in args.cases.split(","):
        arch, workload = case.split(":")
        for strategy in args.strategies.split(","):
            row = run_case(arch, workload, strategy, args.time_limit)
            peaks.append(row["peak_mib"])
            result = f"evaluated={row['evaluated']:,}" if row["rc"] == 0 else f"rc={row['rc']} {row['error']}"
            print(f"{case:34} {strategy:10} {row['limit']:5.1f} {row['wall']:6.2f} {row['peak_mib']:8.0f}  "
                  f"{'under' if row['peak_mib'] < LIMIT_MIB else 'OVER '} 1 GiB  {result}", flush=True)
    print(f"\nlargest peak: {max(peaks):.0f} MiB ({'under' if max(peaks) < LIMIT_MIB else 'OVER'} "
          f"{LIMIT_MIB} MiB)")


if __name__ == "__main__":
    main()
