"""An evaluation budget (`--max-evaluations`) makes a search reproducible: the same inputs,
seed and budget give byte-identical `--json` in separate processes, for every strategy; and
the result says that this budget, not the time limit, stopped it, with the count it counts."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def search(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mapper", "search", *args, "--json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


# small enough for exhaustive (7.3M mappings on toy), large enough that 3,000 do not cover it
GEMM = """name: gemm-32
einsum: "Z[m,n] += A[m,k] * B[k,n]"
sizes: {m: 32, n: 32, k: 16}
dtype: int8
"""


# joint (CP-SAT, dives, the walk: seeded, like random's draws) in the default run; the others
# in the slow run (two interpreters each: seconds)
@pytest.mark.parametrize("strategy", [pytest.param("exhaustive", marks=pytest.mark.slow),
                                      pytest.param("random", marks=pytest.mark.slow),
                                      pytest.param("greedy", marks=pytest.mark.slow), "joint"])
def test_two_processes_print_byte_identical_json(strategy, tmp_path):
    (tmp_path / "gemm.yaml").write_text(GEMM)
    argv = ["toy", str(tmp_path / "gemm.yaml"), "--strategy", strategy, "--max-evaluations", "3000"]
    argv += ["--seed", "7"] if strategy in ("random", "joint") else []
    argv += ["--cpsat-seconds", "0.5"] if strategy == "joint" else []
    first, second = search(*argv), search(*argv)        # side by side: load differs between them
    (out_a, err_a), (out_b, err_b) = first.communicate(timeout=120), second.communicate(timeout=120)
    assert first.returncode == second.returncode == 0, (err_a + err_b).decode()
    assert out_a == out_b
    result = json.loads(out_a)["search"]
    assert "seconds" not in result and result["evaluated"] > 0


def test_the_note_names_the_evaluation_budget_and_its_count():
    budget = 5000
    process = search("eyeriss", "conv-resnet50-conv3", "--strategy", "joint", "--max-evaluations", str(budget))
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err.decode()
    result = json.loads(out)["search"]
    assert result["complete"] is False
    notes = " ".join(result["notes"])
    assert f"stopped by the evaluation budget ({budget:,} mappings)" in notes
    assert "time limit" not in notes
    # the count is the budget's own (every row priced), so it reaches the budget; the last
    # batch priced may carry it past, by at most one chunk of the walk
    assert budget <= result["evaluated"] <= budget + 64_000
