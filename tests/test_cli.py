"""`mapper evaluate` end to end: text and JSON output, and the JSON mapping feeds back in."""
import json
import subprocess
import sys

import yaml

from mapper.cli import main


def run_json(capsys, *args):
    assert main(list(args) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_evaluate_json_has_the_promised_fields(capsys):
    out = run_json(capsys, "evaluate", "toy", "gemm-256", "toy-gemm-256-os")
    assert out["arch"] == "toy" and out["workload"] == "gemm-256"
    cost = out["cost"]
    for key in ("energy_pj", "cycles", "edp", "macs", "utilization", "levels"):
        assert key in cost
    assert cost["macs"] == 256 ** 3
    assert cost["edp"] == cost["energy_pj"] * cost["cycles"]
    # Timeloop's figures for this mapping (tests/data/timeloop_cases.yaml, local_gemm256...).
    assert cost["levels"]["DRAM"]["B"] == {"reads": 262144, "fills": 0, "updates": 0}
    assert cost["levels"]["RegisterFile"]["Z"] == {"reads": 65280, "fills": 0, "updates": 65536}


def test_json_mapping_feeds_back(tmp_path, capsys):
    first = run_json(capsys, "evaluate", "toy", "gemm-256", "toy-gemm-256-os")
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump({"mapping": first["mapping"]}))
    second = run_json(capsys, "evaluate", "toy", "gemm-256", str(path))
    assert second["cost"] == first["cost"]


def test_text_output_names_levels_and_bottleneck(capsys):
    assert main(["evaluate", "toy", "gemm-256", "toy-gemm-256-os"]) == 0
    out = capsys.readouterr().out
    for word in ("DRAM", "GlobalBuffer", "RegisterFile", "bottleneck", "utilization", "pJ/MAC"):
        assert word in out


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "mapper", "presets"], capture_output=True, text=True)
    assert done.returncode == 0 and "h100" in done.stdout and "gemm-4096" in done.stdout


def test_only_the_command_keeps_openblas_to_one_thread():
    """The `mapper` command (console script or `python -m mapper`) sets OPENBLAS_NUM_THREADS
    to 1 before numpy is imported, where it is unset; a program importing mapper keeps its own."""
    import os
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    show = "import mapper, os, numpy; print(os.environ.get('OPENBLAS_NUM_THREADS'))"
    for argv0, expected in (("-m", "1"), ("/usr/bin/mapper", "1"), ("my_program.py", "None"), ("-c", "None")):
        code = f"import sys; sys.argv = [{argv0!r}]; {show}"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        assert out.stdout.strip() == expected, argv0
    out = subprocess.run([sys.executable, "-c", f"import sys; sys.argv = ['-m']; {show}"], capture_output=True,
                         text=True, env={**env, "OPENBLAS_NUM_THREADS": "4"}, check=True)
    assert out.stdout.strip() == "4"
