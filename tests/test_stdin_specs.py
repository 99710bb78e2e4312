"""`-` as a spec reads standard input (`mapper evaluate ARCH WORKLOAD -`, a mapping piped
from `mapper search --json` or a generator); its errors name `<stdin>`."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import mapper
from mapper.cli import main

ROOT = Path(mapper.__file__).resolve().parents[1]


def test_evaluate_reads_the_mapping_from_standard_input(monkeypatch, capsys):
    text = (ROOT / "mappings" / "toy-gemm-256-os.yaml").read_text()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["evaluate", "toy", "gemm-256", "-", "--json"]) == 0
    from_stdin = json.loads(capsys.readouterr().out)
    assert main(["evaluate", "toy", "gemm-256", "toy-gemm-256-os", "--json"]) == 0
    assert from_stdin == json.loads(capsys.readouterr().out)


def test_a_bad_mapping_on_standard_input_is_named_stdin(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"mapping: [{level: Nope}]\n")))
    assert main(["evaluate", "toy", "gemm-256", "-"]) == 2
    assert capsys.readouterr().err.startswith("mapper: error: <stdin>: mapping[0].level: no level 'Nope'")


def test_a_search_piped_into_evaluate():
    search = subprocess.run([sys.executable, "-m", "mapper", "search", "toy", "gemm-256", "--strategy", "greedy",
                             "--max-evaluations", "2000", "--json"], capture_output=True, cwd=ROOT, check=True)
    evaluate = subprocess.run([sys.executable, "-m", "mapper", "evaluate", "toy", "gemm-256", "-", "--json"],
                              input=search.stdout, capture_output=True, cwd=ROOT)
    assert evaluate.returncode == 0, evaluate.stderr.decode()
    assert json.loads(evaluate.stdout)["cost"] == json.loads(search.stdout)["cost"]
