"""Replay a GPU check's measurements against today's model, with no GPU: every config of a
`gpu_check` configs CSV (`*_configs.csv`) is priced again and ranked against its measured time.

    python scripts/gpu_replay.py CONFIGS.csv [CONFIGS.csv ...] [--arch h200] [--picks]

(e.g. docs/gpu/h200-2026-12-04/grid_all_configs.csv; several files are one set, a config timed
in more than one taking its fastest time)

Per shape it prints the Spearman correlation of predicted cycles against measured times (over
the configs the model prices; those it refuses, such as a spilling accumulator, are counted
apart), the measured time of the model's best measured config over the measured best (the
pick's share if the search could only choose among what was timed), and with `--picks` the
search's pick under the current model and its share where that config was timed (else "not
timed": the check must run again on a GPU). What a model change does to the check's figures,
before a GPU session is spent on them.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def load_check():
    spec = importlib.util.spec_from_file_location("gpu_check", HERE / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


def config_key(block_m, block_n, block_k, stages, warps, group_m) -> tuple:
    return int(block_m), int(block_n), int(block_k), int(stages), int(warps), int(group_m or 1)


def read_measured(paths: list[Path]) -> dict:
    """{shape: {config key: measured ms}} of the configs timed in `paths` (the fastest where one
    repeats)."""
    shapes = defaultdict(dict)
    for path in paths:
        with path.open() as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            ms = float(row["measured_ms"])
            if not math.isfinite(ms):
                continue
            key = config_key(row["BLOCK_M"], row["BLOCK_N"], row["BLOCK_K"], row["num_stages"],
                             row["num_warps_run"], row["GROUP_M"] or 1)
            shapes[row["shape"]][key] = min(ms, shapes[row["shape"]].get(key, math.inf))
    return shapes


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", type=Path, nargs="+")
    parser.add_argument("--arch", default="h200")
    parser.add_argument("--picks", action="store_true", help="also run the search and look its pick up")
    parser.add_argument("--time-limit", type=float, default=20.0)
    args = parser.parse_args(argv)
    check = load_check()
    from mapper.emit.common import BlockConfig
    from mapper.load import load_arch
    arch = load_arch(args.arch)
    dims = {label: (m, n, k) for label, m, n, k in check.FULL_SHAPES + check.SMALL_SHAPES}
    results = []
    print(f"{'shape':30} {'configs':>7} {'refused':>7} {'spearman':>8} {'model-best':>10} {'pick':>22}")
    for label, measured in read_measured(args.configs).items():
        m, n, k = dims[label]
        workload = check.gemm_workload(label, m, n, k, "bf16")
        keys = list(measured)
        predicted = np.array([check.predicted(arch, workload, BlockConfig(*key[:5], key[5] if key[5] > 1 else None))
                              for key in keys])
        times = np.array([measured[key] for key in keys])
        priced = np.isfinite(predicted)
        best = times.min()
        model_best = times[priced][np.argmin(predicted[priced])] if priced.any() else math.nan
        row = {"shape": label, "configs": len(keys), "refused": int((~priced).sum()),
               "spearman": check.spearman(predicted[priced], times[priced]), "model_best_share": best / model_best}
        pick_text = ""
        if args.picks:
            plan = check.parse_args(["--arch", args.arch, "--time-limit", str(args.time_limit), "--top", "2"])
            shape, _ = check.plan_shape(arch, label, m, n, k, plan)
            c = next(t.config for t in shape.tried if t.source == "pick")
            key = config_key(c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps, c.group_m or 1)
            row["pick"] = f"{c.block_m}x{c.block_n}x{c.block_k} s{c.num_stages} w{c.num_warps} g{c.group_m or 1}"
            # where the pick was not timed with its GROUP_M, the same config with another one
            # (the launch order moves a GEMM's time by a few percent), marked ~
            near = [ms for other, ms in measured.items() if other[:5] == key[:5]]
            ms = measured.get(key, min(near) if near else math.nan)
            row["pick_share"] = best / ms
            mark = "" if key in measured else "~" if near else ""
            pick_text = f"{row['pick']:>16} " + (f"{mark}{row['pick_share']:.3f}" if near else "not timed")
        results.append(row)
        print(f"{label:30} {row['configs']:7} {row['refused']:7} {row['spearman']:8.3f} "
              f"{row['model_best_share']:10.3f} {pick_text:>22}", flush=True)
    spearmans = [r["spearman"] for r in results if math.isfinite(r["spearman"])]
    shares = [r["model_best_share"] for r in results]
    print(f"(median Spearman {np.median(spearmans):.3f}; the model's best timed config >= 95% of the best on "
          f"{sum(s >= 0.95 for s in shares)}/{len(shares)} shapes, {np.mean(shares):.3f} of it on average)")
    return results


if __name__ == "__main__":
    main()
