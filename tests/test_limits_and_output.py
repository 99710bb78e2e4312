"""Budgets that hold, Ctrl-C that keeps the best, reproducible evaluation budgets, and output
that its readers accept (strict JSON, a closed pipe, `evaluate` reading `search --json`)."""
from __future__ import annotations

import contextlib
import io
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mapper.cli import main
from mapper.report import strict_json

ROOT = Path(__file__).resolve().parents[1]
LOAD_ALLOWANCE_S = 1.0

# random draws until its time is up (its default count would end it first)
SAMPLES = {"random": ["--samples", "100000000"], "joint": [], "greedy": []}


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def strict(text: str):
    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_strict_json_has_no_nan_or_infinity():
    data = {"a": math.inf, "b": [-math.inf, math.nan, 1.5], "c": {"d": 2}}
    assert strict(strict_json(data)) == {"a": "inf", "b": ["-inf", None, 1.5], "c": {"d": 2}}


@pytest.mark.parametrize("strategy", ["joint", "greedy", "random"])
def test_same_evaluation_budget_gives_byte_identical_json(strategy):
    argv = ["search", "toy", "gemm-256", "--strategy", strategy, "--max-evaluations", "4000", "--json"]
    argv += ["--cpsat-seconds", "0.5"] if strategy == "joint" else []
    first, second = run(argv), run(argv)
    assert first[0] == 0 and first == second
    search = strict(first[1])["search"]
    assert "seconds" not in search and search["evaluated"] > 0


def test_a_smaller_evaluation_budget_prices_fewer_mappings():
    small = strict(run(["search", "toy", "gemm-256", "--strategy", "random", "--max-evaluations", "3000",
                        "--json"])[1])["search"]
    large = strict(run(["search", "toy", "gemm-256", "--strategy", "random", "--max-evaluations", "60000",
                        "--json"])[1])["search"]
    assert small["evaluated"] < large["evaluated"] and not small["complete"]


# joint (the costliest to stop) in the default run; every strategy's budget is checked in process
# there too (test_search.py::test_time_budget_is_honoured); greedy and random as commands in the slow run
@pytest.mark.parametrize("strategy", ["joint", pytest.param("greedy", marks=pytest.mark.slow),
                                      pytest.param("random", marks=pytest.mark.slow)])
def test_time_limit_holds_on_a_large_convolution(strategy):
    limit = 3.0
    start = time.perf_counter()
    status, out, _ = run(["search", "eyeriss", "conv-resnet50-conv3", "--strategy", strategy,
                          "--time-limit", str(limit), "--json"] + SAMPLES[strategy])
    elapsed = time.perf_counter() - start
    assert status == 0
    # the target is 10% or 0.5 s (scripts/bench_limits.py measures it); the test allows one more
    # second for a machine shared with other jobs, where a step between two budget checks slows
    assert elapsed <= max(1.1 * limit, limit + 0.5) + LOAD_ALLOWANCE_S, elapsed
    search = strict(out)["search"]
    assert search["optimal"] is False
    # greedy's descent may finish within the limit on a quiet machine (one vectorised quick
    # look per level): then, and only then, it is complete
    assert search["complete"] is False or (strategy == "greedy" and elapsed < limit), search
    if strategy == "joint":
        assert 0 < search["gap"] < 1


def test_evaluate_reads_what_search_json_prints(tmp_path):
    status, out, _ = run(["search", "toy", "gemm-256", "--strategy", "random", "--max-evaluations", "3000",
                          "--json"])
    assert status == 0
    found = tmp_path / "found.json"
    found.write_text(out)
    status, again, _ = run(["evaluate", "toy", "gemm-256", str(found), "--json"])
    assert status == 0 and strict(again)["cost"] == strict(out)["cost"]


def test_evaluate_reads_a_padded_result_back(tmp_path):
    padded = {"padded": True, "mapping": [
        {"level": "DRAM", "loops": [{"dim": "m", "bound": 3}]},
        {"level": "GlobalBuffer", "loops": [{"dim": "k", "bound": 5}]},
        {"level": "RegisterFile", "loops": [{"dim": "n", "bound": 4}]}]}
    workload = tmp_path / "w.yaml"
    workload.write_text(yaml.safe_dump({"name": "w", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                        "sizes": {"m": 3, "n": 4, "k": 5}, "dtype": "int8"}))
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(padded))
    assert run(["evaluate", "toy", str(workload), str(tmp_path / "m.yaml"), "--json"])[0] == 0
    padded["mapping"][0]["loops"][0]["bound"] = 4          # m padded from 3 to 4
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(padded))
    status, out, err = run(["evaluate", "toy", str(workload), str(tmp_path / "m.yaml"), "--json"])
    assert status == 0, err
    assert strict(out)["padded"] is True
    (tmp_path / "out.json").write_text(out)
    status, again, err = run(["evaluate", "toy", str(workload), str(tmp_path / "out.json"), "--json"])
    assert status == 0, err
    assert strict(again)["cost"] == strict(out)["cost"]


def test_version():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and out.getvalue().startswith("mapper ")


def test_closed_pipe_is_quiet():
    process = subprocess.Popen([sys.executable, "-m", "mapper", "presets"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()           # the reader goes away before the first line
    err = process.stderr.read().decode()
    assert process.wait(timeout=30) == 141 and err == ""


# greedy's whole descent on the eyeriss conv takes about 2.4 s now (only the children that
# fit are generated): it gets a case whose descent takes about 10 s, so that 3 s is mid-way
# the joint search's Ctrl-C (forked workers, CP-SAT's thread) in the default run, greedy's and
# random's in the slow run (a subprocess each: seconds)
@pytest.mark.parametrize("strategy, case", [("joint", ["eyeriss", "conv-resnet50-conv3"]),
                                            pytest.param("greedy", ["h100", "conv-resnet50-conv3", "--mapspace",
                                                                    "unaligned"], marks=pytest.mark.slow),
                                            pytest.param("random", ["eyeriss", "conv-resnet50-conv3"],
                                                         marks=pytest.mark.slow)])
def test_ctrl_c_prints_the_best_so_far(strategy, case):
    process = subprocess.Popen([sys.executable, "-m", "mapper", "search", *case,
                                "--strategy", strategy, "--time-limit", "120", "--json", *SAMPLES[strategy]], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)
    sent = time.perf_counter()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert time.perf_counter() - sent < 2.0
    assert process.returncode == 130, err
    assert "Traceback" not in err
    search = strict(out)["search"]
    assert search["complete"] is False and any("Ctrl-C" in note for note in search["notes"])
